// The Lambda Cloud emulator over real HTTP (Node's fetch) with real sshds and
// a real OpenSSH client: auth and error shapes, the API description it holds
// requests and answers to, the catalog, the instance lifecycle, the launch
// rate limit, capacity, faults, accounts, the control API, the CLI, and that
// nothing of sshd outlives terminate or stop.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startLambdaEmulator, lambdaContract, RATE_LIMIT_BODY, type LambdaEmulator, type ApiInstance } from './server.js';

const work = mkdtempSync(join(tmpdir(), 'lambda-emulator-test-'));
const keygen = (name: string) => {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', join(work, name)]);
  return { file: join(work, name), priv: readFileSync(join(work, name), 'utf8'), pub: readFileSync(join(work, `${name}.pub`), 'utf8').trim() };
};
const device = keygen('device');
const hostKey = keygen('host');
const otherHost = keygen('other-host');

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

async function call(e: LambdaEmulator, method: string, path: string, body?: unknown, auth: string | null = `Bearer ${e.apiKey}`, signal?: AbortSignal): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (auth !== null) headers.authorization = auth;
  const init: RequestInit = { method, headers };
  if (body !== undefined) init.body = JSON.stringify(body);
  if (signal) init.signal = signal;
  const r = await fetch(`${e.url}${path}`, init);
  const text = await r.text();
  const json = r.headers.get('content-type')?.startsWith('application/json');
  return { status: r.status, headers: r.headers, body: text && json ? JSON.parse(text) : text || undefined };
}

const bearer = (key: string) => `Bearer ${key}`;

function expectError(a: Answer, status: number, code: string) {
  expect({ status: a.status, code: a.body?.error?.code }).toEqual({ status, code });
  expect(typeof a.body.error.message).toBe('string');
}

const launchBody = (over: Record<string, unknown> = {}) => ({ region_name: 'us-east-1', instance_type_name: 'gpu_1x_a10', ssh_key_names: ['device'], ...over });

async function addDeviceKey(e: LambdaEmulator, key = e.apiKey) {
  const r = await call(e, 'POST', '/ssh-keys', { name: 'device', public_key: device.pub }, bearer(key));
  expect(r.status).toBe(200);
  return r.body.data as { id: string; name: string; public_key: string };
}

async function launch(e: LambdaEmulator, over: Record<string, unknown> = {}, key = e.apiKey): Promise<string> {
  const r = await call(e, 'POST', '/instance-operations/launch', launchBody(over), bearer(key));
  if (r.status !== 200) throw new Error(`launch answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body.data.instance_ids[0];
}

async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function statusOf(e: LambdaEmulator, id: string, key = e.apiKey): Promise<ApiInstance> {
  const r = await call(e, 'GET', `/instances/${id}`, undefined, bearer(key));
  expect(r.status).toBe(200);
  return r.body.data;
}

const waitStatus = (e: LambdaEmulator, id: string, status: string) =>
  until(`${id} ${status}`, async () => {
    const i = await statusOf(e, id);
    return i.status === status ? i : undefined;
  });

// Live processes that mention `dir` on their command line, or in LEASEHOLD_HOME.
function processesUnder(dir: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue;
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      let env = '';
      try {
        env = readFileSync(`/proc/${name}/environ`, 'utf8');
      } catch {
        // not ours to read
      }
      if (cmd.includes(dir) || env.includes(`LEASEHOLD_HOME=${dir}`)) found.push(Number(name));
    } catch {
      // gone
    }
  }
  return found;
}

function realSsh(host: string, port: number, user: string, knownKey: string, command: string, identity = device.file) {
  const knownHosts = join(work, `known_hosts-${host}-${port}-${Math.random().toString(36).slice(2)}`);
  writeFileSync(knownHosts, `[${host}]:${port} ${knownKey}\n`);
  return spawnSync(
    'ssh',
    ['-F', '/dev/null', '-i', identity, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'GlobalKnownHostsFile=/dev/null',
      '-o', 'StrictHostKeyChecking=yes', '-o', 'ConnectTimeout=10', '-p', String(port), `${user}@${host}`, command],
    { encoding: 'utf8', timeout: 30_000 },
  );
}

const cloudConfig = (priv: string, pub: string) =>
  `#cloud-config\nssh_keys:\n  ed25519_private: |\n${priv.trimEnd().split('\n').map((l) => `    ${l}`).join('\n')}\n  ed25519_public: ${pub}\n`;

const started: LambdaEmulator[] = [];
async function emulator(opts: Parameters<typeof startLambdaEmulator>[0] = {}) {
  const e = await startLambdaEmulator({ bootMs: 200, terminateMs: 100, launchIntervalMs: 0, requestsPerSecond: 0, ...opts });
  started.push(e);
  return e;
}

afterAll(async () => {
  for (const e of started) await e.stop();
  for (const e of started) expect(processesUnder(e.dir)).toEqual([]);
  rmSync(work, { recursive: true, force: true });
});

describe('auth and error shape', () => {
  let e: LambdaEmulator;
  beforeAll(async () => {
    e = await emulator({ sshd: false });
  });

  it('answers 401 global/invalid-api-key, with message and suggestion, without a key or with a wrong one', async () => {
    for (const auth of [null, 'Bearer secret_wrong_0000', 'Token abc', `Bearer ${e.apiKey}x`]) {
      const r = await call(e, 'GET', '/instances', undefined, auth);
      expectError(r, 401, 'global/invalid-api-key');
      expect(typeof r.body.error.suggestion).toBe('string');
    }
  });

  it('takes the key as a bearer token, as the user name of basic auth, or as a bare basic credential', async () => {
    for (const auth of [bearer(e.apiKey), `Basic ${Buffer.from(`${e.apiKey}:`).toString('base64')}`, `Basic ${e.apiKey}`]) {
      const r = await call(e, 'GET', '/instances', undefined, auth);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ data: [] });
    }
  });

  it('never records the API key in its logs', async () => {
    expect(JSON.stringify(e.requests)).not.toContain(e.apiKey);
    expect(e.requests.some((r) => r.status === 401 && r.account === undefined)).toBe(true);
  });

  it('answers unknown endpoints and bad JSON in the same shape', async () => {
    expectError(await call(e, 'GET', '/nope'), 404, 'global/object-does-not-exist');
    const r = await fetch(`${e.url}/instance-operations/launch`, { method: 'POST', headers: { authorization: bearer(e.apiKey) }, body: '{not json' });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.code).toBe('global/invalid-parameters');
  });
});

