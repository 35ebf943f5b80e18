// Two installations on one Lambda account: each controller names its
// instances after its own installation ID and sweeps only those, so neither
// terminates the other's, even with --orphans=terminate and a short grace.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { cpus } from 'node:os';
import { startLambdaEmulator, type LambdaEmulator } from './fakes/lambda/server.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';
import { leaseManifest } from './support/builders.js';

const kubectl = testKubectl();
const offer = `shared-${Date.now().toString(36)}`;
let emu: LambdaEmulator;
let apiKey: string;
const installs: { ns: string; ctl: ControllerProcess; id: string }[] = [];

const installationID = async (ns: string): Promise<string> =>
  Buffer.from((await getJSON(kubectl, ['-n', ns, 'secret', 'leasehold-installation'])).data.id, 'base64').toString();

beforeAll(async () => {
  // Each controller keeps to one request per second on the account; two
  // sharing it need the account's limit twice over, as they would on Lambda.
  emu = await startLambdaEmulator({ bootMs: 300, terminateMs: 300, launchIntervalMs: 0, requestsPerSecond: 2, catalog: [] });
  emu.setCatalog([
    {
      name: 'cpu_1x_mid',
      description: 'cpu 1x mid',
      gpu_description: '',
      price_cents_per_hour: 40,
      specs: { vcpus: Math.min(1, cpus().length), memory_gib: 1, storage_gib: 10, gpus: 0 },
      regions: ['us-east-1'],
    },
  ]);
  apiKey = emu.addAccount('shared');
  for (const name of ['staging', 'prod']) {
    const ns = await freshNamespace(kubectl, name);
    await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'lambda', namespace: ns }, stringData: { apiKey } }));
    // Each installation watches its own namespace and keeps its identity there.
    const ctl = await startController(process.env.E2E_KUBECONFIG!, [
      '--watch-namespace', ns, '--leader-election-namespace', ns, '--namespace', ns,
      '--check-interval', '2s', '--acquire-timeout', '3m',
      '--lambda-list-interval', '1s', '--lambda-poll-interval', '250ms', '--orphans', 'terminate', '--orphan-grace', '1s',
    ]);
    installs.push({ ns, ctl, id: await waitFor(`${name} installation ID`, () => installationID(ns).catch(() => undefined)) });
  }
  await apply(kubectl, JSON.stringify({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Offer',
    metadata: { name: offer },
    spec: {
      lambda: { apiKeySecretRef: { name: 'lambda', namespace: installs[0]!.ns }, endpoint: emu.url, login: emu.sshUser, sshPort: emu.sshPort },
      idleTimeout: '10m',
      maxLifetime: '1h',
    },
  }));
});

afterAll(async () => {
  for (const { ns } of installs) await kubectl(['delete', 'leases.leasehold.dev', '--all', '-n', ns, '--wait=false']);
  for (const { ns } of installs) {
    await waitFor(`leases in ${ns} released`, async () => ((await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev']))?.items ?? []).length === 0, 60_000).catch(() => undefined);
  }
  for (const { ctl } of installs) await ctl.stop();
  await kubectl(['delete', 'offers.leasehold.dev', offer, '--ignore-not-found', '--wait=false']);
  await emu?.stop();
});

describe('two installations sharing one Lambda account', () => {
  it('name instances after their own installation and never terminate each other\'s', async () => {
    const [staging, prod] = installs;
    expect(staging!.id).not.toBe(prod!.id);
    for (const { ns } of installs) {
      await apply(kubectl, leaseManifest('box', ns, { where: 'cpus>=1', offer }));
    }
    const ready = async (ns: string) =>
      waitFor(`${ns}/box Ready`, async () => {
        const s = (await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', 'box']))?.status;
        if (s?.phase === 'Failed') throw new Error(`${ns}/box failed: ${s.reason}: ${s.message}`);
        return s?.phase === 'Ready' || s?.phase === 'Idle' ? s : undefined;
      }, 120_000, 250);
    const names = [(await ready(staging!.ns)).machineName, (await ready(prod!.ns)).machineName];
    expect(names[0]).toMatch(new RegExp(`^leasehold-${staging!.id}-[0-9a-f]{8}$`));
    expect(names[1]).toMatch(new RegExp(`^leasehold-${prod!.id}-[0-9a-f]{8}$`));

    // An orphan of each installation, and one named before installation IDs:
    // each controller terminates its own orphan, which proves its sweep has
    // run past the grace period over everything the account lists.
    const key = emu.accounts.find((a) => a.apiKey === apiKey)!;
    // Straight through the API, waiting out the general request limit both controllers share.
    const send = async (method: string, path: string, body?: unknown): Promise<Response> => {
      for (;;) {
        const res = await fetch(`${emu.url}${path}`, { method, headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
        if (res.status !== 429) return res;
        await new Promise((r) => setTimeout(r, 1000));
      }
    };
    const post = (path: string, body: unknown) => send('POST', path, body);
    const [sshKey] = ((await (await send('GET', '/ssh-keys')).json()) as { data: { name: string }[] }).data;
    expect(sshKey).toBeDefined();
    const orphans = [`leasehold-${staging!.id}-0rphan01`, `leasehold-${prod!.id}-0rphan02`, 'leasehold-0ld0ld01'];
    for (const name of orphans) {
      const res = await post('/instance-operations/launch', { region_name: 'us-east-1', instance_type_name: 'cpu_1x_mid', ssh_key_names: [sshKey!.name], name });
      expect(res.status).toBe(200);
    }
    const byName = (name: string) => emu.instances(key.id).find((i) => i.name === name);
    await waitFor('both installations terminated their own orphan', async () =>
      [orphans[0]!, orphans[1]!].every((n) => ['terminating', 'terminated'].includes(byName(n)?.status ?? '')), 60_000, 250);
    // A sweep or two more, all past the grace period.
    const sweepsNow = await Promise.all(installs.map(({ ctl }) => ctl.metric('leasehold_provider_requests_total', { provider: 'lambda', operation: 'list-instances' })));
    await waitFor('two more sweeps by each', async () => {
      const later = await Promise.all(installs.map(({ ctl }) => ctl.metric('leasehold_provider_requests_total', { provider: 'lambda', operation: 'list-instances' })));
      return later.every((n, i) => n >= sweepsNow[i]! + 2);
    }, 30_000, 250);
    expect(names.map((n) => byName(n)?.status)).toEqual(['active', 'active']);
    expect(byName('leasehold-0ld0ld01')?.status).toBe('active');
    for (const { ns } of installs) expect((await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', 'box']))?.status?.phase).toMatch(/^(Ready|Idle)$/);
    // Each orphan event names only that installation's orphan.
    const events = JSON.parse((await kubectl(['get', 'events', '-A', '--field-selector', `involvedObject.name=${offer}`, '-o', 'json'])).stdout).items.map((e: any) => e.message as string);
    expect(events.filter((m: string) => m.includes(names[0]) || m.includes(names[1]) || m.includes('leasehold-0ld0ld01'))).toEqual([]);
  }, 240_000);
});
