// Runners that go offline while their VM lives (issue 20 item 1): a host's
// runner process dies, GitHub lists the runner offline, and the controller
// replaces the host once the offline grace passes, leaving no VM or runner
// behind; and GitHub's lagging removal of a JIT runner after its job neither
// makes the controller delete anything twice nor leaves anything behind.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { HOST_ACCOUNT, startRunnerTargetPool, TEST_TIMES, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtoffline');
});

afterAll(async () => {
  await pool?.stop();
});

afterEach(async () => {
  pool.onRunner = undefined;
  pool.gh.jitRemovalLagMs = 3_000;
  await pool.quiet();
});

/** A target following its own repository, its jobs asking for a label of its own. */
const target = (name: string, over: Record<string, unknown>) =>
  pool.target(name, name, {
    github: { org: pool.gh.org, repositories: [`${pool.gh.org}/${name}`], tokenSecretRef: { name: 'gh-token' }, apiURL: pool.gh.url, labels: [name] },
    gce: {
      project: pool.gce.project,
      zones: ['us-central1-a'],
      machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }],
      serviceAccount: HOST_ACCOUNT,
      credentialsSecretRef: { name: 'gce-key' },
      endpoint: pool.gce.url,
    },
    checkInterval: '30s',
    ...over,
  });

const vmDeletes = (host: string) => pool.gce.requests.filter((r) => r.op === 'delete' && r.path.endsWith(`/instances/${host}`));
const runnerDeletes = (id: number) => pool.gh.requests.filter((r) => r.op === 'delete-runner' && r.path.endsWith(`/runners/${id}`));

/** Waits until the target has exactly one VM whose runner is online, and returns its name. */
const oneOnlineHost = (name: string, not?: string) =>
  waitFor(`one VM of ${name} with its runner online${not ? `, not ${not}` : ''}`, async () => {
    const vms = pool.vmsOf(name);
    const runners = pool.runnersOf(name);
    if (vms.length !== 1 || runners.length !== 1) return undefined;
    const [vm, runner] = [vms[0]!, runners[0]!];
    return vm.name === runner.name && runner.status === 'online' && vm.name !== not ? vm.name : undefined;
  }, 180_000, 300);

describe('RunnerTarget hosts whose runner goes offline', () => {
  it('a runner that goes offline on a live VM is replaced after the offline grace: drained over SSH, its runner removed once, its VM deleted once, nothing left', async () => {
    pool.gh.queueRun('offline', []);
    await target('offline', { floor: 1, maxHosts: 2 });
    const first = await oneOnlineHost('offline');
    const runnerID = pool.runnersOf('offline')[0]!.id;
    await waitFor('the host Idle in status', async () => ((await pool.get('offline'))?.status?.hosts ?? []).some((h: any) => h.name === first && h.state === 'Idle'), 60_000, 300);

    // The runner process dies; the VM lives on.
    const wentOffline = Date.now();
    pool.gh.runnerOffline(first);
    const seen = await waitFor('the host Offline in status, no capacity', async () => {
      const hosts = (await pool.get('offline'))?.status?.hosts ?? [];
      return hosts.find((h: any) => h.name === first && h.state === 'Offline');
    }, 60_000, 200);
    expect(seen.offlineSince).toEqual(expect.any(String));

    const replacement = await oneOnlineHost('offline', first);
    const drained = (await pool.events('offline')).find((e) => e.reason === 'RunnerOffline');
    expect(drained?.message).toMatch(new RegExp(`runner ${first} has been offline since .* past the offline grace of ${TEST_TIMES.offlineGraceMs / 1000} s`));
    // Not before the grace: the VM stayed at least that long after the runner went offline.
    const deletes = vmDeletes(first);
    expect(deletes).toHaveLength(1);
    expect(deletes[0]!.time - wentOffline).toBeGreaterThanOrEqual(TEST_TIMES.offlineGraceMs);
    // The runner went first, once, and only then the VM.
    const removed = runnerDeletes(runnerID);
    expect(removed).toHaveLength(1);
    expect(removed[0]!.time).toBeLessThan(deletes[0]!.time);
    const t = await waitFor('status to list the replacement only', async () => {
      const got = await pool.get('offline');
      const hosts = got?.status?.hosts ?? [];
      return hosts.length === 1 && hosts[0].name === replacement && hosts[0].state === 'Idle' ? got : undefined;
    }, 60_000, 300);
    expect(t.status.receipts.filter((r: any) => r.phase === 'Intended')).toEqual([]);
    expect(pool.vmsOf('offline').map((v) => v.name)).toEqual([replacement]);
    expect(pool.runnersOf('offline').map((r) => r.name)).toEqual([replacement]);
  }, 300_000);

  it.each([
    ['GitHub removes the runner before the offline grace passes: the controller removes no runner', 1_500, 0],
    ['the offline grace passes before GitHub removes the runner: the controller removes it, once, and GitHub\'s late removal finds nothing', 12_000, 1],
  ])('a JIT runner whose removal lags after its job (%s); its VM is deleted once and nothing is left', async (_name, lagMs, removals) => {
    const name = lagMs < TEST_TIMES.offlineGraceMs ? 'lagshort' : 'laglong';
    pool.gh.jitRemovalLagMs = lagMs;
    pool.onRunner = (host) => {
      if (host.startsWith(`${name}-`)) pool.takeJob(host);
    };
    pool.gh.queueRun(name, [{ labels: ['self-hosted', 'linux', name] }]);
    await target(name, { floor: 0, maxHosts: 1 });
    const job = await waitFor('the job running on a host', async () => pool.jobs.find((j) => j.host.startsWith(`${name}-`)), 180_000, 300);
    const runnerID = pool.runnersOf(name).find((r) => r.name === job.host)!.id;
    await waitFor('the host Busy in status', async () => ((await pool.get(name))?.status?.hosts ?? []).some((h: any) => h.name === job.host && h.state === 'Busy'), 60_000, 300);
    await pool.finishJob(job.host);

    await waitFor('no VM and no runner of the target', async () => pool.vmsOf(name).length === 0 && pool.runnersOf(name).length === 0, 120_000, 300);
    const t = await waitFor('status with no host and no open receipt', async () => {
      const got = await pool.get(name);
      return (got?.status?.hosts ?? []).length === 0 && !(got?.status?.receipts ?? []).some((r: any) => r.phase === 'Intended') ? got : undefined;
    }, 60_000, 300);
    expect(vmDeletes(job.host)).toHaveLength(1);
    expect(runnerDeletes(runnerID)).toHaveLength(removals);
    expect(runnerDeletes(runnerID).every((r) => r.status === 204)).toBe(true);
    expect(t.status.receipts.filter((r: any) => r.phase === 'Failed')).toEqual([]);
    const warnings = (await pool.events(name)).filter((e) => /Failed|Unknown/.test(e.reason));
    expect(warnings).toEqual([]);
    // Nothing came back: a check that began after GitHub's removal was due still finds no VM and no runner.
    const due = job.endedAt! + lagMs;
    await waitFor('a check after the lagged removal was due', async () => Date.parse((await pool.get(name))?.status?.lastCheckAt ?? '') > due + 1000, 60_000, 300);
    expect(pool.vmsOf(name)).toEqual([]);
    expect(pool.runnersOf(name)).toEqual([]);
  }, 300_000);
});