describe("Lambda's API description", () => {
  const contract = lambdaContract();
  /** A call whose answer must be one the description allows for that operation and status. */
  const described = async (e: LambdaEmulator, method: string, path: string, body?: unknown, auth?: string | null): Promise<Answer> => {
    const a = await call(e, method, path, body, auth === undefined ? bearer(e.apiKey) : auth);
    const op = contract.operation(method, `/api/v1${path}`);
    expect({ call: `${method} ${path}`, status: a.status, problems: op?.checkAnswer(a.status, a.body) }).toEqual({ call: `${method} ${path}`, status: a.status, problems: [] });
    return a;
  };

  it('refuses a body with a field the description does not have, or of the wrong shape, as Lambda refuses a bad request, and counts it', async () => {
    const e = await emulator({ sshd: false });
    await addDeviceKey(e);
    const quantity = await described(e, 'POST', '/instance-operations/launch', launchBody({ quantity: 1 }));
    expectError(quantity, 400, 'global/invalid-parameters');
    expect(quantity.body.error.message).toContain('quantity is not a field the API describes');
    expect(e.instances()).toEqual([]);
    expect(e.launches.at(-1)).toMatchObject({ outcome: 'invalid-parameters', status: 400 });
    const id = await launch(e);
    expectError(await described(e, 'POST', '/instance-operations/terminate', { instance_ids: [id], force: true }), 400, 'global/invalid-parameters');
    expectError(await described(e, 'POST', '/instance-operations/terminate', { instance_ids: id }), 400, 'global/invalid-parameters');
    expectError(await described(e, 'POST', '/ssh-keys', { name: 'k2', public_key: device.pub, comment: 'laptop' }), 400, 'global/invalid-parameters');
    expectError(await described(e, 'POST', '/ssh-keys', { name: '' }), 400, 'global/invalid-parameters');
    expectError(await described(e, 'POST', '/ssh-keys'), 400, 'global/invalid-parameters');
    expect(e.instance(id)!.status).not.toMatch(/^terminat/);
    expect(e.refusedRequests.map((r) => ({ operationId: r.operationId, problems: r.problems, account: r.account }))).toEqual([
      { operationId: 'launchInstance', problems: ['quantity is not a field the API describes'], account: e.accounts[0]!.id },
      { operationId: 'terminateInstance', problems: ['force is not a field the API describes'], account: e.accounts[0]!.id },
      { operationId: 'terminateInstance', problems: ['instance_ids must be array'], account: e.accounts[0]!.id },
      { operationId: 'addSSHKey', problems: ['comment is not a field the API describes'], account: e.accounts[0]!.id },
      { operationId: 'addSSHKey', problems: ['name must NOT have fewer than 1 characters'], account: e.accounts[0]!.id },
      { operationId: 'addSSHKey', problems: ['the request body is missing'], account: e.accounts[0]!.id },
    ]);
    const remote = await fetch(`${e.origin}/_emulator/refused-requests`);
    expect(((await remote.json()) as { data: unknown[] }).data).toHaveLength(6);
  });

  it('gives only answers the description allows: the catalog, SSH keys, file systems, launch, list and get, restart, terminate, and their refusals', async () => {
    const e = await emulator({ sshd: false, fileSystems: [{ name: 'shared', region: 'us-west-1' }] });
    e.setCapacity('gpu_1x_h100_pcie', { 'us-east-1': 0 });
    expect((await described(e, 'GET', '/instance-types')).status).toBe(200);
    expect((await described(e, 'GET', '/instances', undefined, null)).status).toBe(401);
    expect((await described(e, 'POST', '/ssh-keys', { name: 'device', public_key: device.pub })).status).toBe(200);
    const generated = await described(e, 'POST', '/ssh-keys', { name: 'generated' });
    expect(generated.body.data.private_key).toEqual(expect.any(String));
    expect((await described(e, 'GET', '/ssh-keys')).body.data).toHaveLength(2);
    expect((await described(e, 'DELETE', `/ssh-keys/${generated.body.data.id}`)).status).toBe(200);
    expect((await described(e, 'DELETE', `/ssh-keys/${generated.body.data.id}`)).status).toBe(400);
    expect((await described(e, 'GET', '/file-systems')).body.data).toHaveLength(1);
    const launched = await described(e, 'POST', '/instance-operations/launch', launchBody({ name: 'worker', user_data: '#cloud-config\n', image: { family: 'lambda-stack-22-04' } }));
    const id = launched.body.data.instance_ids[0] as string;
    expect((await described(e, 'GET', `/instances/${id}`)).body.data.status).toBe('booting');
    expect((await described(e, 'GET', '/instances')).body.data).toHaveLength(1);
    await e.waitForStatus(id, 'active');
    expect((await described(e, 'GET', `/instances/${id}`)).body.data.ip).toEqual(expect.any(String));
    expect((await described(e, 'POST', '/instance-operations/restart', { instance_ids: [id] })).status).toBe(200);
    await e.waitForStatus(id, 'active');
    expect((await described(e, 'POST', '/instance-operations/terminate', { instance_ids: [id] })).body.data.terminated_instances[0].status).toBe('terminating');
    await e.waitForStatus(id, 'terminated');
    expect((await described(e, 'GET', '/instances')).body.data[0].status).toBe('terminated');
    // The refusals, each in the shape the description gives that operation and status.
    const refusals: [string, string, unknown, number][] = [
      ['GET', '/instances/0000', undefined, 404],
      ['POST', '/instance-operations/terminate', { instance_ids: ['0000'] }, 404],
      ['POST', '/instance-operations/restart', { instance_ids: ['0000'] }, 404],
      ['POST', '/instance-operations/launch', launchBody({ instance_type_name: 'gpu_1x_nope' }), 400],
      ['POST', '/instance-operations/launch', launchBody({ ssh_key_names: ['nobody'] }), 404],
      ['POST', '/instance-operations/launch', launchBody({ file_system_names: ['missing'] }), 404],
      ['POST', '/instance-operations/launch', launchBody({ file_system_names: ['shared'] }), 400],
      ['POST', '/instance-operations/launch', launchBody({ instance_type_name: 'gpu_1x_h100_pcie' }), 400],
    ];
    for (const [method, path, body, status] of refusals) expect((await described(e, method, path, body)).status).toBe(status);
    e.instanceQuota = 0;
    expectError(await described(e, 'POST', '/instance-operations/launch', launchBody()), 400, 'global/quota-exceeded');
    expect(e.contractBreaches).toEqual([]);
  });

  it('records an answer of its own that the description does not allow, and stop() then rejects, after cleaning up', async () => {
    const e = await startLambdaEmulator({ sshd: false, requestsPerSecond: 0, catalog: [{ name: 'gpu_half', description: 'half a GPU', gpu_description: 'A10', price_cents_per_hour: 40, specs: { vcpus: 4, memory_gib: 16, storage_gib: 100, gpus: 0.5 }, regions: ['us-east-1'] }] });
    expect((await call(e, 'GET', '/instance-types')).status).toBe(200);
    expect(e.contractBreaches).toEqual([
      { time: expect.any(Number), method: 'GET', path: '/api/v1/instance-types', status: 200, operationId: 'listInstanceTypes', problems: ['data.gpu_half.instance_type.specs.gpus must be integer'] },
    ]);
    await expect(e.stop()).rejects.toThrow('GET /api/v1/instance-types answered 200: data.gpu_half.instance_type.specs.gpus must be integer');
    expect(() => readdirSync(e.dir)).toThrow();
  });
});

