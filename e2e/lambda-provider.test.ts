// LambdaProvider against the Lambda API emulator over real HTTP (no sshd
// here: these tests are about the API conversation; e2e/lambda.test.ts
// boots real machines).
import { describe, it, expect, beforeEach, afterEach } from '@jest/globals';
import { startLambdaEmulator, type CatalogEntry, type LambdaEmulator } from './fakes/lambda/server.js';
import { generateControllerKey } from '../src/machine/keys.js';
import { isProviderError } from '../src/providers/errors.js';
import type { LaunchRequest } from '../src/providers/types.js';
import { LambdaClient } from '../src/providers/lambda/client.js';
import { LaunchPacer, RequestSpacer } from '../src/providers/lambda/pacer.js';
import { waitFor } from '../src/kube/testing/wait.js';
import { accountKeyName, LambdaProvider, parseLambdaState, type LambdaLaunchSettings, type LambdaProviderOptions } from '../src/providers/lambda/provider.js';

const INTERVAL = 300;
const SETTLE = 1500;
const type = (name: string, cents: number, regions: string[] | Record<string, number>): CatalogEntry => ({
  name,
  description: name,
  gpu_description: 'A10 (24 GB PCIe)',
  price_cents_per_hour: cents,
  specs: { vcpus: 30, memory_gib: 200, storage_gib: 1400, gpus: 1 },
  regions,
});

let emu: LambdaEmulator;
let key: { privateKey: string; publicKey: string };

beforeEach(async () => {
  // The general request limit is off here: these tests are about the conversation, not its pace.
  emu = await startLambdaEmulator({ sshd: false, bootMs: 50, terminateMs: 50, launchIntervalMs: INTERVAL, requestsPerSecond: 0, catalog: [type('gpu_1x_a10', 75, ['us-east-1', 'us-west-1']), type('gpu_8x_h100', 2392, ['us-east-1'])] });
  key = generateControllerKey();
});
afterEach(async () => {
  await emu.stop();
});

function provider(launch?: Partial<LambdaLaunchSettings>, apiKey = emu.apiKey, pacer = new LaunchPacer({ intervalMs: INTERVAL + 50 }), extra: Partial<LambdaProviderOptions> = {}) {
  const client = new LambdaClient({ endpoint: emu.url, apiKey, timeoutMs: 2000 });
  return new LambdaProvider({
    client,
    pacer,
    registeredKeys: new Set(),
    pollMs: 30,
    lookupWithinMs: 500,
    confirmWithinMs: 2000,
    launchSettleMs: SETTLE,
    ...extra,
    launch: { instanceType: 'gpu_1x_a10', regions: ['us-east-1'], maxPricePerHour: 10, login: 'ubuntu', sshPort: 2222, ...launch },
  });
}

