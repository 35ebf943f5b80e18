// RunnerTarget checks for real: the controller process against the shared
// control plane, with the Compute Engine and GitHub emulators in this test
// process (support/runnertarget.ts). Each test follows its own repository,
// so the jobs it queues are seen only by its own RunnerTarget.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { JIT_CONFIG_PATH } from '../controllers/runnertarget/checkrun/deliver.js';
import { apply, waitFor } from './support/kube.js';
import { condition, HOST_ACCOUNT, startRunnerTargetPool, TEST_TIMES, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;
const target = (name: string, repo: string, over?: Record<string, unknown>) => pool.target(name, repo, over);
const get = (name: string) => pool.get(name);
const events = (name: string) => pool.events(name);
const must = (args: string[]) => pool.must(args);
const vmsOf = (name: string) => pool.vmsOf(name);
const runnersOf = (name: string) => pool.runnersOf(name);

beforeAll(async () => {
  pool = await startRunnerTargetPool('runnertarget', { impostors: ['impostor'] });
});

afterAll(async () => {
  await pool?.stop();
});

// A finished test's pool is checked no more, so that its SSH looks do not slow the tests after it.
afterEach(() => pool.quiet());

describe('RunnerTarget checks', () => {
  it('a dry run plans the launches the queue needs, writes the plan to status and an event, and changes nothing anywhere', async () => {
    pool.gh.queueRun('dry', [{ labels: ['self-hosted', 'linux'] }, { labels: ['self-hosted', 'linux'] }]);
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
    expect(pool.gce.mutations).toHaveLength(0);
    expect(pool.gh.mutations).toHaveLength(0);
    // Each check reads every zone with one aggregatedList, never a list per zone.
    expect(pool.gce.requests.filter((r) => r.op === 'aggregated-list').length).toBeGreaterThanOrEqual(1);
    expect(pool.gce.requests.filter((r) => r.op === 'list')).toEqual([]);
    const leases = JSON.parse(await must(['get', 'leases.coordination.k8s.io', '-n', pool.ns, '-o', 'json'])).items;
    expect(leases.filter((l: any) => l.metadata.name.startsWith('runnertarget-'))).toEqual([]);
  });

  it('a queued job launches a spot VM whose receipt is in status before the insert reaches Compute Engine', async () => {
    pool.gh.queueRun('live', [{ labels: ['self-hosted', 'linux'] }]);
    // The insert is held at the emulator for a while: the receipt must already be in status when it arrives.
    pool.gce.fault({ op: 'insert', mode: 'delay', ms: 3000, times: 1 });
    await target('live', 'live');
    await waitFor('the insert at Compute Engine', async () => pool.gce.requests.some((r) => r.op === 'insert'), 60_000);
    const during = await get('live');
    const receipt = (during.status?.receipts ?? []).find((r: any) => r.action === 'Launch');
    expect(receipt).toMatchObject({ phase: 'Intended', zone: 'us-central1-a', machineType: 'e2-standard-4', provisioningModel: 'SPOT' });
    expect(receipt.requestId).toMatch(/^[0-9a-f-]{36}$/);
    const name = receipt.hosts[0];
    expect(pool.gce.instances()).toEqual([]);
    expect(condition(during, 'Held')).toMatchObject({ status: 'True', reason: 'CheckRunning' });
    expect(during.status.hosts).toEqual([expect.objectContaining({ name, state: 'Launching', zone: 'us-central1-a' })]);

    const vm = await waitFor('the VM', async () => pool.gce.instance('us-central1-a', name), 30_000);
    expect(vm.requestId).toBe(receipt.requestId);
    expect(vm.scheduling).toMatchObject({ provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE' });
    expect(vm.labels).toMatchObject({ 'leasehold-runnertarget': 'live', 'leasehold-runnertarget-uid': during.metadata.uid });
    expect(vm.labels['leasehold-installation']).toMatch(/^[a-z0-9]{4,16}$/);
    expect(vm.serviceAccounts).toEqual([{ email: HOST_ACCOUNT, scopes: ['https://www.googleapis.com/auth/logging.write', 'https://www.googleapis.com/auth/monitoring.write'] }]);
    // The target's own key, for the login user the controller was told (leasehold unless --runner-ssh-user).
    expect(vm.metadata.find((m) => m.key === 'ssh-keys')?.value).toMatch(new RegExp(`^${userInfo().username}:ssh-ed25519 \\S+ leasehold-runnertarget-${during.metadata.uid}$`));
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
    expect(vmsOf('live')).toHaveLength(1);
    expect(pool.gce.requests.filter((r) => r.op === 'insert')).toHaveLength(1);
    expect((await events('live')).map((e) => e.reason)).toContain('Launched');
  });

  it('a receipt write that conflicts stops the check before any provider change: Durable=False, no insert', async () => {
    pool.gh.queueRun('conflict', [{ labels: ['self-hosted', 'linux'] }]);
    // The check's look at the jobs is held at GitHub; meanwhile another writer moves the RunnerTarget.
    pool.gh.fault({ op: 'list-jobs', mode: 'delay', ms: 3000, times: 1 });
    await target('conflict', 'conflict');
    await waitFor('the check reading the jobs', async () => pool.gh.requests.some((r) => r.op === 'list-jobs' && r.path.includes('/conflict/')), 60_000);
    await must(['annotate', 'runnertarget', 'conflict', '-n', pool.ns, 'example.com/touched=yes']);
    const t = await waitFor('Durable=False', async () => {
      const got = await get('conflict');
      return condition(got, 'Durable')?.status === 'False' ? got : undefined;
    }, 60_000);
    expect(condition(t, 'Durable')).toMatchObject({ reason: 'StatusConflict' });
    expect(condition(t, 'Durable').message).toMatch(/do not edit status/);
    expect(condition(t, 'Ready')).toMatchObject({ status: 'False', reason: 'NotDurable' });
    expect(t.status.receipts ?? []).toEqual([]);
    expect(vmsOf('conflict')).toEqual([]);
    expect(runnersOf('conflict')).toEqual([]);
    expect((await events('conflict')).map((e) => e.reason)).toContain('StatusConflict');
  });

  it('a check lease held by another replica: the check changes nothing and says so; once it is let go, the next check acts', async () => {
    pool.gh.queueRun('held', [{ labels: ['self-hosted', 'linux'] }]);
    // A dry run first, to learn the UID the check lease is named after before any live check.
    await target('held', 'held', { dryRun: true });
    const dry = await waitFor('the dry run', async () => (await get('held'))?.status?.plan);
    expect(dry.dryRun).toBe(true);
    const uid = (await get('held')).metadata.uid;
    const now = new Date().toISOString().replace('Z', '000Z');
    await apply(pool.kubectl, JSON.stringify({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: `runnertarget-${uid}`, namespace: pool.ns },
      spec: { holderIdentity: 'other-replica', leaseDurationSeconds: 3600, acquireTime: now, renewTime: now },
    }));
    await must(['patch', 'runnertarget', 'held', '-n', pool.ns, '--type=merge', '-p', '{"spec":{"dryRun":false}}']);
    const patched = await get('held');
    const held = await waitFor('the HeldElsewhere event', async () => (await events('held')).find((e) => e.reason === 'HeldElsewhere'), 60_000);
    expect(held.message).toContain('other-replica');
    // Any status write would move the object under the holder, whose next receipt write would then conflict.
    const after = await get('held');
    expect(after.metadata.resourceVersion).toBe(patched.metadata.resourceVersion);
    expect(after.status.receipts ?? []).toEqual([]);
    expect(vmsOf('held')).toEqual([]);

    // The other replica lets go: the next attempt takes the lease and launches.
    await must(['patch', 'leases.coordination.k8s.io', `runnertarget-${uid}`, '-n', pool.ns, '--type=merge', '-p', '{"spec":{"holderIdentity":""}}']);
    await waitFor('the launch after the lease was let go', async () => vmsOf('held').length > 0, 120_000, 500);
    const lease = JSON.parse(await must(['get', 'leases.coordination.k8s.io', `runnertarget-${uid}`, '-n', pool.ns, '-o', 'json']));
    expect(lease.spec.leaseTransitions).toBeGreaterThanOrEqual(1);
    const launched = await get('held');
    expect((launched.status.receipts ?? []).map((r: any) => r.action)).toEqual(['Launch']);
  });

  it('a launched host gets its runner config over SSH with its published host key pinned; its runner registers and the launch is Done', async () => {
    pool.gh.queueRun('ssh', [{ labels: ['self-hosted', 'linux'] }]);
    await target('ssh', 'ssh');
    const done = await waitFor('the launch receipt Done', async () => {
      const got = await get('ssh');
      return got?.status?.receipts?.some((r: any) => r.action === 'Launch' && r.phase === 'Done') ? got : undefined;
    }, 120_000, 500);
    const name = done.status.receipts[0].hosts[0];
    expect(runnersOf('ssh')).toEqual([expect.objectContaining({ name, status: 'online' })]);
    // The job labels, and the owner labels the pool's cleanup goes by: the target's UID and the installation.
    const installation = JSON.parse(await must(['get', 'secret', 'leasehold-installation', '-n', pool.ns, '-o', 'json']));
    const installationID = Buffer.from(installation.data.id, 'base64').toString().trim();
    expect(runnersOf('ssh')[0]!.labels.map((l) => l.name).sort()).toEqual([`leasehold-installation-${installationID}`, `leasehold-target-${done.metadata.uid}`, 'linux', 'self-hosted', 'x64']);
    const file = join(pool.machines.get(name)!.home, JIT_CONFIG_PATH);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // The config went over SSH only: nothing of it in the instance's metadata.
    expect(JSON.stringify(pool.gce.instance('us-central1-a', name)!.metadata)).not.toContain(readFileSync(file, 'utf8').trim().slice(0, 40));
    expect((await events('ssh')).map((e) => e.reason)).toContain('RunnerConfigDelivered');
    const host = await waitFor('the host Idle', async () => (await get('ssh'))?.status?.hosts?.find((h: any) => h.name === name && h.state === 'Idle'), 60_000, 500);
    expect(host.runnerID).toBe(runnersOf('ssh')[0]!.id);
  });

  it('a host whose SSH host key is not the one it published is not trusted: no runner config is made for it', async () => {
    pool.gh.queueRun('impostor', [{ labels: ['self-hosted', 'linux'] }]);
    await target('impostor', 'impostor');
    const refused = await waitFor('the refused connection', async () => (await events('impostor')).find((e) => e.reason === 'HostUnreachable'), 120_000, 500);
    expect(refused.message).toMatch(/host key/i);
    expect(runnersOf('impostor')).toEqual([]);
    const t = await get('impostor');
    expect(t.status.receipts).toEqual([expect.objectContaining({ action: 'Launch', phase: 'Intended' })]);
    expect(existsSync(join(pool.machines.get(t.status.receipts[0].hosts[0])!.home, JIT_CONFIG_PATH))).toBe(false);
  });

  it('a zone without capacity moves the launch to the next zone, a quota error to the next tier, each try with a receipt of its own', async () => {
    pool.gh.queueRun('capacity', [{ labels: ['self-hosted', 'linux'] }]);
    pool.gce.refuse({ zone: 'us-central1-a', machineType: 'e2-standard-4', code: 'ZONE_RESOURCE_POOL_EXHAUSTED', as: 'operation', times: 1 });
    pool.gce.refuse({ zone: 'us-central1-b', machineType: 'e2-standard-4', code: 'QUOTA_EXCEEDED', as: 'http', times: 1 });
    await target('capacity', 'capacity', {
      maxHosts: 1,
      gce: {
        project: pool.gce.project,
        zones: ['us-central1-a', 'us-central1-b'],
        machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }, { machineType: 'e2-standard-8', pricePerHour: 0.1 }],
        serviceAccount: HOST_ACCOUNT,
        credentialsSecretRef: { name: 'gce-key' },
        endpoint: pool.gce.url,
      },
    });
    const t = await waitFor('the launch in the third placement', async () => {
      const got = await get('capacity');
      return (got?.status?.receipts ?? []).length === 3 && condition(got, 'Ready') ? got : undefined;
    }, 60_000, 300);
    expect(t.status.receipts.map((r: any) => [r.phase, r.zone, r.machineType])).toEqual([
      ['Failed', 'us-central1-a', 'e2-standard-4'],
      ['Failed', 'us-central1-b', 'e2-standard-4'],
      ['Intended', 'us-central1-a', 'e2-standard-8'],
    ]);
    expect(t.status.receipts[0].message).toContain('ZONE_RESOURCE_POOL_EXHAUSTED');
    expect(t.status.receipts[1].message).toContain('QUOTA_EXCEEDED');
    expect(new Set(t.status.receipts.map((r: any) => r.requestId)).size).toBe(3);
    const vms = vmsOf('capacity');
    expect(vms.map((v) => [v.zone, v.machineType])).toEqual([['us-central1-a', 'e2-standard-8']]);
    expect(vms[0]!.requestId).toBe(t.status.receipts[2].requestId);
    expect(t.status.hosts).toEqual([expect.objectContaining({ name: vms[0]!.name, zone: 'us-central1-a', machineType: 'e2-standard-8', pricePerHour: 0.1 })]);
  });

  it('with no job left, an idle host leaves in order: its runner removed first, no job process found over SSH, then its VM deleted', async () => {
    const { jobIds } = pool.gh.queueRun('drain', [{ labels: ['self-hosted', 'linux'] }]);
    await target('drain', 'drain', { checkInterval: '50s', maxHosts: 1 });
    const idle = await waitFor('the host Idle', async () => (await get('drain'))?.status?.hosts?.find((h: any) => h.state === 'Idle'), 120_000, 500);
    pool.gh.completeJob(jobIds[0]!, 'cancelled');
    // GitHub's busy flag may lag behind a job's start: an idle host is kept that long (--runner-busy-flag-lag) before it drains.
    await waitFor('the VM deleted', async () => vmsOf('drain').length === 0, 240_000, 1000);
    const removed = pool.gh.requests.filter((r) => r.op === 'delete-runner' && r.path.endsWith(`/${idle.runnerID}`));
    const deleted = pool.gce.requests.filter((r) => r.op === 'delete' && r.path.endsWith(`/${idle.name}`));
    expect(removed).toHaveLength(1);
    expect(deleted.length).toBeGreaterThanOrEqual(1);
    expect(removed[0]!.time).toBeLessThan(deleted[0]!.time);
    const t = await waitFor('the host gone from status', async () => {
      const got = await get('drain');
      return (got?.status?.hosts ?? []).length === 0 ? got : undefined;
    }, 60_000, 500);
    expect(t.status.receipts.map((r: any) => [r.action, r.phase])).toEqual([['Launch', 'Done'], ['Deregister', 'Done'], ['Delete', 'Done']]);
    expect(Date.parse(t.status.receipts[1].at) - Date.parse(idle.idleSince)).toBeGreaterThanOrEqual(TEST_TIMES.busyLagMs);
  }, 360_000);

  it('a controller killed while its insert is in flight: the next one continues the launch from its receipt, with no second VM', async () => {
    pool.gh.queueRun('sigkill', [{ labels: ['self-hosted', 'linux'] }]);
    pool.gce.fault({ op: 'insert', mode: 'delay', ms: 3000, times: 1 });
    const inserts = pool.gce.requests.filter((r) => r.op === 'insert').length;
    await target('sigkill', 'sigkill');
    await waitFor('the insert at Compute Engine', async () => pool.gce.requests.filter((r) => r.op === 'insert').length > inserts, 60_000);
    await pool.controller.stop('SIGKILL');
    const receipt = (await get('sigkill')).status.receipts[0];
    expect(receipt).toMatchObject({ action: 'Launch', phase: 'Intended' });
    // The insert lands after its sender died; the receipt is the only record of it.
    await waitFor('the VM of the dead check', async () => vmsOf('sigkill').length === 1, 30_000);
    await pool.startController();
    // The dead replica's check lease runs out first (--runner-check-lease by the new replica's clock).
    const t = await waitFor('the launch continued to Done', async () => {
      const got = await get('sigkill');
      return got?.status?.receipts?.[0]?.phase === 'Done' ? got : undefined;
    }, 180_000, 1000);
    expect(t.status.receipts).toEqual([expect.objectContaining({ id: receipt.id, action: 'Launch', phase: 'Done' })]);
    expect(vmsOf('sigkill')).toHaveLength(1);
    expect(vmsOf('sigkill')[0]!.requestId).toBe(receipt.requestId);
    expect(runnersOf('sigkill')).toEqual([expect.objectContaining({ name: receipt.hosts[0], status: 'online' })]);
  }, 360_000);

  it('a preempted spot host: its ghost runner is removed and, with the job still queued, a new host replaces it', async () => {
    pool.gh.queueRun('preempt', [{ labels: ['self-hosted', 'linux'] }]);
    await target('preempt', 'preempt', { checkInterval: '50s', maxHosts: 1 });
    const first = await waitFor('the host Idle', async () => (await get('preempt'))?.status?.hosts?.find((h: any) => h.state === 'Idle'), 120_000, 500);
    pool.gce.preempt(first.zone, first.name);
    const preempted = await waitFor('the Preempted event', async () => (await events('preempt')).find((e) => e.reason === 'Preempted'), 60_000, 500);
    expect(preempted.message).toContain(first.name);
    await waitFor('the ghost runner removed', async () => !runnersOf('preempt').some((r) => r.name === first.name), 60_000, 500);
    const replaced = await waitFor('a new host', async () => vmsOf('preempt').find((v) => v.name !== first.name), 60_000, 500);
    const t = await get('preempt');
    expect(t.status.receipts.map((r: any) => [r.action, r.hosts[0]])).toEqual(expect.arrayContaining([['RemoveRunner', first.name], ['Launch', replaced.name]]));
    expect(t.status.hosts.map((h: any) => h.name)).not.toContain(first.name);
    expect(vmsOf('preempt')).toHaveLength(1);
  });

  it('a deleted RunnerTarget stays until its pool is gone: hosts drained in order, VMs deleted, runners removed, then the finalizer goes', async () => {
    pool.gh.queueRun('teardown', [{ labels: ['self-hosted', 'linux'] }]);
    await target('teardown', 'teardown', { checkInterval: '50s', maxHosts: 1 });
    const idle = await waitFor('the host Idle', async () => (await get('teardown'))?.status?.hosts?.find((h: any) => h.state === 'Idle'), 120_000, 500);
    expect((await get('teardown')).metadata.finalizers).toContain('leasehold.dev/runner-hosts');
    await must(['delete', 'runnertarget', 'teardown', '-n', pool.ns, '--wait=false']);
    await waitFor('the RunnerTarget gone', async () => (await get('teardown')) === undefined, 240_000, 1000);
    expect(vmsOf('teardown')).toEqual([]);
    expect(runnersOf('teardown')).toEqual([]);
    const removed = pool.gh.requests.filter((r) => r.op === 'delete-runner' && r.path.endsWith(`/${idle.runnerID}`));
    const deleted = pool.gce.requests.filter((r) => r.op === 'delete' && r.path.endsWith(`/${idle.name}`));
    expect(removed[0]!.time).toBeLessThan(deleted[0]!.time);
  }, 360_000);

  it('a host whose job process runs is never drained, whatever GitHub\'s busy flag says; once the job ends it drains', async () => {
    const { jobIds } = pool.gh.queueRun('worker', [{ labels: ['self-hosted', 'linux'] }]);
    await target('worker', 'worker', { checkInterval: '50s', maxHosts: 1 });
    const idle = await waitFor('the host Idle', async () => (await get('worker'))?.status?.hosts?.find((h: any) => h.state === 'Idle'), 120_000, 500);
    // A job runs on the host (its runner's worker process), but GitHub's flag says idle and no job waits.
    const worker = pool.spawnWorker(idle.name);
    try {
      pool.gh.completeJob(jobIds[0]!, 'cancelled');
      await waitFor('the host seen Busy over SSH', async () => (await get('worker'))?.status?.hosts?.find((h: any) => h.state === 'Busy'), 60_000, 500);
      const busyAt = Date.now();
      // Past the busy-flag lag and three checks (5 s apart) more: the host stays, its runner is not touched.
      const past = busyAt + TEST_TIMES.busyLagMs + 3 * 5_000;
      await waitFor('the busy-flag lag and a few checks more', async () => Date.parse((await get('worker'))?.status?.lastCheckAt ?? '') > past, 90_000, 500);
      const t = await get('worker');
      expect(t.status.hosts).toEqual([expect.objectContaining({ name: idle.name, state: 'Busy' })]);
      expect(t.status.receipts.map((r: any) => r.action)).toEqual(['Launch']);
      expect(runnersOf('worker')).toHaveLength(1);
      expect(vmsOf('worker')).toHaveLength(1);
    } finally {
      worker.kill('SIGKILL');
    }
    await waitFor('the VM deleted once the job ended', async () => vmsOf('worker').length === 0, 240_000, 1000);
  }, 480_000);
});