describe('catalog', () => {
  let e: LambdaEmulator;
  beforeAll(async () => {
    e = await emulator({ sshd: false });
  });

  it('lists instance types with specs, price and the regions with capacity', async () => {
    const r = await call(e, 'GET', '/instance-types');
    expect(r.status).toBe(200);
    expect(r.body.data.gpu_1x_a10).toEqual({
      instance_type: {
        name: 'gpu_1x_a10',
        description: expect.any(String),
        gpu_description: expect.any(String),
        price_cents_per_hour: 75,
        specs: { vcpus: expect.any(Number), memory_gib: expect.any(Number), storage_gib: expect.any(Number), gpus: 1 },
      },
      regions_with_capacity_available: [
        { name: 'us-east-1', description: expect.any(String) },
        { name: 'us-west-1', description: expect.any(String) },
      ],
    });
    for (const t of ['gpu_1x_a100_sxm4', 'gpu_1x_h100_pcie', 'gpu_8x_h100_sxm5', 'gpu_1x_gh200']) expect(r.body.data[t]).toBeDefined();
    expect(r.body.data.gpu_1x_gh200.instance_type.description).toMatch(/ARM64/i);
    expect(r.body.data.gpu_1x_a6000.regions_with_capacity_available).toEqual([]);
  });

  it('follows setCapacity, setPrice and setCatalog', async () => {
    e.setCapacity('gpu_1x_a10', ['us-west-2']);
    e.setPrice('gpu_1x_a10', 99);
    let r = await call(e, 'GET', '/instance-types');
    expect(r.body.data.gpu_1x_a10.instance_type.price_cents_per_hour).toBe(99);
    expect(r.body.data.gpu_1x_a10.regions_with_capacity_available.map((x: any) => x.name)).toEqual(['us-west-2']);
    e.setCatalog([{ name: 'gpu_1x_test', description: '1x Test', gpu_description: 'Test', price_cents_per_hour: 1, specs: { vcpus: 1, memory_gib: 1, storage_gib: 1, gpus: 1 }, regions: { 'us-east-1': 0 } }]);
    r = await call(e, 'GET', '/instance-types');
    expect(Object.keys(r.body.data)).toEqual(['gpu_1x_test']);
    expect(r.body.data.gpu_1x_test.regions_with_capacity_available).toEqual([]);
    expect(() => e.setCapacity('gpu_1x_test', ['mars-1'])).toThrow(/unknown region/);
  });
});

