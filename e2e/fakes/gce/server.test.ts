// The Compute Engine emulator over real HTTP (Node's fetch): the token
// endpoint and its JWT checks, the metadata server's token, bearer and scope checks, the instance and
// Operation lifecycles, requestId idempotency, list filters and pages,
// capacity and quota refusals both ways, guest-attribute host keys, the boot
// hook, preemption, rate limits, faults and the request log.
import { describe, it, expect, beforeAll, afterAll, afterEach } from '@jest/globals';
import { createPrivateKey, generateKeyPairSync, randomUUID } from 'node:crypto';
import { signJwt } from '../../../src/providers/jwt.js';
import { GOOGLE_TOKEN_URL, JWT_BEARER, startGceEmulator, type EmulatedInstance, type GceEmulator, type ServiceAccountKeyJson } from './server.js';

const ZONE = 'us-central1-a';
const COMPUTE = 'https://www.googleapis.com/auth/compute';

function assertion(key: ServiceAccountKeyJson, over: Record<string, unknown> = {}, pem = key.private_key): string {
  const now = Math.floor(Date.now() / 1000);
  return signJwt({ iss: key.client_email, scope: COMPUTE, aud: key.token_uri, iat: now, exp: now + 3600, ...over }, createPrivateKey(pem), { kid: key.private_key_id });
}

async function grant(g: GceEmulator, form: Record<string, string>) {
  const r = await fetch(g.tokenUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form).toString() });
  return { status: r.status, body: (await r.json()) as Record<string, any> };
}

async function tokenFor(g: GceEmulator, key = g.serviceAccountKey, over: Record<string, unknown> = {}): Promise<string> {
  const r = await grant(g, { grant_type: JWT_BEARER, assertion: assertion(key, over) });
  if (r.status !== 200) throw new Error(`token: ${JSON.stringify(r.body)}`);
  return r.body.access_token as string;
}

interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

