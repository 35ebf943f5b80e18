// The Compute Engine client against the emulator (e2e/fakes/gce) on
// loopback: the token from the service-account key and its cache, the insert
// it sends, Operations, typed capacity, quota and rate-limit errors from both
// places Google reports them, list filters and pages, host keys, and that no
// token or key reaches an error.
import { describe, it, expect, beforeAll, afterAll, afterEach } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { startGceEmulator, type GceEmulator } from '../../../e2e/fakes/gce/server.js';
import { isProviderError, ProviderError } from '../errors.js';
import { RateLimitedError } from '../ratelimit.js';
import { parseServiceAccountKey } from './auth.js';
import { GceClient, HOST_SCOPES, filterExpression } from './client.js';
import { AlreadyExists, CapacityExhausted, GceApiError, PolicyRefused, QuotaExceeded } from './errors.js';
import { instanceSpec } from './testing/instances.js';

const ZONE = 'us-central1-a';

const spec = instanceSpec;

async function caught(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ProviderError);
    return e as ProviderError;
  }
  throw new Error('expected the call to fail');
}

describe('GceClient against the Compute Engine emulator', () => {
  let g: GceEmulator;
  let client: GceClient;
  const results: string[] = [];
  beforeAll(async () => {
    g = await startGceEmulator();
    client = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl, onResult: (op, code) => results.push(`${op} ${code}`) });
  });
  afterAll(() => g.stop());
  afterEach(() => {
    g.clearFaults();
    g.clearRefusals();
    Object.assign(g.orgPolicy, { forbidExternalIp: false, requireOsLogin: false, deniedServiceAccounts: [], refuseAs: 'http' });
  });
  const tokenRequests = () => g.requests.filter((r) => r.op === 'token').length;

  it('parses the key file and names the wrong fields, never the key', () => {
    const key = parseServiceAccountKey(JSON.stringify(g.serviceAccountKey));
    expect(key).toMatchObject({ projectId: 'leasehold-test', clientEmail: g.serviceAccountKey.client_email, privateKeyId: g.serviceAccountKey.private_key_id });
    expect(() => parseServiceAccountKey('{')).toThrow(/not JSON/);
    const { client_email: _e, ...noEmail } = g.serviceAccountKey;
    expect(() => parseServiceAccountKey(JSON.stringify(noEmail))).toThrow(/client_email/);
    const bad = { ...g.serviceAccountKey, private_key: '-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n' };
    const err = (() => {
      try {
        parseServiceAccountKey(JSON.stringify(bad));
      } catch (e) {
        return e as Error;
      }
      throw new Error('expected a failure');
    })();
    expect(err.message).toMatch(/private_key is not a PEM RSA private key/);
    expect(err.message).not.toContain('nope');
  });

  it('gets one token for many calls, concurrent ones included', async () => {
    const before = tokenRequests();
    const fresh = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl });
    await Promise.all([fresh.list(ZONE, {}), fresh.list(ZONE, {}), fresh.list(ZONE, {})]);
    await fresh.list(ZONE, {});
    expect(tokenRequests() - before).toBe(1);
  });

  it('renews the token before it expires', async () => {
    g.tokenTtlSeconds = 1;
    try {
      const fresh = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl });
      const before = tokenRequests();
      await fresh.list(ZONE, {});
      const end = Date.now() + 10_000;
      while (tokenRequests() - before < 2 && Date.now() < end) {
        await fresh.list(ZONE, {});
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(tokenRequests() - before).toBe(2);
      expect(g.requests.filter((r) => r.op === 'list' && r.status === 401)).toHaveLength(0);
    } finally {
      g.tokenTtlSeconds = 3600;
    }
  });

  it('fetches a new token once when the API refuses the cached one', async () => {
    await client.list(ZONE, {});
    const before = tokenRequests();
    g.fault({ op: 'list', mode: 'status', status: 401, times: 1 });
    await client.list(ZONE, {});
    expect(tokenRequests() - before).toBe(1);
  });

  it('reports a refused key as Unauthorized without the key or the assertion', async () => {
    const key = g.addServiceAccount('revoked-client');
    g.revokeKey(key.private_key_id);
    const c = new GceClient({ key: parseServiceAccountKey(JSON.stringify(key)), endpoint: g.url, tokenUrl: g.tokenUrl });
    const e = await caught(c.list(ZONE, {}));
    expect(e.kind).toBe('Unauthorized');
    expect(e.message).toMatch(/invalid_grant/);
    expect(e.message).not.toContain(key.private_key.slice(30, 60));
    expect(e.message).not.toMatch(/eyJ/);
  });

  it('inserts a spot VM with the controller key in metadata, guest attributes on, the host service account and narrow scopes, and waits for it', async () => {
    const s = spec('client-insert-1');
    const op = await client.insert(s);
    expect(op).toMatchObject({ zone: ZONE, operationType: 'insert', target: 'client-insert-1', machineType: 'e2-standard-4' });
    expect((await client.waitOperation(op)).status).toBe('DONE');
    const sent = g.instance(ZONE, 'client-insert-1')!;
    expect(sent.scheduling).toEqual({ provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', automaticRestart: false, onHostMaintenance: 'TERMINATE' });
    expect(sent.serviceAccounts).toEqual([{ email: s.serviceAccountEmail, scopes: HOST_SCOPES }]);
    expect(sent.metadata).toEqual(
      expect.arrayContaining([
        { key: 'ssh-keys', value: `leasehold:${s.sshPublicKey}` },
        { key: 'enable-guest-attributes', value: 'TRUE' },
        { key: 'block-project-ssh-keys', value: 'TRUE' },
        { key: 'enable-oslogin', value: 'FALSE' },
      ]),
    );
    expect(sent.metadata).toHaveLength(4);
    expect(sent.labels).toEqual(s.labels);
    expect(sent.requestId).toBe(s.requestId);
  });

  it('inserts a standard VM when spot is off', async () => {
    await client.insert(spec('client-standard-1', { spot: false }));
    expect(g.instance(ZONE, 'client-standard-1')!.scheduling).toEqual({ provisioningModel: 'STANDARD', automaticRestart: true, onHostMaintenance: 'MIGRATE' });
  });

  it('sends the same requestId again without a second VM', async () => {
    const s = spec('client-idem-1');
    const a = await client.insert(s);
    const b = await client.insert(s);
    expect(b.name).toBe(a.name);
    expect(g.instances(ZONE).filter((i) => i.name === 'client-idem-1')).toHaveLength(1);
  });

  it("refuses the project's default compute service account before any request", async () => {
    const before = g.mutations.length;
    const e = await caught(client.insert(spec('client-default-sa', { serviceAccountEmail: '123-compute@developer.gserviceaccount.com' })));
    expect(e).toMatchObject({ kind: 'InvalidRequest', nothingMade: true });
    expect(g.mutations.length).toBe(before);
  });

  it.each([
    ['ZONE_RESOURCE_POOL_EXHAUSTED', CapacityExhausted],
    ['ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS', CapacityExhausted],
    ['QUOTA_EXCEEDED', QuotaExceeded],
  ] as const)('types %s from the insert answer, with the zone and machine type', async (code, type) => {
    g.refuse({ zone: ZONE, machineType: 'e2-standard-8', code, as: 'http', times: 1 });
    const e = await caught(client.insert(spec(`client-sync-${code.length}`, { machineType: 'e2-standard-8' })));
    expect(e).toBeInstanceOf(type);
    expect((e as CapacityExhausted).placement).toEqual({ zone: ZONE, machineType: 'e2-standard-8' });
    expect(e.kind).toBe('InsufficientCapacity');
    expect(e.message).toMatch(new RegExp(`^Compute Engine insert ${ZONE}/client-sync-\\d+: HTTP (503|403)`));
  });

  it.each([
    ['ZONE_RESOURCE_POOL_EXHAUSTED', CapacityExhausted, 503],
    ['ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS', CapacityExhausted, 503],
    ['QUOTA_EXCEEDED', QuotaExceeded, 403],
  ] as const)('types %s from the failed Operation, with the zone and machine type', async (code, type, status) => {
    g.refuse({ zone: ZONE, code, as: 'operation', times: 1 });
    const op = await client.insert(spec(`client-op-${code.length}`));
    const e = await caught(client.waitOperation(op));
    expect(e).toBeInstanceOf(type);
    expect(e).toMatchObject({ status, reason: code, placement: { zone: ZONE, machineType: 'e2-standard-4' } });
    const again = await caught(client.getOperation(op.zone, op.name));
    expect(again).toBeInstanceOf(type);
  });

  it('gets, lists by labels and name prefix across pages, and deletes', async () => {
    const paged = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl, pageSize: 2 });
    for (const n of ['lp-1', 'lp-2', 'lp-3']) await client.insert(spec(n, { labels: { 'leasehold-target': 'paged', 'leasehold-installation': 'i1' } }));
    await client.insert(spec('other-1', { labels: { 'leasehold-target': 'paged', 'leasehold-installation': 'i1' } }));
    const listed = await paged.list(ZONE, { labels: { 'leasehold-target': 'paged' }, namePrefix: 'lp-' });
    expect(listed.map((i) => i.name)).toEqual(['lp-1', 'lp-2', 'lp-3']);
    expect(g.requests.filter((r) => r.op === 'list').length).toBeGreaterThanOrEqual(2);
    await g.waitForStatus(ZONE, 'lp-1', 'RUNNING');
    expect(await client.get(ZONE, 'lp-1')).toMatchObject({ name: 'lp-1', zone: ZONE, machineType: 'e2-standard-4', status: 'RUNNING', spot: true, labels: { 'leasehold-target': 'paged' }, address: expect.stringMatching(/^127\.78\./) });
    const del = await client.delete(ZONE, 'lp-1', randomUUID());
    expect(del.operationType).toBe('delete');
    await client.waitOperation(del);
    const e = await caught(client.get(ZONE, 'lp-1'));
    expect(e).toBeInstanceOf(GceApiError);
    expect(isProviderError(e, 'NotFound')).toBe(true);
  });

  it('builds filters in the documented form: each label comparison in parentheses, ANDed by a space, no regular expression across fields', () => {
    expect(filterExpression({ labels: { a: 'x', b: 'y' }, namePrefix: 'lh-i1-' })).toBe('(labels.a = "x") (labels.b = "y")');
    expect(filterExpression({ labels: { a: 'x' } })).toBe('(labels.a = "x")');
    expect(filterExpression({})).toBe('');
  });

  it('lists every zone in one aggregatedList call, across pages, by two labels and a name prefix', async () => {
    const labels = { 'leasehold-target': 'agg', 'leasehold-installation': 'i1' };
    for (const [zone, n] of [[ZONE, 'agg-1'], ['us-central1-b', 'agg-2'], ['us-central1-c', 'agg-3'], ['us-central1-c', 'nope-1']] as const) {
      await client.insert(spec(n, { zone, labels }));
    }
    await client.insert(spec('agg-4', { labels: { ...labels, 'leasehold-target': 'other' } }));
    const paged = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl, pageSize: 2 });
    const before = g.requests.length;
    const got = await paged.listAll({ labels, namePrefix: 'agg-' });
    expect(got.instances.map((i) => `${i.zone}/${i.name}`).sort()).toEqual([`${ZONE}/agg-1`, 'us-central1-b/agg-2', 'us-central1-c/agg-3']);
    expect(got.unreachable).toEqual([]);
    const calls = g.requests.slice(before).filter((r) => r.op !== 'token');
    expect(calls.every((r) => r.op === 'aggregated-list' && r.status === 200)).toBe(true);
    expect(calls.length).toBe(2);
  });

  it('reports a zone aggregatedList could not reach and still returns the others', async () => {
    const labels = { 'leasehold-target': 'agg-down', 'leasehold-installation': 'i1' };
    await client.insert(spec('aggd-1', { labels }));
    await client.insert(spec('aggd-2', { zone: 'us-central1-b', labels }));
    g.unreachableZones.add('us-central1-b');
    try {
      const got = await client.listAll({ labels });
      expect(got.instances.map((i) => i.name)).toEqual(['aggd-1']);
      expect(got.unreachable).toEqual([{ zone: 'us-central1-b', message: expect.stringMatching(/^UNREACHABLE: /) }]);
    } finally {
      g.unreachableZones.clear();
    }
  });

  it('types an insert answered 409 alreadyExists (its requestId forgotten) as AlreadyExists', async () => {
    const s = spec('client-forgotten-1');
    await client.insert(s);
    g.forgetRequestIds();
    const e = await caught(client.insert(s));
    expect(e).toBeInstanceOf(AlreadyExists);
    expect(e).toMatchObject({ status: 409, reason: 'alreadyExists' });
  });

  it('asks for an external address by default, none with externalIP false, and reads both addresses back', async () => {
    await client.waitOperation(await client.insert(spec('client-nat-1')));
    await client.waitOperation(await client.insert(spec('client-internal-1', { externalIP: false })));
    expect(g.instance(ZONE, 'client-nat-1')!.body.networkInterfaces).toEqual([{ network: 'global/networks/default', accessConfigs: [{ type: 'ONE_TO_ONE_NAT', name: 'External NAT' }] }]);
    expect(g.instance(ZONE, 'client-internal-1')!.body.networkInterfaces).toEqual([{ network: 'global/networks/default' }]);
    await g.waitForStatus(ZONE, 'client-nat-1', 'RUNNING');
    await g.waitForStatus(ZONE, 'client-internal-1', 'RUNNING');
    const nat = await client.get(ZONE, 'client-nat-1');
    const internal = await client.get(ZONE, 'client-internal-1');
    expect(nat).toMatchObject({ externalAddress: g.instance(ZONE, 'client-nat-1')!.address, internalAddress: g.instance(ZONE, 'client-nat-1')!.address });
    expect(internal).toMatchObject({ externalAddress: undefined, internalAddress: g.instance(ZONE, 'client-internal-1')!.address, address: g.instance(ZONE, 'client-internal-1')!.address });
  });

  it.each([
    ['the insert', 'http' as const],
    ['its DONE Operation', 'operation' as const],
  ])('types an organisation policy refusal in %s as PolicyRefused naming the constraint', async (_where, refuseAs) => {
    Object.assign(g.orgPolicy, { forbidExternalIp: true, requireOsLogin: true, refuseAs });
    const name = `client-policy-${refuseAs}`;
    const e = await caught(client.insert(spec(name)).then((op) => client.waitOperation(op)));
    expect(e).toBeInstanceOf(PolicyRefused);
    expect(e).toMatchObject({ status: 412, refusal: { kind: 'constraint', constraint: 'constraints/compute.vmExternalIpAccess' }, inOperation: refuseAs === 'operation' });
    const osLogin = await caught(client.insert(spec(`${name}-2`, { externalIP: false })).then((op) => client.waitOperation(op)));
    expect(osLogin).toMatchObject({ refusal: { kind: 'constraint', constraint: 'constraints/compute.requireOsLogin' } });
  });

  it('types a host service account the caller may not act as as PolicyRefused (serviceAccount)', async () => {
    g.orgPolicy.deniedServiceAccounts.push('runner-hosts@leasehold-test.iam.gserviceaccount.com');
    const e = await caught(client.insert(spec('client-sa-denied')));
    expect(e).toBeInstanceOf(PolicyRefused);
    expect(e).toMatchObject({ status: 400, refusal: { kind: 'serviceAccount' }, inOperation: false });
  });

  it('asks Compute Engine to delete the VM after maxRunDurationSeconds, spot or standard', async () => {
    await client.insert(spec('client-ttl-1', { maxRunDurationSeconds: 86_400 }));
    expect(g.instance(ZONE, 'client-ttl-1')!.scheduling).toMatchObject({ provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', maxRunDuration: { seconds: '86400' } });
    await client.insert(spec('client-ttl-2', { spot: false, maxRunDurationSeconds: 3600 }));
    expect(g.instance(ZONE, 'client-ttl-2')!.scheduling).toMatchObject({ provisioningModel: 'STANDARD', instanceTerminationAction: 'DELETE', maxRunDuration: { seconds: '3600' } });
  });

  it('reads the host keys from guest attributes once published, NotFound before, and drops malformed ones', async () => {
    const h = await startGceEmulator({ onInstanceRunning: async () => ({ hostKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGood', 'ssh-ed25519 not/base64!!', 'evil-type AAAA'], sshPort: 22 }) });
    try {
      const c = new GceClient({ key: parseServiceAccountKey(JSON.stringify(h.serviceAccountKey)), endpoint: h.url, tokenUrl: h.tokenUrl });
      await c.insert(spec('keys-c1'));
      expect(isProviderError(await caught(c.hostKeys(ZONE, 'keys-c1')), 'NotFound')).toBe(true);
      await h.waitForStatus(ZONE, 'keys-c1', 'RUNNING');
      expect(await c.hostKeys(ZONE, 'keys-c1')).toEqual(['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGood']);
    } finally {
      await h.stop();
    }
  });

  it('types 429 as RateLimitedError with the time to retry', async () => {
    g.fault({ op: 'get', mode: 'status', status: 429, times: 1 });
    const e = await caught(client.get(ZONE, 'whatever'));
    expect(e).toBeInstanceOf(RateLimitedError);
    expect((e as RateLimitedError).retryAt!.getTime()).toBeGreaterThan(Date.now());
  });

  it('marks a 5xx and a lost answer as possibly done, and reports the call for metrics', async () => {
    g.fault({ op: 'delete', mode: 'status', status: 503, times: 1 });
    const e = await caught(client.delete(ZONE, 'whatever', randomUUID()));
    expect(e).toMatchObject({ kind: 'Unknown', answerLost: true });
    g.fault({ op: 'insert', mode: 'drop', times: 1 });
    const lost = await caught(client.insert(spec('client-dropped-1')));
    expect(lost.answerLost).toBe(true);
    expect(g.instance(ZONE, 'client-dropped-1')).toBeDefined();
    expect(results).toEqual(expect.arrayContaining(['delete 503', 'insert lost']));
  });

  it('gives up after timeoutMs on a hung call', async () => {
    const quick = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl, timeoutMs: 300 });
    await quick.list(ZONE, {});
    g.fault({ op: 'get', mode: 'hang', times: 1 });
    expect(await caught(quick.get(ZONE, 'x'))).toMatchObject({ kind: 'Timeout', answerLost: true });
  });

  it('never puts the access token in an error', async () => {
    const tokens: string[] = [];
    const spy = new GceClient({
      key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)),
      endpoint: g.url,
      tokenUrl: g.tokenUrl,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        if (String(url).endsWith('/token')) tokens.push(((await res.clone().json()) as { access_token: string }).access_token);
        return res;
      },
    });
    const e = await caught(spy.get(ZONE, 'missing'));
    expect(tokens).toHaveLength(1);
    expect(`${e.message} ${String(e.stack)}`).not.toContain(tokens[0]!);
  });
});