describe('launch, validation and capacity', () => {
  let e: LambdaEmulator;
  beforeAll(async () => {
    e = await emulator({ sshd: false, fileSystems: [{ name: 'shared', region: 'us-west-1' }] });
    await addDeviceKey(e);
  });

  it('goes booting -> active, with an ip only once active, and lists it', async () => {
    e.bootMs = 400;
    const id = await launch(e, { name: 'worker-1' });
    const booting = await statusOf(e, id);
    expect(booting).toMatchObject({ id, name: 'worker-1', status: 'booting', ssh_key_names: ['device'], file_system_names: [], region: { name: 'us-east-1' } });
    // The description's Instance has no is_reserved (only its examples show one).
    expect(booting).not.toHaveProperty('is_reserved');
    // Optional fields are left out until they have a value, never null.
    for (const field of ['ip', 'private_ip', 'hostname', 'jupyter_token', 'jupyter_url']) expect(booting).not.toHaveProperty(field);
    expect(booting.actions).toEqual({
      migrate: { available: false, reason_code: 'vm-has-not-launched', reason_description: expect.any(String) },
      rebuild: { available: false, reason_code: 'vm-has-not-launched', reason_description: expect.any(String) },
      restart: { available: false, reason_code: 'vm-has-not-launched', reason_description: expect.any(String) },
      cold_reboot: { available: false, reason_code: 'vm-has-not-launched', reason_description: expect.any(String) },
      terminate: { available: true },
    });
    expect(booting.instance_type).toMatchObject({ name: 'gpu_1x_a10', price_cents_per_hour: 75 });
    const active = await waitStatus(e, id, 'active');
    expect(active.ip).toMatch(/^127\.77\.\d+\.\d+$/);
    expect(active.hostname).toEqual(expect.any(String));
    expect(active.actions).toMatchObject({ restart: { available: true }, terminate: { available: true } });
    const list = await call(e, 'GET', '/instances');
    expect(list.body.data.map((i: ApiInstance) => i.id)).toContain(id);
    expectError(await call(e, 'GET', '/instances/0000'), 404, 'global/object-does-not-exist');
    e.bootMs = 200;
  });

  it('accepts an image, and an empty name as no name', async () => {
    const byFamily = await launch(e, { image: { family: 'lambda-stack-22-04' }, name: '' });
    expect(await statusOf(e, byFamily)).not.toHaveProperty('name');
    await launch(e, { image: { id: 'img-0123' } });
    expectError(await call(e, 'POST', '/instance-operations/launch', launchBody({ image: 'ubuntu' })), 400, 'global/invalid-parameters');
  });

  it('gives every instance its own loopback address', async () => {
    const a = await launch(e);
    const b = await launch(e);
    const [ia, ib] = [await waitStatus(e, a, 'active'), await waitStatus(e, b, 'active')];
    expect(ia.ip).not.toEqual(ib.ip);
  });

  it('refuses bad requests with Lambda codes', async () => {
    const post = (over: Record<string, unknown>) => call(e, 'POST', '/instance-operations/launch', launchBody(over));
    expectError(await post({ instance_type_name: 'gpu_1x_nope' }), 400, 'global/invalid-parameters');
    expectError(await post({ region_name: 'mars-1' }), 400, 'global/invalid-parameters');
    expectError(await post({ ssh_key_names: [] }), 400, 'global/invalid-parameters');
    expectError(await post({ quantity: 2 }), 400, 'global/invalid-parameters');
    expectError(await post({ name: 'x'.repeat(65) }), 400, 'global/invalid-parameters');
    expectError(await post({ ssh_key_names: ['nobody'] }), 404, 'global/object-does-not-exist');
    expectError(await post({ file_system_names: ['missing'] }), 404, 'global/object-does-not-exist');
    expectError(await post({ file_system_names: ['shared'] }), 400, 'instance-operations/launch/file-system-in-wrong-region');
    const fsLaunch = await launch(e, { region_name: 'us-west-1', file_system_names: ['shared'] });
    expect((await statusOf(e, fsLaunch)).file_system_names).toEqual(['shared']);
  });

  it('answers insufficient-capacity where the type has none, and counts counted capacity', async () => {
    expectError(await call(e, 'POST', '/instance-operations/launch', launchBody({ region_name: 'us-west-3' })), 400, 'instance-operations/launch/insufficient-capacity');
    e.setCapacity('gpu_1x_h100_pcie', { 'us-west-3': 1 });
    const id = await launch(e, { region_name: 'us-west-3', instance_type_name: 'gpu_1x_h100_pcie' });
    const types = await call(e, 'GET', '/instance-types');
    expect(types.body.data.gpu_1x_h100_pcie.regions_with_capacity_available).toEqual([]);
    expectError(await call(e, 'POST', '/instance-operations/launch', launchBody({ region_name: 'us-west-3', instance_type_name: 'gpu_1x_h100_pcie' })), 400, 'instance-operations/launch/insufficient-capacity');
    await call(e, 'POST', '/instance-operations/terminate', { instance_ids: [id] });
    const again = await call(e, 'GET', '/instance-types');
    expect(again.body.data.gpu_1x_h100_pcie.regions_with_capacity_available.map((r: any) => r.name)).toEqual(['us-west-3']);
    expect(e.launches.filter((l) => l.outcome === 'insufficient-capacity').length).toBe(2);
  });

  it('honours the instance quota', async () => {
    e.instanceQuota = e.instances(e.apiKey).filter((i) => i.status !== 'terminated' && i.status !== 'terminating').length;
    expectError(await call(e, 'POST', '/instance-operations/launch', launchBody()), 400, 'global/quota-exceeded');
    e.instanceQuota = Infinity;
  });
});