const progress: string[] = [];
function req(name = 'leasehold-abcd1234'): LaunchRequest {
  progress.length = 0;
  return { leaseID: name.slice(10), machineName: name, offer: 'lambda', where: 'gpu', controllerPublicKey: key.publicKey, signal: new AbortController().signal, onProgress: (l) => progress.push(l) };
}
const live = () => emu.instances().filter((i) => i.status !== 'terminated');
async function failure(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

describe('LambdaProvider.launch', () => {
  it('registers the account key once, launches a named instance with a fresh host key in user_data, and waits until it is active', async () => {
    const p = provider();
    const out = await p.launch(req());
    const [inst] = live();
    expect(inst).toMatchObject({ name: 'leasehold-abcd1234', status: 'active', ssh_key_names: [accountKeyName(key.publicKey)] });
    expect(inst!.region.name).toBe('us-east-1');
    expect(inst!.userData).toMatch(/^#cloud-config/);
    expect(inst!.userData).toContain('ed25519_private');
    expect(out.target.ssh).toMatchObject({ host: inst!.ip, port: 2222, user: 'ubuntu' });
    expect(inst!.userData).toContain(out.target.ssh!.hostKey!.split(' ')[1]!);
    expect(parseLambdaState(out.state)).toMatchObject({ instanceID: inst!.id, region: 'us-east-1', name: 'leasehold-abcd1234' });
    expect(progress.some((l) => l.includes('$0.75/h'))).toBe(true);
    // A second launch on the same account does not register the key again.
    const keysBefore = emu.requests.filter((r) => r.path.endsWith('/ssh-keys') && r.method === 'POST').length;
    await p.launch(req('leasehold-abcd5678'));
    expect(emu.requests.filter((r) => r.path.endsWith('/ssh-keys') && r.method === 'POST').length).toBe(keysBefore);
    const hostKeys = new Set(live().map((i) => i.userData));
    expect(hostKeys.size).toBe(2);
  });

  it('checks the price as the request goes out and refuses one above the cap', async () => {
    emu.setPrice('gpu_1x_a10', 1200);
    const err = await failure(provider().launch(req()));
    expect(isProviderError(err, 'OverPriceCap')).toBe(true);
    expect(String(err)).toContain('maxPricePerHour');
    expect(emu.launches).toEqual([]);
  });

  it('refuses with the dearer type, its price and the cap when only a type above the cap has capacity, having asked for nothing', async () => {
    emu.setCapacity('gpu_1x_a10', []);
    const err = await failure(provider({ maxPricePerHour: 2 }).launch(req()));
    expect(isProviderError(err, 'OverPriceCap')).toBe(true);
    expect(isProviderError(err) && err.nothingMade).toBe(true);
    expect(String(err)).toContain('no capacity for gpu_1x_a10');
    expect(String(err)).toContain('gpu_8x_h100 has capacity but is listed at $23.92/h, above the cap of $2.00/h; raise spec.lambda.maxPricePerHour');
    expect(emu.launches).toEqual([]);
  });

  it('refuses with the dearer type when the launch itself is answered no capacity in every wanted region, renting nothing dearer', async () => {
    // The listing still shows capacity for gpu_1x_a10: only the launch says otherwise.
    emu.fault({ op: 'launch', mode: 'status', status: 400, code: 'instance-operations/launch/insufficient-capacity', times: 2 });
    const err = await failure(provider({ maxPricePerHour: 2, regions: ['us-east-1', 'us-west-1'] }).launch(req()));
    expect(isProviderError(err, 'OverPriceCap')).toBe(true);
    expect(isProviderError(err) && err.nothingMade).toBe(true);
    expect(String(err)).toContain('gpu_8x_h100 has capacity but is listed at $23.92/h, above the cap of $2.00/h; raise spec.lambda.maxPricePerHour');
    expect(emu.requests.filter((r) => r.path.endsWith('/instance-operations/launch')).length).toBe(2);
    expect(live()).toEqual([]);
  });

  it('names no dearer type outside spec.lambda.instanceTypes or what the Lease needs', async () => {
    emu.setCapacity('gpu_1x_a10', []);
    const outside = await failure(provider({ maxPricePerHour: 2, instanceTypes: ['gpu_1x_a10'] }).launch(req()));
    expect(isProviderError(outside, 'InsufficientCapacity')).toBe(true);
    const unfit = await failure(provider({ maxPricePerHour: 2 }).launch({ ...req(), where: 'gpus>=16' }));
    expect(isProviderError(unfit, 'InsufficientCapacity')).toBe(true);
  });

  it('fails without retry when no wanted region has capacity, and never launches another type', async () => {
    emu.setCapacity('gpu_1x_a10', ['us-west-1']);
    // gpu_8x_h100 has capacity within the cap: still never launched in its place.
    const err = await failure(provider({ maxPricePerHour: 30 }).launch(req()));
    expect(isProviderError(err, 'InsufficientCapacity')).toBe(true);
    expect(isProviderError(err) && err.retryable).toBe(false);
    expect(emu.launches).toEqual([]);
  });

  it('tries the next wanted region when the launch itself says no capacity', async () => {
    emu.fault({ op: 'launch', mode: 'status', status: 400, code: 'instance-operations/launch/insufficient-capacity', times: 1 });
    const out = await provider({ regions: ['us-east-1', 'us-west-1'] }).launch(req());
    expect(parseLambdaState(out.state).region).toBe('us-west-1');
    // (A fault answers before the emulator reads the body, so only the real launch records its region.)
    expect(emu.launches).toHaveLength(2);
    expect(emu.launches[1]!.region).toBe('us-west-1');
  });

  it('spaces launches on one account and waits out a 429 instead of failing', async () => {
    const pacer = new LaunchPacer({ intervalMs: INTERVAL + 50 });
    emu.fault({ op: 'launch', mode: 'status', status: 429, times: 1 });
    await Promise.all(['leasehold-aaaa0001', 'leasehold-aaaa0002', 'leasehold-aaaa0003'].map((n) => provider({}, emu.apiKey, pacer).launch(req(n))));
    const ok = emu.launches.filter((l) => l.outcome === 'launched');
    expect(ok).toHaveLength(3);
    const gaps = emu.launches.slice(1).map((l, i) => l.time - emu.launches[i]!.time);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(INTERVAL);
    expect(emu.launches.filter((l) => l.status === 429 && l.fault === undefined)).toEqual([]);
  });

  it('adopts by name, without sending again, when the lost launch went through', async () => {
    emu.fault({ op: 'launch', mode: 'drop', times: 1 });
    await provider().launch(req());
    expect(emu.launches).toHaveLength(1);
    expect(live()).toHaveLength(1);
    expect(progress.some((l) => l.includes('adopted'))).toBe(true);
  });

  it('counts the lost launch it adopted as landed, so a release need not wait for it', async () => {
    emu.fault({ op: 'launch', mode: 'drop', times: 1 });
    const out = await provider().launch(req());
    expect(parseLambdaState(out.state).unansweredLaunchAt).toBeUndefined();
  });

  it('sends a lost launch once more, and adopts by name when the second answer is lost too', async () => {
    emu.fault({ op: 'launch', mode: 'status', status: 502, times: 1 });
    emu.fault({ op: 'launch', mode: 'drop', times: 1 });
    const out = await provider().launch(req());
    expect(emu.launches).toHaveLength(2);
    expect(live().map((i) => i.id)).toEqual([parseLambdaState(out.state).instanceID]);
  });

  it('withdraws after two lost answers when nothing has the name', async () => {
    emu.fault({ op: 'launch', mode: 'status', status: 502, times: 2 });
    const err = await failure(provider().launch(req()));
    expect(String(err)).toContain('two launch answers');
    expect(isProviderError(err) && err.retryable).toBe(false);
    expect(emu.launches).toHaveLength(2);
    expect(live()).toEqual([]);
  });

  it('reports a wrong API key as Unauthorized without the key in the message', async () => {
    const err = await failure(provider({}, 'secret_wrong_key_123').launch(req()));
    expect(isProviderError(err, 'Unauthorized')).toBe(true);
    expect(String(err)).not.toContain('secret_wrong_key_123');
  });
});

describe('LambdaProvider.release', () => {
  it('terminates by ID and returns only once the instance is listed terminated', async () => {
    const p = provider();
    const out = await p.launch(req());
    await p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: out.state, signal: new AbortController().signal });
    expect(emu.instances()[0]!.status).toBe('terminated');
    // Safe to run twice.
    await p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: out.state, signal: new AbortController().signal });
  });

  it('finds the instance by name when the launch never answered, and is a no-op when nothing has the name', async () => {
    const p = provider();
    await p.launch(req());
    await p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: '', signal: new AbortController().signal });
    expect(live()).toEqual([]);
    await p.release({ leaseID: 'ffff0000', machineName: 'leasehold-ffff0000', offer: 'lambda', state: '', signal: new AbortController().signal });
  });

  it('also ends a second instance under the lease\'s name (a lost launch that landed late)', async () => {
    const p = provider();
    const out = await p.launch(req());
    // The late one: same name, made behind the provider's back.
    const other = new LambdaClient({ endpoint: emu.url, apiKey: emu.apiKey });
    await new Promise((r) => setTimeout(r, INTERVAL + 50));
    await other.launch({ region: 'us-east-1', instanceType: 'gpu_1x_a10', sshKeyNames: [accountKeyName(key.publicKey)], name: 'leasehold-abcd1234' });
    expect(live()).toHaveLength(2);
    await p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: out.state, signal: new AbortController().signal });
    expect(live()).toEqual([]);
  });

  it('rides out a transient error on a listing before the launch', async () => {
    emu.fault({ op: 'list-types', mode: 'status', status: 503, times: 1 });
    await provider().launch(req());
    expect(live()).toHaveLength(1);
  });

  it('fails, to be retried, when termination is refused or the key cannot see the instance', async () => {
    const p = provider();
    const out = await p.launch(req());
    emu.fault({ op: 'terminate', mode: 'status', status: 500, times: 1 });
    const err = await failure(p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: out.state, signal: new AbortController().signal }));
    expect(String(err)).toContain('HTTP 500');
    expect(live()).toHaveLength(1);
    const other = provider({}, emu.addAccount('other'));
    const hidden = await failure(other.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: out.state, signal: new AbortController().signal }));
    expect(isProviderError(hidden, 'NotFound')).toBe(true);
    expect(String(hidden)).toContain('keep the Secret');
    expect(live()).toHaveLength(1);
  });
});