async function call(g: GceEmulator, token: string | null, method: string, path: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const r = await fetch(`${g.url}/projects/${g.project}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined, headers: r.headers };
}

const instanceBody = (name: string, over: Record<string, unknown> = {}) => ({
  name,
  machineType: `zones/${ZONE}/machineTypes/e2-standard-4`,
  labels: { 'leasehold-target': 'ci', 'leasehold-installation': 'i1' },
  metadata: { items: [{ key: 'enable-guest-attributes', value: 'TRUE' }, { key: 'ssh-keys', value: 'runner:ssh-ed25519 AAAA' }] },
  scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE' },
  serviceAccounts: [{ email: 'hosts@leasehold-test.iam.gserviceaccount.com', scopes: ['https://www.googleapis.com/auth/logging.write'] }],
  ...over,
});

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function expectGoogleError(a: Answer, status: number, reason: string) {
  expect({ status: a.status, code: a.body?.error?.code, reason: a.body?.error?.errors?.[0]?.reason }).toEqual({ status, code: status, reason });
  expect(typeof a.body.error.message).toBe('string');
}

describe('Compute Engine emulator', () => {
  let g: GceEmulator;
  let token: string;
  beforeAll(async () => {
    g = await startGceEmulator();
    token = await tokenFor(g);
  });
  afterAll(() => g.stop());
  afterEach(() => {
    g.clearFaults();
    g.clearRefusals();
    g.requestsPerSecond = 0;
    Object.assign(g.orgPolicy, { forbidExternalIp: false, requireOsLogin: false, deniedServiceAccounts: [], refuseAs: 'http' });
  });

  const insert = (name: string, over: Record<string, unknown> = {}, requestId: string = randomUUID()) => call(g, token, 'POST', `/zones/${ZONE}/instances?requestId=${requestId}`, instanceBody(name, over));
  const waitOp = async (zone: string, name: string) => (await call(g, token, 'POST', `/zones/${zone}/operations/${name}/wait`)).body;

  describe('token endpoint', () => {
    it('trades a JWT signed with the issued key for a bearer token that lasts tokenTtlSeconds', async () => {
      const r = await grant(g, { grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey) });
      expect(r).toMatchObject({ status: 200, body: { token_type: 'Bearer', expires_in: 3600 } });
      expect((await call(g, r.body.access_token, 'GET', `/zones/${ZONE}/instances`)).status).toBe(200);
      expect(g.serviceAccountKey).toMatchObject({ type: 'service_account', project_id: 'leasehold-test', token_uri: g.tokenUrl, client_email: 'leasehold-controller@leasehold-test.iam.gserviceaccount.com' });
    });

    it("accepts Google's own token URL as the audience", async () => {
      expect((await grant(g, { grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey, { aud: GOOGLE_TOKEN_URL }) })).status).toBe(200);
    });

    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    it.each([
      ['a key it did not issue', () => ({ grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey, {}, other) }), 'invalid_grant', 'Invalid JWT Signature.'],
      ['another grant type', () => ({ grant_type: 'client_credentials', assertion: assertion(g.serviceAccountKey) }), 'unsupported_grant_type', undefined],
      ['no assertion', () => ({ grant_type: JWT_BEARER }), 'invalid_request', undefined],
      ['an issuer other than the signer', () => ({ grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey, { iss: 'someone@else.iam.gserviceaccount.com' }) }), 'invalid_grant', undefined],
      ['another audience', () => ({ grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey, { aud: 'https://example.com/token' }) }), 'invalid_grant', undefined],
      ['a lifetime over an hour', () => ({ grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey, { exp: Math.floor(Date.now() / 1000) + 7200 }) }), 'invalid_grant', undefined],
      ['an expired JWT', () => ({ grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey, { iat: 1000, exp: 2000 }) }), 'invalid_grant', undefined],
      ['no scope', () => ({ grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey, { scope: '' }) }), 'invalid_scope', undefined],
      ['a JWT that is not one', () => ({ grant_type: JWT_BEARER, assertion: 'not.a.jwt' }), 'invalid_grant', undefined],
    ])('refuses %s', async (_what, form, error, description) => {
      const r = await grant(g, form());
      expect(r.status).toBe(400);
      expect(r.body.error).toBe(error);
      if (description) expect(r.body.error_description).toBe(description);
    });

    it('refuses JWTs signed by a revoked key, while its earlier tokens stay good', async () => {
      const key = g.addServiceAccount('revoked');
      const before = await tokenFor(g, key);
      g.revokeKey(key.private_key_id);
      expect((await grant(g, { grant_type: JWT_BEARER, assertion: assertion(key) })).body.error).toBe('invalid_grant');
      expect((await call(g, before, 'GET', `/zones/${ZONE}/instances`)).status).toBe(200);
    });

    it('lets tokens expire', async () => {
      g.tokenTtlSeconds = 1;
      try {
        const short = await tokenFor(g);
        expect((await call(g, short, 'GET', `/zones/${ZONE}/instances`)).status).toBe(200);
        await until('the token to expire', async () => ((await call(g, short, 'GET', `/zones/${ZONE}/instances`)).status === 401 ? true : undefined), 5000);
      } finally {
        g.tokenTtlSeconds = 3600;
      }
    });

    it('logs token requests and answers an injected fault', async () => {
      g.fault({ op: 'token', mode: 'status', status: 503, times: 1 });
      const r = await grant(g, { grant_type: JWT_BEARER, assertion: assertion(g.serviceAccountKey) });
      expect(r.status).toBe(503);
      expect(g.requests.filter((q) => q.op === 'token').at(-1)).toMatchObject({ method: 'POST', path: '/token', status: 503, fault: 'status' });
    });
  });

  describe('metadata server', () => {
    const metadata = (path: string, headers: Record<string, string> = { 'metadata-flavor': 'Google' }) => fetch(`http://${g.metadataHost}/computeMetadata/v1/instance/service-accounts/default/${path}`, { headers });
    afterEach(() => {
      g.metadataServiceAccount = g.serviceAccountKey.client_email;
    });

    it("hands out a token of the attached service account that the API takes, and says the account's email", async () => {
      const r = await metadata('token');
      expect(r.status).toBe(200);
      expect(r.headers.get('metadata-flavor')).toBe('Google');
      const body = (await r.json()) as Record<string, any>;
      expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, access_token: expect.any(String) });
      expect((await call(g, body.access_token, 'GET', `/zones/${ZONE}/instances`)).status).toBe(200);
      expect(g.requests.filter((q) => q.op === 'list').at(-1)).toMatchObject({ status: 200, account: g.serviceAccountKey.client_email });
      expect(await (await metadata('email')).text()).toBe(g.serviceAccountKey.client_email);
    });

    it('gives the scopes asked for, so a token without a Compute Engine scope is refused by the API', async () => {
      const body = (await (await metadata('token?scopes=https://www.googleapis.com/auth/logging.write')).json()) as Record<string, any>;
      expectGoogleError(await call(g, body.access_token, 'GET', `/zones/${ZONE}/instances`), 403, 'insufficientPermissions');
    });

    it.each([
      ['no Metadata-Flavor header', {}, 403],
      ['another Metadata-Flavor', { 'metadata-flavor': 'Amazon' }, 403],
      ['X-Forwarded-For (a proxied request)', { 'metadata-flavor': 'Google', 'x-forwarded-for': '10.0.0.1' }, 403],
    ])('refuses a request with %s', async (_what, headers: Record<string, string>, status) => {
      const r = await metadata('token', headers);
      expect(r.status).toBe(status);
      expect(await r.text()).not.toContain('access_token');
    });

    it('answers 404 when no service account is attached, and logs token requests and their faults', async () => {
      g.metadataServiceAccount = undefined;
      expect((await metadata('token')).status).toBe(404);
      g.metadataServiceAccount = g.serviceAccountKey.client_email;
      g.fault({ op: 'metadata-token', mode: 'status', status: 503, times: 1 });
      expect((await metadata('token')).status).toBe(503);
      expect(g.requests.filter((q) => q.op === 'metadata-token').slice(-2)).toEqual([
        expect.objectContaining({ method: 'GET', path: '/computeMetadata/v1/instance/service-accounts/default/token', status: 404 }),
        expect.objectContaining({ status: 503, fault: 'status' }),
      ]);
    });
  });

  describe('auth', () => {
    it('answers 401 in Google shape without a valid bearer token, and logs the request without an account', async () => {
      expectGoogleError(await call(g, null, 'GET', `/zones/${ZONE}/instances`), 401, 'authError');
      expectGoogleError(await call(g, 'ya29.made-up', 'GET', `/zones/${ZONE}/instances`), 401, 'authError');
      expect(g.requests.at(-1)).toMatchObject({ op: 'list', status: 401, account: undefined });
    });

    it('answers 403 to a token without a Compute Engine scope', async () => {
      const t = await tokenFor(g, g.serviceAccountKey, { scope: 'https://www.googleapis.com/auth/logging.write' });
      expectGoogleError(await call(g, t, 'GET', `/zones/${ZONE}/instances`), 403, 'insufficientPermissions');
    });

    it('knows one project and its zones', async () => {
      expectGoogleError(await call(g, token, 'GET', `/zones/europe-west4-a/instances`), 400, 'invalid');
      const r = await fetch(`${g.url}/projects/other/zones/${ZONE}/instances`, { headers: { authorization: `Bearer ${token}` } });
      expect(r.status).toBe(404);
    });
  });

  describe('instances and operations', () => {
    it('inserts: the Operation goes PENDING -> RUNNING -> DONE and the instance PROVISIONING -> STAGING -> RUNNING', async () => {
      const r = await insert('lifecycle-1', { networkInterfaces: [{ network: 'global/networks/default', accessConfigs: [{ type: 'ONE_TO_ONE_NAT', name: 'External NAT' }] }] });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ kind: 'compute#operation', operationType: 'insert', status: 'PENDING', progress: 0, targetLink: expect.stringMatching(/\/zones\/us-central1-a\/instances\/lifecycle-1$/) });
      const seen = new Set<string>();
      const instanceSeen = new Set<string>();
      await until('the operation to finish', async () => {
        const op = (await call(g, token, 'GET', `/zones/${ZONE}/operations/${r.body.name}`)).body;
        seen.add(op.status);
        const i = (await call(g, token, 'GET', `/zones/${ZONE}/instances/lifecycle-1`)).body;
        instanceSeen.add(i.status);
        return op.status === 'DONE' ? op : undefined;
      });
      expect([...seen]).toEqual(expect.arrayContaining(['RUNNING', 'DONE']));
      await g.waitForStatus(ZONE, 'lifecycle-1', 'RUNNING');
      const i = (await call(g, token, 'GET', `/zones/${ZONE}/instances/lifecycle-1`)).body;
      expect(i).toMatchObject({
        kind: 'compute#instance',
        creationTimestamp: g.instance(ZONE, 'lifecycle-1')!.creationTimestamp,
        name: 'lifecycle-1',
        status: 'RUNNING',
        machineType: expect.stringMatching(/\/zones\/us-central1-a\/machineTypes\/e2-standard-4$/),
        labels: { 'leasehold-target': 'ci' },
        scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE' },
        serviceAccounts: [{ email: 'hosts@leasehold-test.iam.gserviceaccount.com' }],
        networkInterfaces: [{ networkIP: expect.stringMatching(/^127\.78\./), accessConfigs: [{ natIP: expect.stringMatching(/^127\.78\./) }] }],
      });
      expect([...instanceSeen].some((s) => s === 'PROVISIONING' || s === 'STAGING')).toBe(true);
    });

    it('answers the same Operation to the same requestId and makes no second instance', async () => {
      const id = randomUUID();
      const first = await insert('idem-1', {}, id);
      const again = await insert('idem-1', {}, id);
      expect(again.body.name).toBe(first.body.name);
      await waitOp(ZONE, first.body.name);
      const later = await insert('idem-1', {}, id);
      expect(later.body).toMatchObject({ name: first.body.name, status: 'DONE' });
      expect(g.instances(ZONE).filter((i) => i.name === 'idem-1')).toHaveLength(1);
      expect(g.operations(ZONE).filter((o) => o.clientOperationId === id)).toHaveLength(1);
    });

    it.each([
      ['a name that is not RFC 1035', () => insert('Bad_Name'), 400, 'invalid'],
      ['a machine type of another zone', () => insert('x1', { machineType: 'zones/us-central1-b/machineTypes/e2-standard-4' }), 400, 'invalid'],
      ['an unknown machine type', () => insert('x2', { machineType: `zones/${ZONE}/machineTypes/z9-giant` }), 400, 'invalid'],
      ['a bad label', () => insert('x3', { labels: { Target: 'x' } }), 400, 'invalid'],
      ['a bad provisioning model', () => insert('x4', { scheduling: { provisioningModel: 'CHEAP' } }), 400, 'invalid'],
      ['a requestId that is not a UUID', () => insert('x5', {}, 'abc'), 400, 'invalid'],
      ['the zero UUID', () => insert('x6', {}, '00000000-0000-0000-0000-000000000000'), 400, 'invalid'],
    ])('refuses %s', async (_what, send, status, reason) => {
      expectGoogleError(await send(), status, reason);
    });

    it('refuses a second instance of the same name with 409 alreadyExists', async () => {
      await insert('dup-1');
      expectGoogleError(await insert('dup-1'), 409, 'alreadyExists');
    });

    it('forgets a requestId after requestIdRetentionMs (or forgetRequestIds): the same insert again is a 409 alreadyExists', async () => {
      const id = randomUUID();
      expect((await insert('forget-1', {}, id)).status).toBe(200);
      expect((await insert('forget-1', {}, id)).status).toBe(200);
      g.forgetRequestIds();
      expectGoogleError(await insert('forget-1', {}, id), 409, 'alreadyExists');
      const short = await startGceEmulator({ requestIdRetentionMs: 50 });
      try {
        const t = await tokenFor(short);
        const again = () => call(short, t, 'POST', `/zones/${ZONE}/instances?requestId=${id}`, instanceBody('forget-2'));
        expect((await again()).status).toBe(200);
        await new Promise((r) => setTimeout(r, 120));
        expectGoogleError(await again(), 409, 'alreadyExists');
      } finally {
        await short.stop();
      }
    });

    it('ends a VM once its scheduling.maxRunDuration has passed since it turned RUNNING (DELETE: gone; STOP: TERMINATED), not with enforceMaxRunDuration off', async () => {
      // An hour at 1/1800: 2 s.
      const fast = await startGceEmulator({ maxRunDurationScale: 1 / 1800 });
      try {
        const t = await tokenFor(fast);
        const put = (name: string, action: string) =>
          call(fast, t, 'POST', `/zones/${ZONE}/instances?requestId=${randomUUID()}`, instanceBody(name, { scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: action, maxRunDuration: { seconds: '3600' } } }));
        expect((await put('ttl-1', 'DELETE')).status).toBe(200);
        expect((await put('ttl-2', 'STOP')).status).toBe(200);
        await fast.waitForStatus(ZONE, 'ttl-1', 'RUNNING');
        const running = Date.now();
        await fast.waitForStatus(ZONE, 'ttl-1', 'GONE', 30_000);
        expect(Date.now() - running).toBeGreaterThanOrEqual(1_900);
        await fast.waitForStatus(ZONE, 'ttl-2', 'TERMINATED', 30_000);
        expect(fast.instance(ZONE, 'ttl-2')!.expired).toBe(true);
        fast.enforceMaxRunDuration = false;
        expect((await put('ttl-3', 'DELETE')).status).toBe(200);
        await fast.waitForStatus(ZONE, 'ttl-3', 'RUNNING');
        await new Promise((r) => setTimeout(r, 3_000));
        expect(fast.instance(ZONE, 'ttl-3')!.status).toBe('RUNNING');
      } finally {
        await fast.stop();
      }
    });

    it('refuses a maxRunDuration under 30 s or without a termination action', async () => {
      expectGoogleError(await insert('ttl-bad-1', { scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', maxRunDuration: { seconds: '5' } } }), 400, 'invalid');
      expectGoogleError(await insert('ttl-bad-2', { scheduling: { provisioningModel: 'SPOT', maxRunDuration: { seconds: '60' } } }), 400, 'invalid');
    });

    it('shows any status a test sets (SUSPENDED, DEPROVISIONING, one not documented) and stops moving it', async () => {
      await insert('status-1');
      g.setStatus(ZONE, 'status-1', 'DEPROVISIONING');
      expect((await call(g, token, 'GET', `/zones/${ZONE}/instances/status-1`)).body.status).toBe('DEPROVISIONING');
      await new Promise((r) => setTimeout(r, 600));
      expect(g.instance(ZONE, 'status-1')!.status).toBe('DEPROVISIONING');
      g.setStatus(ZONE, 'status-1', 'HIBERNATING');
      expect((await call(g, token, 'GET', `/zones/${ZONE}/instances/status-1`)).body.status).toBe('HIBERNATING');
    });

    it('answers 404 notFound for an unknown instance or operation, and an operation asked in another zone', async () => {
      expectGoogleError(await call(g, token, 'GET', `/zones/${ZONE}/instances/nothing-here`), 404, 'notFound');
      expectGoogleError(await call(g, token, 'DELETE', `/zones/${ZONE}/instances/nothing-here`), 404, 'notFound');
      expectGoogleError(await call(g, token, 'GET', `/zones/${ZONE}/operations/operation-nope`), 404, 'notFound');
      const r = await insert('opzone-1');
      expectGoogleError(await call(g, token, 'GET', `/zones/us-central1-b/operations/${r.body.name}`), 404, 'notFound');
    });

    it('deletes: STOPPING, then gone, with an Operation; a repeated requestId answers the same Operation', async () => {
      await insert('del-1');
      await g.waitForStatus(ZONE, 'del-1', 'RUNNING');
      const id = randomUUID();
      const d = await call(g, token, 'DELETE', `/zones/${ZONE}/instances/del-1?requestId=${id}`);
      expect(d.body).toMatchObject({ operationType: 'delete', status: 'PENDING' });
      expect((await call(g, token, 'DELETE', `/zones/${ZONE}/instances/del-1?requestId=${id}`)).body.name).toBe(d.body.name);
      await g.waitForStatus(ZONE, 'del-1', 'STOPPING');
      expect((await waitOp(ZONE, d.body.name)).status).toBe('DONE');
      expectGoogleError(await call(g, token, 'GET', `/zones/${ZONE}/instances/del-1`), 404, 'notFound');
    });

    it('holds operations.wait until DONE, or at most waitMaxMs', async () => {
      const slow = await startGceEmulator({ runningMs: 60_000, waitMaxMs: 200 });
      try {
        const t = await tokenFor(slow);
        const r = await call(slow, t, 'POST', `/zones/${ZONE}/instances?requestId=${randomUUID()}`, instanceBody('slow-1'));
        const started = Date.now();
        const w = await call(slow, t, 'POST', `/zones/${ZONE}/operations/${r.body.name}/wait`);
        expect(w.body.status).not.toBe('DONE');
        expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      } finally {
        await slow.stop();
      }
    });
  });

  describe('list', () => {
    beforeAll(async () => {
      for (const [name, target] of [
        ['list-a-1', 'alpha'],
        ['list-a-2', 'alpha'],
        ['list-b-1', 'beta'],
      ]) {
        expect((await insert(name!, { labels: { 'leasehold-target': target!, 'leasehold-installation': 'list' } })).status).toBe(200);
      }
    });
    const names = (a: Answer) => ((a.body.items ?? []) as { name: string }[]).map((i) => i.name);
    const list = (q: Record<string, string>) => call(g, token, 'GET', `/zones/${ZONE}/instances?${new URLSearchParams(q)}`);

    it.each([
      ['(labels.leasehold-installation = list) AND (labels.leasehold-target = alpha)', ['list-a-1', 'list-a-2']],
      ['(labels.leasehold-installation = "list") (labels.leasehold-target != alpha)', ['list-b-1']],
      ['(name eq list-a-.*)', ['list-a-1', 'list-a-2']],
      ['(name eq list-.*) (name ne list-a-.*)', ['list-b-1']],
      ['(name eq list-.*) (name ne list-a-2)', ['list-a-1', 'list-b-1']],
      ['name = list-b-1', ['list-b-1']],
      ['(labels.leasehold-installation:*) (labels.leasehold-target = beta)', ['list-b-1']],
      ['(labels.leasehold-target = beta) OR (name = list-a-2)', ['list-a-2', 'list-b-1']],
      ['labels.leasehold-target = nobody', []],
    ])('filters %s', async (filter, want) => {
      const a = await list({ filter });
      expect(a.status).toBe(200);
      expect(names(a)).toEqual(want);
      if (want.length === 0) expect(a.body.items).toBeUndefined();
    });

    it.each([
      ['labels.leasehold-installation = "list" AND labels.leasehold-target = "alpha"'],
      ['name = a OR name = b'],
      ['(name eq a) (labels.x = b)'],
      ['zone = x'],
      ['name eq ('],
      ['(labels.leasehold-installation eq list) (labels.leasehold-target eq alpha)'],
      ['(labels.leasehold-installation eq list)(name eq list-a-.*)'],
    ])('refuses the filter %s with 400, as Compute Engine refuses a filter it cannot read', async (filter) => {
      const a = await list({ filter });
      expectGoogleError(a, 400, 'invalid');
      expect(a.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', errors: [{ domain: 'global', reason: 'invalid', message: a.body.error.message }] });
      expect(a.body.error.message).toContain(`Invalid value for field 'filter': '${filter}'. Invalid list filter expression.`);
    });

    it('refuses a query parameter the method does not declare, and a declared one it does not act on, before anything else', async () => {
      const a = await call(g, token, 'GET', `/zones/${ZONE}/instances/list-a-1?view=FULL`);
      expectGoogleError(a, 400, 'invalid');
      expect(a.body.error.message).toContain(`Unknown name "view": Cannot bind query parameter.`);
      const sorted = await list({ orderBy: 'creationTimestamp desc' });
      expectGoogleError(sorted, 400, 'invalid');
      expect(sorted.body.error.message).toBe('The emulator does not implement the orderBy parameter of compute.instances.list.');
      expectGoogleError(await call(g, token, 'DELETE', `/zones/${ZONE}/instances/list-a-1?requestId=${randomUUID()}&force=true`), 400, 'invalid');
      expect(g.instance(ZONE, 'list-a-1')?.status).not.toBe('STOPPING');
      expect((await list({ filter: 'name = list-a-1', alt: 'json', prettyPrint: 'false' })).status).toBe(200);
    });

    it('takes regular-expression terms across fields with refuseRegexAcrossFields off', async () => {
      g.refuseRegexAcrossFields = false;
      try {
        expect(names(await list({ filter: '(labels.leasehold-installation eq list) (labels.leasehold-target eq alpha)' }))).toEqual(['list-a-1', 'list-a-2']);
      } finally {
        g.refuseRegexAcrossFields = true;
      }
    });

    describe('aggregatedList', () => {
      const aggregated = (q: Record<string, string>) => call(g, token, 'GET', `/aggregated/instances?${new URLSearchParams(q)}`);
      const all = (a: Answer) => Object.values(a.body.items as Record<string, { instances?: { name: string }[] }>).flatMap((s) => (s.instances ?? []).map((i) => i.name));
      beforeAll(async () => {
        const r = await call(g, token, 'POST', `/zones/us-central1-b/instances?requestId=${randomUUID()}`, instanceBody('list-c-1', { machineType: 'zones/us-central1-b/machineTypes/e2-standard-4', labels: { 'leasehold-target': 'alpha', 'leasehold-installation': 'list' } }));
        expect(r.status).toBe(200);
      });
      afterEach(() => g.unreachableZones.clear());

      it('keys every zone under items["zones/Z"]: instances, or a NO_RESULTS_ON_PAGE warning', async () => {
        const a = await aggregated({ filter: '(labels.leasehold-installation = "list") (labels.leasehold-target = "alpha")' });
        expect(a.status).toBe(200);
        expect(a.body.kind).toBe('compute#instanceAggregatedList');
        expect(Object.keys(a.body.items).sort()).toEqual(g.zones.map((z) => `zones/${z}`).sort());
        expect(a.body.items[`zones/${ZONE}`].instances.map((i: { name: string }) => i.name)).toEqual(['list-a-1', 'list-a-2']);
        expect(a.body.items['zones/us-central1-b'].instances.map((i: { name: string }) => i.name)).toEqual(['list-c-1']);
        expect(a.body.items['zones/us-central1-c']).toEqual({ warning: { code: 'NO_RESULTS_ON_PAGE', message: expect.any(String), data: [{ key: 'scope', value: 'zones/us-central1-c' }] } });
        expect(a.body.unreachables).toBeUndefined();
      });

      it('pages across zones with maxResults and nextPageToken', async () => {
        const seen: string[] = [];
        let pageToken: string | undefined;
        do {
          const a = await aggregated({ filter: 'labels.leasehold-installation = list', maxResults: '2', ...(pageToken ? { pageToken } : {}) });
          seen.push(...all(a));
          pageToken = a.body.nextPageToken;
        } while (pageToken);
        expect(seen).toEqual(['list-a-1', 'list-a-2', 'list-b-1', 'list-c-1']);
      });

      it('answers an unreachable zone as an UNREACHABLE warning, listed in unreachables, and the other zones in full', async () => {
        g.unreachableZones.add('us-central1-b');
        const a = await aggregated({ filter: 'labels.leasehold-installation = list' });
        expect(a.status).toBe(200);
        expect(all(a)).toEqual(['list-a-1', 'list-a-2', 'list-b-1']);
        expect(a.body.items['zones/us-central1-b'].warning).toMatchObject({ code: 'UNREACHABLE' });
        expect(a.body.unreachables).toEqual(['zones/us-central1-b']);
      });

      it('refuses returnPartialSuccess, which the pinned document does not declare for aggregatedList, as a parameter it cannot bind', async () => {
        const a = await aggregated({ filter: 'labels.leasehold-installation = list', returnPartialSuccess: 'true' });
        expectGoogleError(a, 400, 'invalid');
        expect(a.body.error.message).toBe(`Invalid JSON payload received. Unknown name "returnPartialSuccess": Cannot bind query parameter. Field 'returnPartialSuccess' could not be found in request message.`);
        expect(a.body.error.details).toEqual([{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ description: a.body.error.message }] }]);
      });

      it('refuses regular-expression terms on two fields, and several expressions not each in parentheses, with 400, as instances.list does', async () => {
        expectGoogleError(await aggregated({ filter: '(labels.leasehold-installation eq list) (labels.leasehold-target eq alpha)' }), 400, 'invalid');
        expectGoogleError(await aggregated({ filter: 'labels.leasehold-installation = "list" AND labels.leasehold-target = "alpha"' }), 400, 'invalid');
      });
    });

    it('pages with maxResults and nextPageToken', async () => {
      const seen: string[] = [];
      let pageToken: string | undefined;
      do {
        const a = await list({ filter: 'labels.leasehold-installation = list', maxResults: '1', ...(pageToken ? { pageToken } : {}) });
        expect(names(a)).toHaveLength(1);
        seen.push(...names(a));
        pageToken = a.body.nextPageToken;
      } while (pageToken);
      expect(seen).toEqual(['list-a-1', 'list-a-2', 'list-b-1']);
      expectGoogleError(await list({ maxResults: '501' }), 400, 'invalid');
    });
  });

  describe('capacity and quota', () => {
    it.each([
      ['ZONE_RESOURCE_POOL_EXHAUSTED', 503],
      ['ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS', 503],
      ['QUOTA_EXCEEDED', 403],
    ] as const)('refuses an insert with %s as an HTTP error (%i), only for the zone and type armed, and makes nothing', async (code, status) => {
      g.refuse({ zone: ZONE, machineType: 'e2-standard-4', code, as: 'http', times: 1 });
      const other = await insert(`cap-ok-${status}-${code.length}`, { machineType: `zones/${ZONE}/machineTypes/e2-standard-2` });
      expect(other.status).toBe(200);
      const name = `cap-http-${code.length}`;
      const r = await insert(name);
      expect(r.status).toBe(status);
      const reasons = [r.body.error.errors[0].reason, r.body.error.details[0].reason];
      expect(reasons).toContain(code === 'QUOTA_EXCEEDED' ? 'quotaExceeded' : code);
      expect(r.body.error.details[0]).toMatchObject({ reason: code, metadata: { zone: ZONE, vmType: 'e2-standard-4' } });
      expect(g.instance(ZONE, name)).toBeUndefined();
      expect((await insert(name)).status).toBe(200);
    });

    it.each([
      ['ZONE_RESOURCE_POOL_EXHAUSTED', 503, 'SERVICE UNAVAILABLE'],
      ['ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS', 503, 'SERVICE UNAVAILABLE'],
      ['QUOTA_EXCEEDED', 403, 'FORBIDDEN'],
    ] as const)('fails the insert Operation with %s and removes the instance', async (code, status, message) => {
      g.refuse({ zone: ZONE, code, as: 'operation' });
      const name = `cap-op-${code.length}`;
      const r = await insert(name);
      expect(r.status).toBe(200);
      const op = await waitOp(ZONE, r.body.name);
      expect(op).toMatchObject({ status: 'DONE', httpErrorStatusCode: status, httpErrorMessage: message, error: { errors: [{ code, message: expect.any(String) }] } });
      expect(g.instance(ZONE, name)).toBeUndefined();
      const elsewhere = await call(g, token, 'POST', `/zones/us-central1-b/instances`, instanceBody(`${name}-b`, { machineType: 'zones/us-central1-b/machineTypes/e2-standard-4' }));
      expect((await waitOp('us-central1-b', elsewhere.body.name)).error).toBeUndefined();
    });

    it.each([
      ['a zone with room for two more', { after: 2 }, [200, 200, 503, 503]],
      ['spot capacity gone, standard still there', { provisioningModel: 'SPOT' as const }, [503, 200, 503, 200]],
    ])('refuses by provisioning model and after a count: %s', async (_what, over, statuses) => {
      g.refuse({ zone: ZONE, code: 'ZONE_RESOURCE_POOL_EXHAUSTED', as: 'http', ...over });
      const got: number[] = [];
      for (const [n, model] of ['SPOT', 'STANDARD', 'SPOT', 'STANDARD'].entries()) {
        got.push((await insert(`cap-${statuses.join('')}-${n}`.slice(0, 60), { scheduling: { provisioningModel: model } })).status);
      }
      expect(got).toEqual(statuses);
      expect(g.inserts().filter((r) => r.name.startsWith(`cap-${statuses.join('')}`)).map((r) => [r.provisioningModel, r.refused ?? 'made'])).toEqual(
        statuses.map((s, n) => [n % 2 ? 'STANDARD' : 'SPOT', s === 200 ? 'made' : 'ZONE_RESOURCE_POOL_EXHAUSTED']),
      );
    });
  });

  describe('organisation policy', () => {
    const NAT = { networkInterfaces: [{ network: 'global/networks/default', accessConfigs: [{ type: 'ONE_TO_ONE_NAT', name: 'External NAT' }] }] };
    const INTERNAL = { networkInterfaces: [{ network: 'global/networks/default' }] };
    const osLogin = (value: string) => ({ metadata: { items: [{ key: 'enable-guest-attributes', value: 'TRUE' }, { key: 'enable-oslogin', value }] } });
    const DENIED = 'not-mine@leasehold-test.iam.gserviceaccount.com';

    it('shows no external address for an insert without an access config: networkIP only', async () => {
      await waitOp(ZONE, (await insert('pol-internal', INTERNAL)).body.name);
      await g.waitForStatus(ZONE, 'pol-internal', 'RUNNING');
      const i = (await call(g, token, 'GET', `/zones/${ZONE}/instances/pol-internal`)).body;
      expect(i.networkInterfaces).toEqual([expect.objectContaining({ networkIP: expect.stringMatching(/^127\.78\./) })]);
      expect(i.networkInterfaces[0].accessConfigs).toBeUndefined();
    });

    it.each([
      ['forbidExternalIp', { forbidExternalIp: true }, NAT, INTERNAL, 412, 'conditionNotMet', /^Constraint constraints\/compute\.vmExternalIpAccess violated for project \d+\. Add instance projects\/leasehold-test\/zones\/us-central1-a\/instances\/pol-a-1 to the constraint/],
      ['requireOsLogin', { requireOsLogin: true }, osLogin('FALSE'), osLogin('TRUE'), 412, 'conditionNotMet', /^Constraint constraints\/compute\.requireOsLogin violated for project \d+\./],
      ['deniedServiceAccounts', { deniedServiceAccounts: [DENIED] }, { serviceAccounts: [{ email: DENIED, scopes: [] }] }, {}, 400, 'badRequest', /^The user does not have access to service account 'not-mine@leasehold-test\.iam\.gserviceaccount\.com'\. .*iam\.serviceAccountUser/],
    ] as const)('%s refuses the insert it forbids as its answer and makes nothing; an insert that complies goes through', async (what, policy, refused, complies, status, reason, message) => {
      Object.assign(g.orgPolicy, policy);
      const name = `pol-${what === 'forbidExternalIp' ? 'a' : what === 'requireOsLogin' ? 'b' : 'c'}-1`;
      const r = await insert(name, refused);
      expectGoogleError(r, status, reason);
      expect(r.body.error.message).toMatch(message);
      expect(g.instance(ZONE, name)).toBeUndefined();
      expect(g.inserts().filter((i) => i.name === name).map((i) => i.refused)).toEqual([status === 412 ? 'CONDITION_NOT_MET' : 'SERVICE_ACCOUNT_ACCESS_DENIED']);
      const ok = await insert(name, complies);
      expect(ok.status).toBe(200);
      expect((await waitOp(ZONE, ok.body.name)).error).toBeUndefined();
    });

    it('with refuseAs operation the insert is accepted and its Operation ends DONE with CONDITION_NOT_MET, no instance left', async () => {
      Object.assign(g.orgPolicy, { forbidExternalIp: true, refuseAs: 'operation' });
      const r = await insert('pol-op-1', NAT);
      expect(r.status).toBe(200);
      const op = await waitOp(ZONE, r.body.name);
      expect(op).toMatchObject({ status: 'DONE', httpErrorStatusCode: 412, httpErrorMessage: 'PRECONDITION FAILED', error: { errors: [{ code: 'CONDITION_NOT_MET', message: expect.stringContaining('constraints/compute.vmExternalIpAccess') }] } });
      expect(g.instance(ZONE, 'pol-op-1')).toBeUndefined();
    });

    it('policy goes before capacity: a forbidden insert into a full zone is refused by the policy', async () => {
      Object.assign(g.orgPolicy, { forbidExternalIp: true });
      g.refuse({ zone: ZONE, code: 'ZONE_RESOURCE_POOL_EXHAUSTED', as: 'http' });
      expectGoogleError(await insert('pol-full-1', NAT), 412, 'conditionNotMet');
    });
  });

  describe('guest attributes and the boot hook', () => {
    it('publishes the host keys under hostkeys/ once RUNNING, not before, and not with guest attributes off', async () => {
      const r = await insert('keys-1');
      const path = `/zones/${ZONE}/instances/keys-1/getGuestAttributes?queryPath=${encodeURIComponent('hostkeys/')}`;
      expectGoogleError(await call(g, token, 'GET', path), 404, 'notFound');
      await waitOp(ZONE, r.body.name);
      await g.waitForStatus(ZONE, 'keys-1', 'RUNNING');
      const a = await call(g, token, 'GET', path);
      expect(a.status).toBe(200);
      const i = g.instance(ZONE, 'keys-1')!;
      expect(a.body).toMatchObject({ kind: 'compute#guestAttributes', queryPath: 'hostkeys/', queryValue: { items: [{ namespace: 'hostkeys', key: 'ssh-ed25519', value: i.hostKeys[0]!.split(' ')[1] }] } });
      expectGoogleError(await call(g, token, 'GET', `/zones/${ZONE}/instances/keys-1/getGuestAttributes?queryPath=other/`), 404, 'notFound');

      await insert('keys-off', { metadata: { items: [] } });
      await g.waitForStatus(ZONE, 'keys-off', 'RUNNING');
      expectGoogleError(await call(g, token, 'GET', `/zones/${ZONE}/instances/keys-off/getGuestAttributes?queryPath=hostkeys%2F`), 404, 'notFound');
    });

    it('boots through onInstanceRunning and tells onInstanceGone of deletes and preemptions', async () => {
      const booted: EmulatedInstance[] = [];
      const gone: string[] = [];
      const h = await startGceEmulator({
        onInstanceRunning: async (i) => {
          booted.push(i);
          return { hostKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyFromTheHook', 'ecdsa-sha2-nistp256 AAAAE2VjZHNh'], sshPort: 2222, address: '127.0.0.9' };
        },
        onInstanceGone: async (i) => {
          gone.push(i.name);
        },
      });
      try {
        const t = await tokenFor(h);
        await call(h, t, 'POST', `/zones/${ZONE}/instances`, instanceBody('hooked-1'));
        await h.waitForStatus(ZONE, 'hooked-1', 'RUNNING');
        expect(booted.map((i) => i.name)).toEqual(['hooked-1']);
        expect(h.instance(ZONE, 'hooked-1')).toMatchObject({ sshPort: 2222, address: '127.0.0.9' });
        const a = await call(h, t, 'GET', `/zones/${ZONE}/instances/hooked-1/getGuestAttributes?queryPath=hostkeys%2F`);
        expect(a.body.queryValue.items).toEqual([
          { namespace: 'hostkeys', key: 'ssh-ed25519', value: 'AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyFromTheHook' },
          { namespace: 'hostkeys', key: 'ecdsa-sha2-nistp256', value: 'AAAAE2VjZHNh' },
        ]);
        await call(h, t, 'DELETE', `/zones/${ZONE}/instances/hooked-1`);
        await until('onInstanceGone', () => (gone.includes('hooked-1') ? true : undefined));
        await call(h, t, 'POST', `/zones/${ZONE}/instances`, instanceBody('hooked-2', { scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP' } }));
        await h.waitForStatus(ZONE, 'hooked-2', 'RUNNING');
        h.preempt(ZONE, 'hooked-2');
        await until('onInstanceGone after preemption', () => (gone.includes('hooked-2') ? true : undefined));
        expect(h.instance(ZONE, 'hooked-2')!.status).toBe('TERMINATED');
      } finally {
        await h.stop();
      }
    });
  });

  describe('preemption', () => {
    it('deletes a spot instance whose termination action is DELETE, and records the preemption Operation', async () => {
      await insert('spot-del');
      await g.waitForStatus(ZONE, 'spot-del', 'RUNNING');
      g.preempt(ZONE, 'spot-del');
      await g.waitForStatus(ZONE, 'spot-del', 'GONE');
      expect(g.operations(ZONE).find((o) => o.operationType === 'compute.instances.preempted' && o.targetLink.endsWith('/spot-del'))).toBeDefined();
    });

    it('stops a spot instance whose termination action is STOP: TERMINATED, still listed', async () => {
      await insert('spot-stop', { scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP' } });
      await g.waitForStatus(ZONE, 'spot-stop', 'RUNNING');
      g.preempt(ZONE, 'spot-stop');
      await g.waitForStatus(ZONE, 'spot-stop', 'TERMINATED');
      expect((await call(g, token, 'GET', `/zones/${ZONE}/instances/spot-stop`)).body.status).toBe('TERMINATED');
    });

    it('does not preempt a standard instance', async () => {
      await insert('standard-1', { scheduling: { provisioningModel: 'STANDARD' } });
      expect(() => g.preempt(ZONE, 'standard-1')).toThrow(/not a spot/);
    });
  });

  describe('limits, faults and the request log', () => {
    it('answers 429 over requestsPerSecond', async () => {
      g.requestsPerSecond = 2;
      const statuses = [];
      for (let n = 0; n < 4; n++) statuses.push((await call(g, token, 'GET', `/zones/${ZONE}/instances`)).status);
      expect(statuses).toContain(429);
      const limited = g.requests.filter((r) => r.status === 429).at(-1);
      expect(limited).toMatchObject({ op: 'list' });
    });

    it('injects faults per operation', async () => {
      g.fault({ op: 'insert', mode: 'status', status: 503, times: 1 });
      expectGoogleError(await insert('fault-1'), 503, 'backendError');
      expect(g.instance(ZONE, 'fault-1')).toBeUndefined();
      expect((await insert('fault-1')).status).toBe(200);
    });

    it('logs every request with the service account, and mutations apart', async () => {
      const before = g.mutations.length;
      await call(g, token, 'GET', `/zones/${ZONE}/instances`);
      expect(g.mutations.length).toBe(before);
      await insert('log-1');
      expect(g.mutations.length).toBe(before + 1);
      expect(g.mutations.at(-1)).toMatchObject({ method: 'POST', op: 'insert', account: g.serviceAccountKey.client_email, status: 200 });
      expect(JSON.stringify(g.requests)).not.toContain(token);
    });
  });
});