describe('launch rate limit', () => {
  it("refuses a second launch within the default 12 s with 429 and Cloudflare's plain text, as Lambda's docs say", async () => {
    const e = await emulator({ sshd: false, launchIntervalMs: undefined });
    expect(e.launchIntervalMs).toBe(12_000);
    await addDeviceKey(e);
    await launch(e);
    const second = await call(e, 'POST', '/instance-operations/launch', launchBody());
    expect({ status: second.status, type: second.headers.get('content-type'), body: second.body }).toEqual({ status: 429, type: 'text/plain; charset=UTF-8', body: RATE_LIMIT_BODY });
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(11);
    expect(e.launches.map((l) => l.outcome)).toEqual(['launched', 'rate-limited']);
    expect(e.instances()).toHaveLength(1);
    // Another account has its own allowance.
    const other = e.addAccount();
    await addDeviceKey(e, other);
    await launch(e, {}, other);
    await e.stop();
  });

  it('lets the next launch through once the interval has passed; a refused launch does not count', async () => {
    const e = await emulator({ sshd: false, launchIntervalMs: 1500 });
    await addDeviceKey(e);
    await launch(e);
    expect((await call(e, 'POST', '/instance-operations/launch', launchBody())).status).toBe(429);
    await new Promise((r) => setTimeout(r, 300));
    expect((await call(e, 'POST', '/instance-operations/launch', launchBody())).status).toBe(429);
    // From the first launch's arrival, not from the refused ones.
    await new Promise((r) => setTimeout(r, Math.max(0, e.launches[0]!.time + 1550 - Date.now())));
    await launch(e);
    expect(e.launches.map((l) => l.outcome)).toEqual(['launched', 'rate-limited', 'rate-limited', 'launched']);
    await e.stop();
  });

  it('has a general request limit, one per second per key unless set otherwise', async () => {
    const byDefault = await startLambdaEmulator({ sshd: false });
    const first = await Promise.all(Array.from({ length: 3 }, () => call(byDefault, 'GET', '/instances').then((r) => r.status)));
    expect(first.sort()).toEqual([200, 429, 429]);
    await byDefault.stop();
    const e = await emulator({ sshd: false, requestsPerSecond: 0 });
    const statuses = await Promise.all(Array.from({ length: 10 }, () => call(e, 'GET', '/instances').then((r) => r.status)));
    expect(statuses.every((s) => s === 200)).toBe(true);
    e.requestsPerSecond = 3;
    const limited = [];
    for (let n = 0; n < 5; n++) limited.push((await call(e, 'GET', '/instances')).status);
    expect(limited).toEqual([200, 200, 200, 429, 429]);
    // A launch the general limit refuses is told apart from one the launch interval refuses.
    expect((await call(e, 'POST', '/instance-operations/launch', launchBody())).status).toBe(429);
    expect(e.launches.at(-1)!.outcome).toBe('request-limited');
    await e.stop();
  });
});