describe('LambdaProvider.release after a launch whose answer was lost', () => {
  const release = (p: LambdaProvider, state: string, extra: { acquireStarted?: boolean; lastLaunchBy?: number } = {}) =>
    p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state, signal: new AbortController().signal, ...extra });

  it('records the unanswered request, waits out the settle period past it, and terminates the instance that lands late', async () => {
    // The launch is answered only after 600 ms, and the acquire is withdrawn before that.
    emu.fault({ op: 'launch', mode: 'delay', ms: 600, times: 1 });
    const p = provider();
    const withdraw = new AbortController();
    const launching = p.launch({ ...req(), signal: withdraw.signal });
    await waitFor('a launch request', async () => emu.requests.some((r) => r.op === 'launch'), 5000, 10);
    withdraw.abort();
    const err = await failure(launching);
    const state = isProviderError(err) ? err.state ?? '' : '';
    const sentAt = parseLambdaState(state).unansweredLaunchAt!;
    expect(sentAt).toBeGreaterThan(0);
    expect(live()).toEqual([]);
    await release(p, state);
    // Released only after the settle period, and not before the late one was ended.
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(SETTLE);
    expect(emu.launches.map((l) => l.instanceIds.length)).toEqual([1]);
    expect(emu.instances().map((i) => i.status)).toEqual([expect.stringMatching(/^terminat/)]);
  });

  it('watches the name for the settle period when an acquire began but recorded nothing (the controller stopped mid-launch)', async () => {
    const p = provider();
    const t0 = Date.now();
    const releasing = release(p, '', { acquireStarted: true });
    // Someone's launch under the name lands while the release watches.
    const other = new LambdaClient({ endpoint: emu.url, apiKey: emu.apiKey });
    await other.addSshKey('someone', key.publicKey);
    await new Promise((r) => setTimeout(r, SETTLE / 3));
    await other.launch({ region: 'us-east-1', instanceType: 'gpu_1x_a10', sshKeyNames: ['someone'], name: 'leasehold-abcd1234' });
    await releasing;
    expect(Date.now() - t0).toBeGreaterThanOrEqual(SETTLE);
    expect(live().filter((i) => i.status !== 'terminating')).toEqual([]);
  });

  it('counts the settle period from the acquire\'s deadline once that has passed, so restarts after it do not extend it', async () => {
    const p = provider();
    const t0 = Date.now();
    // The acquire was cut off SETTLE ago: no launch of it can land any more.
    await release(p, '', { acquireStarted: true, lastLaunchBy: t0 - SETTLE });
    expect(Date.now() - t0).toBeLessThan(SETTLE);
  });

  it('does not wait when every launch request was answered, or no acquire began', async () => {
    const p = provider();
    const out = await p.launch(req());
    expect(parseLambdaState(out.state).unansweredLaunchAt).toBeUndefined();
    const t0 = Date.now();
    await release(p, out.state, { acquireStarted: true });
    await release(p, '', {});
    expect(Date.now() - t0).toBeLessThan(SETTLE);
  });

  it('sends a lost launch again only once it can no longer land, so it never makes two instances', async () => {
    // The client gives up after 2 s; Lambda makes the instance at 3 s, inside the settle period, so it is adopted.
    emu.fault({ op: 'launch', mode: 'delay', ms: 3000, times: 1 });
    const out = await provider({}, emu.apiKey, undefined, { launchSettleMs: 4000 }).launch(req());
    expect(emu.launches).toHaveLength(1);
    expect(live()).toHaveLength(1);
    expect(parseLambdaState(out.state)).toMatchObject({ instanceID: live()[0]!.id });
    expect(parseLambdaState(out.state).unansweredLaunchAt).toBeUndefined();
    expect(progress.some((l) => l.includes('watching for leasehold-abcd1234'))).toBe(true);
  });

  it('sends a lost launch again after the settle period, and then nothing is left in flight', async () => {
    emu.fault({ op: 'launch', mode: 'status', status: 502, times: 1 });
    const out = await provider().launch(req());
    expect(emu.launches).toHaveLength(2);
    expect(emu.launches[1]!.time - emu.launches[0]!.time).toBeGreaterThanOrEqual(SETTLE - 50);
    expect(parseLambdaState(out.state).unansweredLaunchAt).toBeUndefined();
  });
});

