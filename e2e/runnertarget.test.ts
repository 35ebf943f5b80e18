// RunnerTarget checks for real: the controller process against the shared
// control plane, with the Compute Engine and GitHub emulators in this test
// process. Each test follows its own repository, so the jobs it queues are
// seen only by its own RunnerTarget.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startGceEmulator, type GceEmulator } from './fakes/gce/server.js';
import { startGitHubEmulator, type GitHubEmulator } from './fakes/github/server.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';

const kubectl = testKubectl();
let gce: GceEmulator;
let gh: GitHubEmulator;
let controller: ControllerProcess;
let ns: string;

const HOST_ACCOUNT = 'runner-host@leasehold-test.iam.gserviceaccount.com';

async function must(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

async function target(name: string, repo: string, over: Record<string, unknown> = {}): Promise<void> {
  const spec = {
    github: { org: gh.org, repositories: [`${gh.org}/${repo}`], tokenSecretRef: { name: 'gh-token' }, apiURL: gh.url },
    gce: {
      project: gce.project,
      zones: ['us-central1-a', 'us-central1-b'],
      machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }],
      serviceAccount: HOST_ACCOUNT,
      credentialsSecretRef: { name: 'gce-key' },
      endpoint: gce.url,
    },
    floor: 0,
    maxHosts: 2,
    dailyBudgetUSD: 10,
    // One check when created, none after within a test: each test looks at exactly one check.
    checkInterval: '1h',
    ...over,
  };
  await apply(kubectl, JSON.stringify({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'RunnerTarget', metadata: { name, namespace: ns }, spec }));
}

const get = (name: string) => getJSON(kubectl, ['runnertarget', name, '-n', ns]);
const condition = (t: any, type: string) => (t?.status?.conditions ?? []).find((c: any) => c.type === type);

async function events(name: string): Promise<any[]> {
  return (await getJSON(kubectl, ['events', '-n', ns, '--field-selector', `involvedObject.name=${name}`]))?.items ?? [];
}

beforeAll(async () => {
  gce = await startGceEmulator();
  gh = await startGitHubEmulator();
  ns = await freshNamespace(kubectl, 'runnertarget');
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gh-token', namespace: ns }, stringData: { token: gh.token } }));
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gce-key', namespace: ns }, stringData: { 'key.json': JSON.stringify(gce.serviceAccountKey) } }));
  controller = await startController(process.env.E2E_KUBECONFIG!, ['--no-leader-elect', '--namespace', ns, '--watch-namespace', ns]);
});

afterAll(async () => {
  await controller?.stop();
  await gce?.stop();
  await gh?.stop();
  if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
});

