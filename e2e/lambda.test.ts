// Lambda Offers end to end: the real controller against the real control
// plane and the Lambda API emulator (e2e/fakes/lambda), whose instances are
// real sshd machines that take their host key from the launch's cloud-init.
// Each test uses its own Lambda account (and so its own launch queue).
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLambdaEmulator, type CatalogEntry, type LambdaEmulator } from './fakes/lambda/server.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';

const kubectl = testKubectl();
let ns: string;
let emu: LambdaEmulator;
let ctl: ControllerProcess;
const suffix = Date.now().toString(36);
const offers: string[] = [];
const keyDir = mkdtempSync(join(tmpdir(), 'leasehold-lambda-device-'));
execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'device', '-f', join(keyDir, 'id')]);
const deviceKey = readFileSync(join(keyDir, 'id.pub'), 'utf8').trim();

// The emulator's machines are this host, so the types launched here claim
// what this host has (no GPU, at least one CPU); the facts check holds them to it.
const small = (name: string, cents: number, regions: string[] | Record<string, number>, extra: Partial<CatalogEntry> = {}): CatalogEntry => ({
  name,
  description: `${name.replace(/_/g, ' ')}`,
  gpu_description: '',
  price_cents_per_hour: cents,
  specs: { vcpus: Math.min(1, cpus().length), memory_gib: 1, storage_gib: 10, gpus: 0 },
  regions,
  ...extra,
});
const h100x8: CatalogEntry = {
  name: 'gpu_8x_h100_sxm5',
  description: '8x H100 (80 GB SXM5)',
  gpu_description: 'H100 (80 GB SXM5)',
  price_cents_per_hour: 2392,
  specs: { vcpus: 208, memory_gib: 1800, storage_gib: 22000, gpus: 8 },
  regions: ['us-east-1'],
};

/** A fresh account with its key in a Secret, and an Offer on it. */
async function lambdaOffer(name: string, lambda: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<{ offer: string; apiKey: string; secret: string }> {
  const apiKey = emu.addAccount(name);
  const secret = `lambda-${name}`;
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: secret, namespace: ns }, stringData: { apiKey } }));
  const offer = `${name}-${suffix}`;
  offers.push(offer);
  await apply(kubectl, JSON.stringify({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Offer',
    metadata: { name: offer },
    spec: {
      lambda: { apiKeySecretRef: { name: secret, namespace: ns }, endpoint: emu.url, login: emu.sshUser, sshPort: emu.sshPort, ...lambda },
      idleTimeout: '10m',
      maxLifetime: '1h',
      ...extra,
    },
  }));
  return { offer, apiKey, secret };
}

async function lease(name: string, where: string, offer?: string): Promise<void> {
  await apply(kubectl, JSON.stringify({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: { name, namespace: ns },
    spec: { where, ...(offer ? { offer } : {}), sshKeys: [deviceKey] },
  }));
}