describe('terminate and accounts', () => {
  let e: LambdaEmulator;
  beforeAll(async () => {
    e = await emulator();
    await addDeviceKey(e);
  });

  it('terminates: terminating, then terminated, still listed, and its sshd is gone', async () => {
    const id = await launch(e);
    await waitStatus(e, id, 'active');
    const { dir } = e.instance(id)!;
    expect(processesUnder(dir).length).toBeGreaterThan(0);
    const r = await call(e, 'POST', '/instance-operations/terminate', { instance_ids: [id] });
    expect(r.status).toBe(200);
    expect(r.body.data.terminated_instances).toEqual([expect.objectContaining({ id, status: 'terminating' })]);
    const done = await waitStatus(e, id, 'terminated');
    expect(done.id).toBe(id);
    const listed = (await call(e, 'GET', '/instances')).body.data.find((i: ApiInstance) => i.id === id);
    expect(listed.status).toBe('terminated');
    expect(listed.actions.terminate).toMatchObject({ available: false, reason_code: 'vm-is-terminating' });
    expect(processesUnder(dir)).toEqual([]);
    // Then Lambda forgets it: gone from the listing, and 404 by ID.
    e.forgetTerminatedMs = 0;
    expect((await call(e, 'GET', '/instances')).body.data.map((i: ApiInstance) => i.id)).not.toContain(id);
    expectError(await call(e, 'GET', `/instances/${id}`), 404, 'global/object-does-not-exist');
    expect(e.instance(id)!.status).toBe('terminated');
    e.forgetTerminatedMs = 10_000;
    expectError(await call(e, 'POST', '/instance-operations/terminate', { instance_ids: ['0000'] }), 404, 'global/object-does-not-exist');
  });

  it('keeps accounts apart: instances, SSH keys and terminate', async () => {
    const otherKey = e.addAccount('other');
    expect(e.accounts.map((a) => a.apiKey)).toContain(otherKey);
    const mine = await launch(e);
    expect((await call(e, 'GET', '/instances', undefined, bearer(otherKey))).body.data).toEqual([]);
    expect((await call(e, 'GET', '/ssh-keys', undefined, bearer(otherKey))).body.data).toEqual([]);
    expectError(await call(e, 'GET', `/instances/${mine}`, undefined, bearer(otherKey)), 404, 'global/object-does-not-exist');
    expectError(await call(e, 'POST', '/instance-operations/terminate', { instance_ids: [mine] }, bearer(otherKey)), 404, 'global/object-does-not-exist');
    expectError(await call(e, 'POST', '/instance-operations/launch', launchBody(), bearer(otherKey)), 404, 'global/object-does-not-exist');
    expect(e.instances(otherKey)).toEqual([]);
    expect(e.instances(e.apiKey).map((i) => i.id)).toContain(mine);
    await call(e, 'POST', '/instance-operations/terminate', { instance_ids: [mine] });
  });

  it('manages SSH keys: list, duplicate names refused, generated pairs, delete', async () => {
    const list = await call(e, 'GET', '/ssh-keys');
    expect(list.body.data).toEqual([{ id: expect.any(String), name: 'device', public_key: device.pub }]);
    expectError(await call(e, 'POST', '/ssh-keys', { name: 'device', public_key: device.pub }), 400, 'global/invalid-parameters');
    expectError(await call(e, 'POST', '/ssh-keys', { name: 'bad', public_key: 'not a key' }), 400, 'global/invalid-parameters');
    const made = await call(e, 'POST', '/ssh-keys', { name: 'generated' });
    expect(made.body.data.private_key).toContain('BEGIN OPENSSH PRIVATE KEY');
    expect(made.body.data.public_key).toMatch(/^ssh-ed25519 /);
    expect((await call(e, 'DELETE', `/ssh-keys/${made.body.data.id}`)).status).toBe(200);
    expectError(await call(e, 'DELETE', `/ssh-keys/${made.body.data.id}`), 400, 'global/invalid-parameters');
    expect((await call(e, 'GET', '/ssh-keys')).body.data.map((k: any) => k.name)).toEqual(['device']);
  });
});