describe('RunnerTarget checks', () => {
  it('a dry run plans the launches the queue needs, writes the plan to status and an event, and changes nothing anywhere', async () => {
    gh.queueRun('dry', [{ labels: ['self-hosted', 'linux'] }, { labels: ['self-hosted', 'linux'] }]);
    await target('dry', 'dry', { dryRun: true });
    const t = await waitFor('the dry run plan in status', async () => {
      const got = await get('dry');
      return got?.status?.plan ? got : undefined;
    }, 60_000);
    expect(t.status.plan).toMatchObject({ dryRun: true, launch: 2, desired: 2 });
    expect(t.status.counts).toMatchObject({ queued: 2 });
    expect(t.status.receipts ?? []).toEqual([]);
    expect(condition(t, 'Ready')).toMatchObject({ status: 'True', reason: 'DryRun' });
    expect(condition(t, 'Held')).toBeUndefined();
    const planEvent = await waitFor('the DryRunPlan event', async () => (await events('dry')).find((e) => e.reason === 'DryRunPlan'));
    expect(planEvent.message).toContain('"launch":2');
    // Read-only everywhere: no insert or delete, no runner removed or JIT config made, no check lease taken.
    expect(gce.mutations).toHaveLength(0);
    expect(gh.mutations).toHaveLength(0);
    expect(gce.requests.filter((r) => r.op === 'list').length).toBeGreaterThanOrEqual(2);
    const leases = JSON.parse(await must(['get', 'leases.coordination.k8s.io', '-n', ns, '-o', 'json'])).items;
    expect(leases.filter((l: any) => l.metadata.name.startsWith('runnertarget-'))).toEqual([]);
  });

  it('a queued job launches a spot VM whose receipt is in status before the insert reaches Compute Engine', async () => {
    const inserts = gce.mutations.length;
    gh.queueRun('live', [{ labels: ['self-hosted', 'linux'] }]);
    // The insert is held at the emulator for a while: the receipt must already be in status when it arrives.
    gce.fault({ op: 'insert', mode: 'delay', ms: 3000, times: 1 });
    await target('live', 'live');
    await waitFor('the insert at Compute Engine', async () => gce.requests.some((r) => r.op === 'insert'), 60_000);
    const during = await get('live');
    const receipt = (during.status?.receipts ?? []).find((r: any) => r.action === 'Launch');
    expect(receipt).toMatchObject({ phase: 'Intended', zone: 'us-central1-a', machineType: 'e2-standard-4', provisioningModel: 'SPOT' });
    expect(receipt.requestId).toMatch(/^[0-9a-f-]{36}$/);
    const name = receipt.hosts[0];
    expect(gce.instances()).toEqual([]);
    expect(condition(during, 'Held')).toMatchObject({ status: 'True', reason: 'CheckRunning' });
    expect(during.status.hosts).toEqual([expect.objectContaining({ name, state: 'Launching', zone: 'us-central1-a' })]);

    const vm = await waitFor('the VM', async () => gce.instance('us-central1-a', name), 30_000);
    expect(vm.requestId).toBe(receipt.requestId);
    expect(vm.scheduling).toMatchObject({ provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE' });
    expect(vm.labels).toMatchObject({ 'leasehold-runnertarget': 'live', 'leasehold-runnertarget-uid': during.metadata.uid });
    expect(vm.labels['leasehold-installation']).toMatch(/^[a-z0-9]{4,16}$/);
    expect(vm.serviceAccounts).toEqual([{ email: HOST_ACCOUNT, scopes: ['https://www.googleapis.com/auth/logging.write', 'https://www.googleapis.com/auth/monitoring.write'] }]);
    expect(vm.metadata.find((m) => m.key === 'ssh-keys')?.value).toMatch(/^leasehold:ssh-ed25519 /);
    // The runner's config goes over SSH, never into metadata anyone with compute read access can see.
    expect(JSON.stringify(vm.metadata)).not.toMatch(/jit/i);

    const after = await waitFor('the check to end', async () => {
      const got = await get('live');
      return condition(got, 'Ready')?.status === 'True' ? got : undefined;
    }, 30_000);
    expect(condition(after, 'Durable')).toMatchObject({ status: 'True' });
    expect(condition(after, 'Held')).toMatchObject({ status: 'False', reason: 'CheckEnded' });
    // The launch stays Intended until its runner registers; the next check continues it from there.
    expect(after.status.receipts).toEqual([expect.objectContaining({ id: receipt.id, phase: 'Intended' })]);
    expect(gce.mutations.length - inserts).toBe(1);
    expect((await events('live')).map((e) => e.reason)).toContain('Launched');
  });

  it('a receipt write that conflicts stops the check before any provider change: Durable=False, no insert', async () => {
    const gceBefore = gce.mutations.length;
    const ghBefore = gh.mutations.length;
    gh.queueRun('conflict', [{ labels: ['self-hosted', 'linux'] }]);
    // The check's look at the jobs is held at GitHub; meanwhile another writer moves the RunnerTarget.
    gh.fault({ op: 'list-jobs', mode: 'delay', ms: 3000, times: 1 });
    await target('conflict', 'conflict');
    await waitFor('the check reading the jobs', async () => gh.requests.some((r) => r.op === 'list-jobs' && r.path.includes('/conflict/')), 60_000);
    await must(['annotate', 'runnertarget', 'conflict', '-n', ns, 'example.com/touched=yes']);
    const t = await waitFor('Durable=False', async () => {
      const got = await get('conflict');
      return condition(got, 'Durable')?.status === 'False' ? got : undefined;
    }, 60_000);
    expect(condition(t, 'Durable')).toMatchObject({ reason: 'StatusConflict' });
    expect(condition(t, 'Durable').message).toMatch(/do not edit status/);
    expect(condition(t, 'Ready')).toMatchObject({ status: 'False', reason: 'NotDurable' });
    expect(t.status.receipts ?? []).toEqual([]);
    expect(gce.mutations.length).toBe(gceBefore);
    expect(gh.mutations.length).toBe(ghBefore);
    expect((await events('conflict')).map((e) => e.reason)).toContain('StatusConflict');
  });

  it('a check lease held by another replica: the check changes nothing and says so; once it is let go, the next check acts', async () => {
    const gceBefore = gce.mutations.length;
    gh.queueRun('held', [{ labels: ['self-hosted', 'linux'] }]);
    // A dry run first, to learn the UID the check lease is named after before any live check.
    await target('held', 'held', { dryRun: true });
    const dry = await waitFor('the dry run', async () => (await get('held'))?.status?.plan);
    expect(dry.dryRun).toBe(true);
    const uid = (await get('held')).metadata.uid;
    const now = new Date().toISOString().replace('Z', '000Z');
    await apply(kubectl, JSON.stringify({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: `runnertarget-${uid}`, namespace: ns },
      spec: { holderIdentity: 'other-replica', leaseDurationSeconds: 3600, acquireTime: now, renewTime: now },
    }));
    await must(['patch', 'runnertarget', 'held', '-n', ns, '--type=merge', '-p', '{"spec":{"dryRun":false}}']);
    const patched = await get('held');
    const held = await waitFor('the HeldElsewhere event', async () => (await events('held')).find((e) => e.reason === 'HeldElsewhere'), 60_000);
    expect(held.message).toContain('other-replica');
    // Any status write would move the object under the holder, whose next receipt write would then conflict.
    const after = await get('held');
    expect(after.metadata.resourceVersion).toBe(patched.metadata.resourceVersion);
    expect(after.status.receipts ?? []).toEqual([]);
    expect(gce.mutations.length).toBe(gceBefore);

    // The other replica lets go: the next attempt takes the lease and launches.
    await must(['patch', 'leases.coordination.k8s.io', `runnertarget-${uid}`, '-n', ns, '--type=merge', '-p', '{"spec":{"holderIdentity":""}}']);
    await waitFor('the launch after the lease was let go', async () => gce.mutations.length > gceBefore, 120_000, 500);
    const lease = JSON.parse(await must(['get', 'leases.coordination.k8s.io', `runnertarget-${uid}`, '-n', ns, '-o', 'json']));
    expect(lease.spec.leaseTransitions).toBeGreaterThanOrEqual(1);
    const launched = await get('held');
    expect((launched.status.receipts ?? []).map((r: any) => r.action)).toEqual(['Launch']);
  });
});