const status = async (name: string) => (await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', name]))?.status;
const waitPhase = (name: string, phase: string, ms = 60_000) =>
  waitFor(`${name} ${phase}`, async () => {
    const s = await status(name);
    // A machine nobody uses goes Idle at its first check: Ready and Idle both hold condition Ready.
    if (s?.phase === phase || (phase === 'Ready' && s?.phase === 'Idle')) return s;
    if (s?.phase === 'Failed' && phase !== 'Failed') throw new Error(`${name} failed: ${s.reason}: ${s.message}`);
    // Thrown so that a timeout says where the Lease was.
    throw new Error(`${name} is ${s?.phase ?? 'missing'}: ${s?.reason ?? ''}: ${s?.message ?? ''}`);
  }, ms, 250);
const offerStatus = async (name: string) => (await getJSON(kubectl, ['offers.leasehold.dev', name]))?.status;
const listed = (name: string) =>
  waitFor(`${name} listed`, async () => {
    const s = await offerStatus(name);
    return s?.conditions?.find((c: any) => c.type === 'Ready')?.status === 'True' ? s : undefined;
  }, 30_000);
const gone = (name: string) => waitFor(`${name} gone`, async () => !(await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', name])), 60_000);
const events = async (field: string) => {
  const r = await kubectl(['get', 'events', '-A', '--field-selector', field, '-o', 'json']);
  return (JSON.parse(r.stdout).items as any[]).map((e) => `${e.reason}: ${e.message}`);
};
const live = (apiKey: string) => emu.instances(apiKey).filter((i) => i.status !== 'terminated');
/** A POST straight to the API as someone else would send it, waiting out the general request limit the controller shares. */
async function direct(apiKey: string, path: string, body: unknown): Promise<Response> {
  for (;;) {
    const res = await fetch(`${emu.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (res.status !== 429) return res;
    await new Promise((r) => setTimeout(r, Number(res.headers.get('retry-after') ?? 1) * 1000));
  }
}

beforeAll(async () => {
  ns = await freshNamespace(kubectl, 'lambda');
  emu = await startLambdaEmulator({ bootMs: 300, terminateMs: 300, catalog: [] });
  ctl = await startController(process.env.E2E_KUBECONFIG!, [
    '--watch-namespace', ns, '--leader-election-namespace', ns, '--namespace', ns,
    '--max-leases', '10', '--concurrency', '10', '--check-interval', '2s', '--acquire-timeout', '3m',
    '--lambda-list-interval', '3s', '--lambda-poll-interval', '250ms', '--orphans', 'terminate', '--orphan-grace', '2s',
    '--lambda-launch-settle', '20s',
  ]);
});

afterAll(async () => {
  await kubectl(['delete', 'leases.leasehold.dev', '--all', '-n', ns, '--wait=false']);
  await waitFor('leases released', async () => ((await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev']))?.items ?? []).length === 0, 60_000).catch(() => undefined);
  await ctl?.stop();
  for (const o of offers) await kubectl(['delete', 'offers.leasehold.dev', o, '--ignore-not-found', '--wait=false']);
  await emu?.stop();
});

describe('Lambda offers against the API emulator', () => {
  it('rents the cheapest type with capacity in the first wanted region, pins the cloud-init host key, and terminates on delete', async () => {
    emu.setCatalog([
      small('cpu_1x_cheapest', 20, ['us-west-2']), // capacity only in a region nobody wants
      small('cpu_1x_mid', 40, ['us-west-1', 'us-east-1']),
      small('cpu_1x_dear', 90, ['us-east-1']),
      h100x8,
    ]);
    const { offer, apiKey } = await lambdaOffer('cheap', { regions: ['us-east-1', 'us-west-1'] });
    const os = await listed(offer);
    const names = os.candidates.map((c: any) => `${c.name}:${c.available}`);
    expect(names).toEqual(['cpu-1x-cheapest:false', 'cpu-1x-mid:true', 'cpu-1x-dear:true', 'gpu-8x-h100-sxm5:false']);
    expect(os.candidates[3].reason).toContain('above the cap of $10.00/h');

    const t0 = Date.now();
    await lease('cheapest', 'cpus>=1', offer);
    const st = await waitPhase('cheapest', 'Ready');
    const toReady = Date.now() - t0;
    expect(st).toMatchObject({ instanceType: 'cpu_1x_mid', region: 'us-east-1', pricePerHour: 0.4, offer });
    const [inst] = live(apiKey);
    expect(inst).toMatchObject({ name: st.machineName, status: 'active' });
    expect(inst!.region.name).toBe('us-east-1');
    // The host key the Lease pins is the one handed to the instance in user_data.
    expect(inst!.userData).toContain('ed25519_private');
    expect(st.machine.ssh.hostKey.split(' ').slice(0, 2)).toEqual(inst!.hostKey.split(' ').slice(0, 2));
    expect(st.machine.ssh).toMatchObject({ host: inst!.ip, port: emu.sshPort, user: emu.sshUser });

    const known = join(keyDir, 'known_hosts');
    writeFileSync(known, `[${st.machine.ssh.host}]:${st.machine.ssh.port} ${st.machine.ssh.hostKey}\n`);
    const out = execFileSync('ssh', ['-i', join(keyDir, 'id'), '-o', `UserKnownHostsFile=${known}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes',
      '-p', String(st.machine.ssh.port), `${st.machine.ssh.user}@${st.machine.ssh.host}`, 'echo via-lambda'], { timeout: 20_000 }).toString();
    expect(out.trim()).toBe('via-lambda');

    const shown = await events(`involvedObject.name=cheapest,involvedObject.namespace=${ns}`);
    expect(shown.some((e) => e.includes('$0.40/h'))).toBe(true);
    // eslint-disable-next-line no-console
    console.log(`Lambda emulator: kubectl apply -> Ready in ${toReady} ms`);

    await kubectl(['delete', 'leases.leasehold.dev', 'cheapest', '-n', ns, '--wait=false']);
    await gone('cheapest');
    expect(live(apiKey)).toEqual([]);
    expect(emu.instances(apiKey)[0]!.status).toBe('terminated');
  });

  it('refuses a Lease only a type above the cap could serve, naming the price and the setting, and launches nothing', async () => {
    emu.setCatalog([small('cpu_1x_mid', 40, ['us-east-1']), h100x8]);
    const { offer, apiKey } = await lambdaOffer('capped');
    await listed(offer);
    await lease('eight-gpus', 'gpus>=8', offer);
    const st = await waitFor('eight-gpus waiting', async () => {
      const s = await status('eight-gpus');
      return s?.reason === 'OverPriceCap' ? s : undefined;
    });
    expect(st.phase).toBe('Pending');
    expect(st.message).toContain('$23.92/h');
    expect(st.message).toContain('spec.lambda.maxPricePerHour');
    expect(emu.launches.filter((l) => l.account === emu.accounts.find((a) => a.apiKey === apiKey)?.id)).toEqual([]);
    await kubectl(['delete', 'leases.leasehold.dev', 'eight-gpus', '-n', ns, '--wait=false']);
    await gone('eight-gpus');
  });

  it('waits OverPriceCap, launching nothing, when the cheap type sells out between listing and launch and only a dear one has capacity', async () => {
    emu.setCatalog([small('cpu_1x_cheap', 30, ['us-east-1']), small('cpu_1x_pricey', 1500, ['us-east-1'])]);
    // The capacity goes away right after a listing, so the Lease chooses
    // from a listing that still shows it (the next one is 3 s away).
    const { offer, apiKey } = await lambdaOffer('soldout');
    const first = (await listed(offer)).lastListTime;
    await waitFor('a fresh listing', async () => (await offerStatus(offer))?.lastListTime !== first, 10_000, 50);
    emu.setCapacity('cpu_1x_cheap', []);
    await lease('sold-out', 'cpus>=1', offer);
    const st = await waitFor('sold-out back to Pending', async () => {
      const s = await status('sold-out');
      if (s?.phase === 'Failed') throw new Error(`sold-out failed: ${s.reason}: ${s.message}`);
      return s?.phase === 'Pending' && s.reason === 'OverPriceCap' && s.launch ? s : undefined;
    }, 30_000);
    expect(st.message).toMatch(/cpu[-_]1x[-_]pricey/);
    expect(st.message).toContain('$15.00/h');
    expect(st.message).toContain('spec.lambda.maxPricePerHour');
    expect(st.providerState).toBeUndefined();
    const account = emu.accounts.find((a) => a.apiKey === apiKey)!.id;
    expect(emu.launches.filter((l) => l.account === account)).toEqual([]);
    expect(live(apiKey)).toEqual([]);
    await kubectl(['delete', 'leases.leasehold.dev', 'sold-out', '-n', ns, '--wait=false']);
    await gone('sold-out');
  });

  it('waits OverPriceCap, renting nothing dearer, when the launch itself is answered no capacity and only a dear type could serve', async () => {
    emu.setCatalog([small('cpu_1x_tight', 30, ['us-east-1']), small('cpu_1x_spare', 1500, ['us-east-1'])]);
    const { offer, apiKey } = await lambdaOffer('refused', { regions: ['us-east-1'] });
    await listed(offer);
    // The listing keeps showing capacity for the cheap type: only its launch says otherwise.
    emu.fault({ op: 'launch', mode: 'status', status: 400, code: 'instance-operations/launch/insufficient-capacity', apiKey, times: 10 });
    await lease('refused', 'cpus>=1', offer);
    const st = await waitFor('refused back to Pending', async () => {
      const s = await status('refused');
      if (s?.phase === 'Failed') throw new Error(`refused failed: ${s.reason}: ${s.message}`);
      return s?.phase === 'Pending' && s.reason === 'OverPriceCap' && s.launch ? s : undefined;
    }, 60_000);
    expect(st.message).toContain('no capacity for cpu_1x_tight in us-east-1');
    expect(st.message).toContain('cpu_1x_spare has capacity but is listed at $15.00/h');
    expect(st.message).toContain('spec.lambda.maxPricePerHour');
    expect(st.providerState).toBeUndefined();
    const account = emu.accounts.find((a) => a.apiKey === apiKey)!.id;
    expect(emu.requests.filter((r) => r.account === account && r.path.endsWith('/instance-operations/launch')).length).toBeGreaterThanOrEqual(1);
    expect(live(apiKey)).toEqual([]);
    await kubectl(['delete', 'leases.leasehold.dev', 'refused', '-n', ns, '--wait=false']);
    await gone('refused');
  });

  it('fails at once, launching nothing, when no wanted region has capacity', async () => {
    emu.setCatalog([small('cpu_1x_mid', 40, ['us-west-2'])]);
    const { offer, apiKey } = await lambdaOffer('nocap', { regions: ['us-east-1'] });
    await listed(offer);
    const t0 = Date.now();
    await lease('no-capacity', 'cpus>=1', offer);
    const st = await waitPhase('no-capacity', 'Failed', 20_000);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(st.reason).toBe('NoCapacity');
    expect(st.message).toContain('no capacity in us-east-1');
    expect(emu.instances(apiKey)).toEqual([]);
  });

  it('spaces 5 launches together at least 12 s apart with no 429', async () => {
    emu.setCatalog([small('cpu_1x_mid', 40, ['us-east-1'])]);
    const { offer, apiKey } = await lambdaOffer('paced');
    await listed(offer);
    const names = ['p1', 'p2', 'p3', 'p4', 'p5'];
    const t0 = Date.now();
    await Promise.all(names.map((n) => lease(n, 'cpus>=1', offer)));
    for (const n of names) await waitPhase(n, 'Ready', 150_000);
    const total = Date.now() - t0;
    const account = emu.accounts.find((a) => a.apiKey === apiKey)!.id;
    // The general one-request-per-second limit may refuse a request on a busy machine (and the
    // controller sends it again); the launch limit itself never refuses one.
    const mine = emu.launches.filter((l) => l.account === account && l.outcome !== 'request-limited');
    expect(mine.map((l) => l.outcome)).toEqual(['launched', 'launched', 'launched', 'launched', 'launched']);
    const gaps = mine.slice(1).map((l, i) => l.time - mine[i]!.time);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(12_000);
    expect(live(apiKey)).toHaveLength(5);
    // eslint-disable-next-line no-console
    console.log(`Lambda pacing: 5 launches, gaps ${gaps.map((g) => (g / 1000).toFixed(2)).join(', ')} s; all Ready in ${(total / 1000).toFixed(1)} s (floor 4 x 12 s = 48 s)`);
    await kubectl(['delete', 'leases.leasehold.dev', ...names, '-n', ns, '--wait=false']);
    for (const n of names) await gone(n);
    expect(live(apiKey)).toEqual([]);
  }, 240_000);

  it('sends a lost launch once more, and adopts the instance by name when that answer is lost too', async () => {
    emu.setCatalog([small('cpu_1x_mid', 40, ['us-east-1'])]);
    const { offer, apiKey } = await lambdaOffer('lost');
    await listed(offer);
    // First answer lost before the work (a gateway 502), second lost after it (socket dropped).
    emu.fault({ op: 'launch', mode: 'status', status: 502, times: 1, apiKey });
    emu.fault({ op: 'launch', mode: 'drop', times: 1, apiKey });
    await lease('lost-twice', 'cpus>=1', offer);
    const st = await waitPhase('lost-twice', 'Ready', 90_000);
    const account = emu.accounts.find((a) => a.apiKey === apiKey)!.id;
    const mine = emu.launches.filter((l) => l.account === account);
    expect(mine).toHaveLength(2);
    expect(live(apiKey).map((i) => i.name)).toEqual([st.machineName]);
    const shown = await events(`involvedObject.name=lost-twice,involvedObject.namespace=${ns}`);
    expect(shown.some((e) => e.includes('adopted instance'))).toBe(true);
    await kubectl(['delete', 'leases.leasehold.dev', 'lost-twice', '-n', ns, '--wait=false']);
    await gone('lost-twice');
    expect(live(apiKey)).toEqual([]);
  }, 120_000);

  it('releases a Lease withdrawn while its launch was unanswered only after terminating the instance that landed late', async () => {
    emu.setCatalog([small('cpu_1x_mid', 40, ['us-east-1'])]);
    const { offer, apiKey } = await lambdaOffer('late');
    await listed(offer);
    const account = emu.accounts.find((a) => a.apiKey === apiKey)!.id;
    // Lambda takes 8 s over this launch; the Lease is deleted meanwhile.
    emu.fault({ op: 'launch', mode: 'delay', ms: 8000, times: 1, apiKey });
    await lease('late', 'cpus>=1', offer);
    await waitFor('the launch request sent', async () => emu.requests.some((r) => r.account === account && r.op === 'launch' && r.fault === 'delay'), 60_000, 50);
    await kubectl(['delete', 'leases.leasehold.dev', 'late', '-n', ns, '--wait=false']);
    await gone('late');
    // By the time the Lease is gone the late instance has landed and is being ended.
    const landed = emu.instances(apiKey);
    expect(landed.map((i) => i.name)).toEqual([expect.stringMatching(/^leasehold-[a-z0-9]+-[0-9a-f]{8}$/)]);
    expect(landed[0]!.status).toMatch(/^terminat/);
    await waitFor('late instance terminated', async () => live(apiKey).length === 0, 30_000);
  }, 120_000);

  it('retries a failed termination until Lambda lists the instance as terminated', async () => {
    emu.setCatalog([small('cpu_1x_mid', 40, ['us-east-1'])]);
    const { offer, apiKey } = await lambdaOffer('stubborn');
    await listed(offer);
    await lease('stubborn', 'cpus>=1', offer);
    await waitPhase('stubborn', 'Ready');
    emu.fault({ op: 'terminate', mode: 'status', status: 500, times: 2, apiKey });
    await kubectl(['delete', 'leases.leasehold.dev', 'stubborn', '-n', ns, '--wait=false']);
    const seen = await waitFor('release retried', async () => {
      const s = await status('stubborn');
      return s && s.releaseAttempts >= 2 && s.lastReleaseError ? s : undefined;
    }, 30_000);
    expect(seen.lastReleaseError).toContain('500');
    await gone('stubborn');
    expect(live(apiKey)).toEqual([]);
    const account = emu.accounts.find((a) => a.apiKey === apiKey)!.id;
    // Leaving out any refusal by the general request limit, which the controller waits out.
    const terminates = emu.requests.filter((r) => r.account === account && r.op === 'terminate' && r.status !== 429);
    expect(terminates.map((r) => r.status)).toEqual([500, 500, 200]);
  });

  it('terminates an orphan instance named under this installation that no Lease owns, with a warning event', async () => {
    emu.setCatalog([small('cpu_1x_mid', 40, ['us-east-1'])]);
    const { offer, apiKey } = await lambdaOffer('orphans');
    await listed(offer);
    // An instance left by someone else's crash: created straight through the API.
    const post = (path: string, body: unknown) => direct(apiKey, path, body);
    expect((await post('/ssh-keys', { name: 'someone', public_key: deviceKey })).ok).toBe(true);
    const installation = Buffer.from((await getJSON(kubectl, ['-n', ns, 'secret', 'leasehold-installation'])).data.id, 'base64').toString();
    const orphan = `leasehold-${installation}-deadbeef`;
    const res = await post('/instance-operations/launch', { region_name: 'us-east-1', instance_type_name: 'cpu_1x_mid', ssh_key_names: ['someone'], name: orphan });
    expect(res.status).toBe(200);
    await waitFor('orphan terminated', async () => emu.instances(apiKey).every((i) => i.status === 'terminated' || i.status === 'terminating'), 40_000);
    const shown = await events(`involvedObject.name=${offer}`);
    expect(shown.some((e) => e.startsWith('OrphanInstance:') && e.includes(orphan))).toBe(true);
  });

  it('says which Secret is missing in the Offer Ready condition, and never shows an API key anywhere', async () => {
    const offer = `nosecret-${suffix}`;
    offers.push(offer);
    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Offer',
      metadata: { name: offer },
      spec: { lambda: { apiKeySecretRef: { name: 'does-not-exist', namespace: ns }, endpoint: emu.url } },
    }));
    const ready = await waitFor('Ready=False', async () => {
      const s = await offerStatus(offer);
      return s?.conditions?.find((c: any) => c.type === 'Ready' && c.status === 'False' && c.reason === 'APIKeySecretNotFound');
    });
    expect(ready.message).toContain(`Secret ${ns}/does-not-exist`);

    // Every key this file made, against the log, the events, every status and the metrics page.
    const keys = emu.accounts.map((a) => a.apiKey);
    const haystack = [
      readFileSync(ctl.logFile, 'utf8'),
      (await kubectl(['get', 'events', '-A', '-o', 'json'])).stdout,
      (await kubectl(['get', 'leases.leasehold.dev', '-A', '-o', 'json'])).stdout,
      (await kubectl(['get', 'offers.leasehold.dev', '-o', 'json'])).stdout,
      await (await fetch(ctl.metricsURL)).text(),
    ].join('\n');
    for (const k of keys) expect(haystack.includes(k)).toBe(false);
  });
});