describe('faults', () => {
  let e: LambdaEmulator;
  beforeAll(async () => {
    e = await emulator({ sshd: false });
    await addDeviceKey(e);
  });

  it('drop: does the launch, then closes the socket without an answer', async () => {
    e.fault({ op: 'launch', mode: 'drop', times: 1 });
    const before = e.instances().length;
    await expect(call(e, 'POST', '/instance-operations/launch', launchBody())).rejects.toThrow();
    expect(e.instances()).toHaveLength(before + 1);
    expect(e.launches.at(-1)).toMatchObject({ outcome: 'launched', fault: 'drop', status: 0 });
    expect(e.faults).toEqual([]);
    await launch(e); // times: 1 used it up
  });

  it('status: answers the code in the Lambda shape and does no work', async () => {
    e.fault({ op: 'launch', mode: 'status', status: 503, times: 2 });
    const before = e.instances().length;
    const r = await call(e, 'POST', '/instance-operations/launch', launchBody());
    expectError(r, 503, 'global/internal-error');
    expectError(await call(e, 'POST', '/instance-operations/launch', launchBody()), 503, 'global/internal-error');
    expect(e.instances()).toHaveLength(before);
    e.fault({ op: 'list-instances', mode: 'status', status: 400, code: 'instance-operations/launch/insufficient-capacity' });
    expectError(await call(e, 'GET', '/instances'), 400, 'instance-operations/launch/insufficient-capacity');
    expect((await call(e, 'GET', '/instance-types')).status).toBe(200);
    e.clearFaults();
    expect((await call(e, 'GET', '/instances')).status).toBe(200);
  });

  it('delay and hang', async () => {
    e.fault({ op: 'list-types', mode: 'delay', ms: 300, times: 1 });
    const t0 = Date.now();
    expect((await call(e, 'GET', '/instance-types')).status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    e.fault({ op: 'any', mode: 'hang', times: 1 });
    await expect(call(e, 'GET', '/instances', undefined, bearer(e.apiKey), AbortSignal.timeout(300))).rejects.toThrow();
    expect(e.requests.at(-1)).toMatchObject({ path: '/api/v1/instances', status: 0, fault: 'hang' });
    expect((await call(e, 'GET', '/instances')).status).toBe(200);
  });

  it('rate 0 never hits, and apiKey limits a fault to one account', async () => {
    e.fault({ op: 'any', mode: 'status', status: 500, rate: 0 });
    const other = e.addAccount();
    e.fault({ op: 'list-instances', mode: 'status', status: 502, apiKey: other });
    expect((await call(e, 'GET', '/instances')).status).toBe(200);
    expect((await call(e, 'GET', '/instances', undefined, bearer(other))).status).toBe(502);
    e.clearFaults();
  });
});

describe('control API', () => {
  it('drives the same knobs over HTTP', async () => {
    const e = await emulator({ sshd: false });
    const ctl = async (method: string, path: string, body?: unknown) => {
      const init: RequestInit = { method, headers: { 'content-type': 'application/json' } };
      if (body !== undefined) init.body = JSON.stringify(body);
      const r = await fetch(`${e.origin}/_emulator${path}`, init);
      return { status: r.status, body: (await r.json()) as any };
    };
    const acct = await ctl('POST', '/accounts', { name: 'remote' });
    expect(acct.body.data).toMatchObject({ id: expect.any(String), apiKey: expect.any(String) });
    expect((await ctl('POST', '/price', { type: 'gpu_1x_a10', cents: 42 })).status).toBe(200);
    expect((await ctl('POST', '/capacity', { type: 'gpu_1x_a10', regions: ['us-south-1'] })).status).toBe(200);
    const types = await call(e, 'GET', '/instance-types');
    expect(types.body.data.gpu_1x_a10.instance_type.price_cents_per_hour).toBe(42);
    expect(types.body.data.gpu_1x_a10.regions_with_capacity_available.map((r: any) => r.name)).toEqual(['us-south-1']);
    await ctl('POST', '/faults', { op: 'get-instance', mode: 'status', status: 500, times: 1 });
    expectError(await call(e, 'GET', '/instances/x'), 500, 'global/internal-error');
    expect((await ctl('POST', '/settings', { bootMs: 50, launchIntervalMs: 5000 })).body.data).toMatchObject({ bootMs: 50, launchIntervalMs: 5000 });
    expect(e.bootMs).toBe(50);
    expect((await ctl('GET', '/requests')).body.data.length).toBeGreaterThan(0);
    expect((await ctl('GET', '/state')).body.data).toMatchObject({ sshPort: e.sshPort, sshUser: e.sshUser });
    expect((await ctl('POST', '/price', { type: 'nope', cents: 1 })).status).toBe(400);
    await e.stop();
  });
});

describe('real sshd per instance', () => {
  let e: LambdaEmulator;
  beforeAll(async () => {
    e = await emulator();
    await addDeviceKey(e);
  });

  it('presents the host key from user_data, admits the launch SSH key, refuses a client expecting another host key', async () => {
    const id = await launch(e, { user_data: cloudConfig(hostKey.priv, hostKey.pub) });
    const i = await waitStatus(e, id, 'active');
    const known = hostKey.pub.split(' ').slice(0, 2).join(' ');
    expect(e.instance(id)!.hostKey).toBe(known);
    const ok = realSsh(i.ip!, e.sshPort, e.sshUser, known, 'echo ok');
    expect({ status: ok.status, stdout: ok.stdout.trim() }).toEqual({ status: 0, stdout: "ok" });
    const env = realSsh(i.ip!, e.sshPort, e.sshUser, known, 'echo "$LEASEHOLD_HOME|$LEASEHOLD_AUTHORIZED_KEYS|$HOME"');
    const dir = e.instance(id)!.dir;
    expect(env.stdout.trim()).toBe(`${dir}/home|${dir}/authorized_keys|${dir}/home`);
    const refused = realSsh(i.ip!, e.sshPort, e.sshUser, otherHost.pub.split(' ').slice(0, 2).join(' '), 'echo ok');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/i);
  });

  it('generates a host key when user_data has none, and keeps machines apart', async () => {
    const a = await launch(e);
    const b = await launch(e, { user_data: '#!/bin/sh\necho not cloud-config\n' });
    const [ia, ib] = [await waitStatus(e, a, 'active'), await waitStatus(e, b, 'active')];
    const [ka, kb] = [e.instance(a)!.hostKey, e.instance(b)!.hostKey];
    expect(ka).toMatch(/^ssh-ed25519 /);
    expect(ka).not.toBe(kb);
    expect(realSsh(ia.ip!, e.sshPort, e.sshUser, ka, 'echo ok').stdout.trim()).toBe('ok');
    // b's sshd does not answer with a's key.
    expect(realSsh(ib.ip!, e.sshPort, e.sshUser, ka, 'echo ok').status).not.toBe(0);
    expect(e.instance(b)!.notes.join(' ')).toMatch(/not #cloud-config/);
  });

  it('admits only the launch key and the cloud-config ssh_authorized_keys; with sshLagMs sshd comes up after active', async () => {
    const extra = keygen('extra');
    const stranger = keygen('stranger');
    const lagging = await emulator({ sshLagMs: 700 });
    await addDeviceKey(lagging);
    const userData = `${cloudConfig(hostKey.priv, hostKey.pub)}ssh_authorized_keys:\n  - ${extra.pub}\n`;
    const id = await launch(lagging, { user_data: userData });
    const i = await waitStatus(lagging, id, 'active');
    expect(lagging.instance(id)!.sshdPid).toBeUndefined();
    await until('sshd after active', async () => lagging.instance(id)!.sshdPid);
    const known = hostKey.pub.split(' ').slice(0, 2).join(' ');
    expect(realSsh(i.ip!, lagging.sshPort, lagging.sshUser, known, 'echo ok').stdout.trim()).toBe('ok');
    expect(realSsh(i.ip!, lagging.sshPort, lagging.sshUser, known, 'echo ok', extra.file).stdout.trim()).toBe('ok');
    const refused = realSsh(i.ip!, lagging.sshPort, lagging.sshUser, known, 'echo ok', stranger.file);
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/Permission denied/);
    await lagging.stop();
    expect(processesUnder(lagging.dir)).toEqual([]);
  });

  it('terminate kills open sessions and what they run', async () => {
    const id = await launch(e);
    const i = await waitStatus(e, id, 'active');
    const knownHosts = join(work, 'known_hosts-session');
    writeFileSync(knownHosts, `[${i.ip}]:${e.sshPort} ${e.instance(id)!.hostKey}\n`);
    const session = spawn('ssh', ['-F', '/dev/null', '-i', device.file, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${knownHosts}`,
      '-o', 'StrictHostKeyChecking=yes', '-p', String(e.sshPort), `${e.sshUser}@${i.ip}`, 'sleep 300'], { stdio: 'ignore' });
    const exited = new Promise<void>((r) => session.on('exit', () => r()));
    const dir = e.instance(id)!.dir;
    // The listener, and the remote sleep (which has the machine's LEASEHOLD_HOME).
    await until('the remote sleep', async () => (processesUnder(dir).length >= 2 ? true : undefined));
    // Plus the session's own sshd processes.
    expect(e.sshdProcesses().length).toBeGreaterThanOrEqual(3);
    await call(e, 'POST', '/instance-operations/terminate', { instance_ids: [id] });
    await waitStatus(e, id, 'terminated');
    expect(processesUnder(dir)).toEqual([]);
    await exited;
  });

  it('stop() terminates everything and leaves no sshd and no directory', async () => {
    const own = await startLambdaEmulator({ bootMs: 100, launchIntervalMs: 0, requestsPerSecond: 0 });
    await addDeviceKey(own);
    const ids = [await launch(own), await launch(own)];
    for (const id of ids) await own.waitForStatus(id, 'active', 20_000);
    // And one still booting.
    own.bootMs = 60_000;
    await launch(own);
    expect(processesUnder(own.dir).length).toBeGreaterThanOrEqual(2);
    await own.stop();
    expect(processesUnder(own.dir)).toEqual([]);
    expect(own.sshdProcesses()).toEqual([]);
    expect(() => readdirSync(own.dir)).toThrow();
  });
});

describe('CLI', () => {
  it('prints its URL and key as JSON, serves, and on SIGTERM stops leaving no process behind', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(process.cwd(), 'e2e/fakes/lambda/main.ts'), '--boot-ms', '100', '--launch-interval-ms', '0', '--requests-per-second', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const line = await new Promise<string>((resolveLine, reject) => {
      const rl = createInterface({ input: child.stdout! });
      rl.once('line', resolveLine);
      child.once('exit', () => reject(new Error(`CLI exited before printing: ${stderr}`)));
    });
    const info = JSON.parse(line) as { url: string; apiKey: string; controlUrl: string; sshPort: number; sshUser: string; dir: string; pid: number };
    expect(info).toMatchObject({ url: expect.stringMatching(/\/api\/v1$/), apiKey: expect.any(String), sshPort: expect.any(Number), pid: child.pid });
    expect(stderr).not.toContain(info.apiKey);
    const fake = { url: info.url, apiKey: info.apiKey } as LambdaEmulator;
    await addDeviceKey(fake);
    const id = await launch(fake);
    await waitStatus(fake, id, 'active');
    expect(processesUnder(info.dir).length).toBeGreaterThan(0);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(processesUnder(info.dir)).toEqual([]);
    expect(() => readdirSync(info.dir)).toThrow();
  });
});