describe('LambdaProvider.release of an instance Lambda no longer lists', () => {
  it('counts one it asked to terminate as gone once GET /instances/{id} answers 404', async () => {
    emu.forgetTerminatedMs = 0;
    const p = provider();
    const out = await p.launch(req());
    const { account: _mine, ...unrecorded } = parseLambdaState(out.state);
    await p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: JSON.stringify(unrecorded), signal: new AbortController().signal });
    expect(emu.instances()[0]!.status).toBe('terminated');
    expect(emu.requests.some((r) => r.op === 'get-instance' && r.status === 404)).toBe(true);
  });

  it('counts one its own account launched as gone after a restart of the controller, but not one another key launched', async () => {
    const p = provider({}, emu.apiKey, undefined, { accountID: 'acct-one' });
    const out = await p.launch(req());
    expect(parseLambdaState(out.state).account).toBe('acct-one');
    await release(provider({}, emu.apiKey, undefined, { accountID: 'acct-one' }), out.state);
    emu.forgetTerminatedMs = 0;
    // A fresh provider (a restarted controller) has asked nothing itself.
    await release(provider({}, emu.apiKey, undefined, { accountID: 'acct-one' }), out.state);
    const other = provider({}, emu.addAccount('other'), undefined, { accountID: 'acct-two' });
    expect(String(await failure(release(other, out.state)))).toContain('keep the Secret');
  });

  function release(p: LambdaProvider, state: string) {
    return p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state, signal: new AbortController().signal });
  }
});

describe('LambdaProvider.list and get', () => {
  /** Launches straight through the API, as someone else's script or a crashed controller would. */
  async function launchRaw(name: string | undefined) {
    const client = new LambdaClient({ endpoint: emu.url, apiKey: emu.apiKey, timeoutMs: 2000 });
    if (!(await client.listSshKeys()).some((k) => k.name === 'someone')) await client.addSshKey('someone', key.publicKey);
    const [id] = await client.launch({ region: 'us-east-1', instanceType: 'gpu_1x_a10', sshKeyNames: ['someone'], name: name as string });
    return { client, id: id! };
  }

  it('lists the instances under the name prefix that are not terminated, each with its state', async () => {
    emu.launchIntervalMs = 0;
    const active = await launchRaw('leasehold-active');
    await emu.waitForStatus(active.id, 'active');
    const ending = await launchRaw('leasehold-ending');
    await emu.waitForStatus(ending.id, 'active');
    const gone = await launchRaw('leasehold-gone');
    await emu.waitForStatus(gone.id, 'active');
    await gone.client.terminate([gone.id]);
    await emu.waitForStatus(gone.id, 'terminated');
    emu.terminateMs = 60_000;
    await ending.client.terminate([ending.id]);
    emu.bootMs = 60_000;
    const booting = await launchRaw('leasehold-booting');
    await launchRaw('someone-else');
    await launchRaw(undefined);

    const listed = await provider().list();
    expect(listed.sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: 'leasehold-active', id: active.id, state: 'Running', providerStatus: 'active' },
      { name: 'leasehold-booting', id: booting.id, state: 'Pending', providerStatus: 'booting' },
      { name: 'leasehold-ending', id: ending.id, state: 'Terminating', providerStatus: 'terminating' },
    ]);
    const client = new LambdaClient({ endpoint: emu.url, apiKey: emu.apiKey, timeoutMs: 2000 });
    const other = new LambdaProvider({ client, pacer: new LaunchPacer({ intervalMs: 0 }), namePrefix: 'someone-' });
    expect((await other.list()).map((m) => m.name)).toEqual(['someone-else']);
  });

  it('gets the live instance of a name, and says NotFound for a terminated or unknown name', async () => {
    emu.launchIntervalMs = 0;
    const p = provider();
    const out = await p.launch(req('leasehold-abcd1234'));
    expect(await p.get('leasehold-abcd1234')).toEqual({ name: 'leasehold-abcd1234', id: parseLambdaState(out.state).instanceID, state: 'Running', providerStatus: 'active' });
    await p.release({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'lambda', state: out.state, signal: new AbortController().signal });
    const gone = await failure(p.get('leasehold-abcd1234'));
    expect(isProviderError(gone, 'NotFound')).toBe(true);
    expect(String(gone)).toContain('leasehold-abcd1234');
    expect(isProviderError(await failure(p.get('leasehold-never')), 'NotFound')).toBe(true);
  });

  it('counts an unhealthy instance, and one in a status it does not know, as Unhealthy', async () => {
    const instances = [
      { id: 'i-1', name: 'leasehold-sick', status: 'unhealthy' },
      { id: 'i-2', name: 'leasehold-odd', status: 'rebooting' },
    ];
    const fetchInstances = (async () => new Response(JSON.stringify({ data: instances }), { status: 200 })) as unknown as typeof fetch;
    const client = new LambdaClient({ endpoint: 'http://lambda.invalid', apiKey: 'k', fetch: fetchInstances });
    const p = new LambdaProvider({ client, pacer: new LaunchPacer({ intervalMs: 0 }) });
    expect((await p.list()).map((m) => [m.name, m.state, m.providerStatus])).toEqual([
      ['leasehold-sick', 'Unhealthy', 'unhealthy'],
      ['leasehold-odd', 'Unhealthy', 'rebooting'],
    ]);
  });

  it('passes a failed listing on as the client typed it', async () => {
    emu.fault({ op: 'list-instances', mode: 'status', status: 401, times: 1 });
    expect(isProviderError(await failure(provider().list()), 'Unauthorized')).toBe(true);
  });
});

describe('LambdaClient under Lambda\'s general limit of one request per second', () => {
  it('spaces an account\'s requests so that none is refused, and sends a refused one again after Retry-After', async () => {
    emu.requestsPerSecond = 1;
    const spaced = new LambdaClient({ endpoint: emu.url, apiKey: emu.apiKey, spacer: new RequestSpacer(1100) });
    await Promise.all([spaced.listInstances(), spaced.listInstanceTypes(), spaced.listSshKeys()]);
    expect(emu.requests.map((r) => r.status)).toEqual([200, 200, 200]);
    // Another client of the account that does not space its requests still gets its answers.
    const eager = new LambdaClient({ endpoint: emu.url, apiKey: emu.apiKey });
    const lists = await Promise.all([eager.listInstances(), eager.listInstances()]);
    expect(lists).toEqual([[], []]);
    expect(emu.requests.slice(3).map((r) => r.status)).toContain(429);
  });
});
