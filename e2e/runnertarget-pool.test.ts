// RunnerTarget pools over many checks: scale-up to maxHosts through zones
// and tiers, the daily budget, the floor after jobs end, orphan VMs and the
// standard fallback. Each test follows its own repository and its jobs ask
// for a label of its own, so that no other test's runner takes them.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import { vmLabels } from '../controllers/runnertarget/checkrun/providers.js';
import { ownerLabels } from '../controllers/runnertarget/policy/naming.js';
import { parseServiceAccountKey } from '../src/providers/gce/auth.js';
import { GceClient } from '../src/providers/gce/client.js';
import { getJSON, waitFor } from './support/kube.js';
import { condition, HOST_ACCOUNT, startRunnerTargetPool, type RunnerTargetPool } from './support/runnertarget.js';

/** --runner-boot-grace of the orphan test's controller: how long a VM may run without a runner before it is marked an orphan. */
const BOOT_GRACE_MS = 10_000;

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtpool');
});

afterAll(async () => {
  await pool?.stop();
});

// A finished test's pool is checked no more, so that its SSH looks do not slow the tests after it.
afterEach(() => pool.quiet());

const gceSpec = (over: Record<string, unknown>) => ({
  project: pool.gce.project,
  zones: ['us-central1-a', 'us-central1-b'],
  machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }],
  serviceAccount: HOST_ACCOUNT,
  credentialsSecretRef: { name: 'gce-key' },
  endpoint: pool.gce.url,
  ...over,
});
const labelled = (name: string, n: number) => Array.from({ length: n }, () => ({ labels: ['self-hosted', 'linux', name] }));
const github = (name: string) => ({ org: pool.gh.org, repositories: [`${pool.gh.org}/${name}`], labels: [name], tokenSecretRef: { name: 'gh-token' }, apiURL: pool.gh.url });
/** Waits until `checks` more checks of `name` have ended after now. */
async function checksPass(name: string, checks: number, timeoutMs = 60_000): Promise<any> {
  const from = Date.now();
  let seen = Date.parse((await pool.get(name))?.status?.lastCheckAt ?? '');
  let count = 0;
  return waitFor(`${checks} more checks of ${name}`, async () => {
    const t = await pool.get(name);
    const at = Date.parse(t?.status?.lastCheckAt ?? '');
    // lastCheckAt has whole seconds: a check counts once it ended after the wait began.
    if (at > seen && at >= Math.floor(from / 1000) * 1000) {
      seen = at;
      count++;
    }
    return count >= checks ? t : undefined;
  }, timeoutMs, 300);
}

describe('RunnerTarget pools', () => {
  it('a 20-job queue scales to maxHosts in the order of zones, then tiers after a quota error, and never past maxHosts', async () => {
    pool.gh.queueRun('scale', labelled('scale', 20));
    // Zone a has room for two more e2-standard-4, zone b for one before its e2 quota runs out.
    pool.gce.refuse({ zone: 'us-central1-a', machineType: 'e2-standard-4', code: 'ZONE_RESOURCE_POOL_EXHAUSTED', as: 'operation', after: 2 });
    pool.gce.refuse({ zone: 'us-central1-b', machineType: 'e2-standard-4', code: 'QUOTA_EXCEEDED', as: 'http', after: 1 });
    try {
      await pool.target('scale', 'scale', {
        github: github('scale'),
        gce: gceSpec({ machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }, { machineType: 'e2-standard-8', pricePerHour: 0.1 }] }),
        maxHosts: 5,
        checkInterval: '30s',
      });
      await waitFor('5 hosts with runners', async () => pool.runnersOf('scale').length === 5, 120_000, 500);
      const t = await checksPass('scale', 2);
      // Compute Engine's log of inserts, in the order they came: each launch tries zone a, then zone b, then the next tier.
      const inserts = pool.gce.inserts().filter((r) => r.name.startsWith('scale-')).map((r) => [r.refused ?? 'made', r.zone, r.machineType]);
      expect(inserts).toEqual([
        ['made', 'us-central1-a', 'e2-standard-4'],
        ['made', 'us-central1-a', 'e2-standard-4'],
        ['ZONE_RESOURCE_POOL_EXHAUSTED', 'us-central1-a', 'e2-standard-4'],
        ['made', 'us-central1-b', 'e2-standard-4'],
        ['ZONE_RESOURCE_POOL_EXHAUSTED', 'us-central1-a', 'e2-standard-4'],
        ['QUOTA_EXCEEDED', 'us-central1-b', 'e2-standard-4'],
        ['made', 'us-central1-a', 'e2-standard-8'],
        ['ZONE_RESOURCE_POOL_EXHAUSTED', 'us-central1-a', 'e2-standard-4'],
        ['QUOTA_EXCEEDED', 'us-central1-b', 'e2-standard-4'],
        ['made', 'us-central1-a', 'e2-standard-8'],
      ]);
      // Each try has its receipt: the refused ones Failed with the code.
      const launches = t.status.receipts.filter((r: any) => r.action === 'Launch');
      expect(launches).toHaveLength(10);
      expect(launches.filter((r: any) => r.phase === 'Failed').map((r: any) => r.message.match(/ZONE_RESOURCE_POOL_EXHAUSTED|QUOTA_EXCEEDED/)?.[0]).sort()).toEqual([
        'QUOTA_EXCEEDED', 'QUOTA_EXCEEDED', 'ZONE_RESOURCE_POOL_EXHAUSTED', 'ZONE_RESOURCE_POOL_EXHAUSTED', 'ZONE_RESOURCE_POOL_EXHAUSTED',
      ]);
      // The emulator holds exactly the launched placements, and never held more than maxHosts VMs of the pool.
      const vms = pool.vmsOf('scale');
      const launched = launches.filter((r: any) => r.phase !== 'Failed');
      expect(vms.map((v) => `${v.name} ${v.zone} ${v.machineType}`).sort()).toEqual(launched.map((r: any) => `${r.hosts[0]} ${r.zone} ${r.machineType}`).sort());
      expect(pool.peakVMs('scale')).toBe(5);
      expect(t.status.counts).toMatchObject({ hosts: 5, queued: 20 });
      expect(t.status.plan.reason).toContain('maxHosts 5');
    } finally {
      pool.gce.clearRefusals();
    }
  }, 240_000);

  it('the daily budget stops launches: hosts that would pass dailyBudgetUSD are not launched, BudgetExhausted says so, status shows spend today', async () => {
    // Each launch is priced for an hour, never past midnight UTC. The price
    // makes one launch cost about 1 USD at any time of day, so 2.5 USD pays for
    // two hosts of the five wanted (at 1 USD/h, within 24 min of midnight five
    // launches fit the budget and nothing would be held back). A launch is
    // never dearer than that, so never fewer than two fit; in the last minutes
    // of a day the test waits for the next one rather than straddle midnight.
    const hoursLeft = () => (Math.ceil(Date.now() / 86_400_000) * 86_400_000 - Date.now()) / 3_600_000;
    if (hoursLeft() < 0.15) await waitFor('a new UTC day', async () => hoursLeft() > 0.5, 10 * 60_000, 1000);
    const pricePerHour = Math.round((1 / Math.min(1, hoursLeft())) * 1000) / 1000;
    const allowed = 2;
    pool.gh.queueRun('budget', labelled('budget', 5));
    await pool.target('budget', 'budget', {
      github: github('budget'),
      gce: gceSpec({ machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour }] }),
      maxHosts: 5,
      dailyBudgetUSD: 2.5,
      checkInterval: '30s',
    });
    const t = await waitFor('BudgetExhausted=True', async () => {
      const got = await pool.get('budget');
      return condition(got, 'BudgetExhausted')?.status === 'True' ? got : undefined;
    }, 60_000, 300);
    expect(condition(t, 'BudgetExhausted')).toMatchObject({ reason: 'DailyBudgetReached', message: expect.stringContaining('dailyBudgetUSD 2.5') });
    expect(condition(t, 'BudgetExhausted').message).toMatch(/raise spec\.dailyBudgetUSD/);
    expect(t.status.spendTodayUSD).toBeGreaterThan(0);
    expect(t.status.spendDay).toBe(new Date(Date.parse(t.status.lastCheckAt)).toISOString().slice(0, 10));
    expect(t.status.plan.reason).toMatch(/held back: they would pass dailyBudgetUSD/);
    // More checks, the jobs still queued: no more launches.
    const later = await checksPass('budget', 2);
    expect(pool.vmsOf('budget')).toHaveLength(allowed);
    expect(later.status.receipts.filter((r: any) => r.action === 'Launch')).toHaveLength(allowed);
    expect(later.status.counts).toMatchObject({ hosts: allowed, queued: 5 });
    expect(later.status.spendTodayUSD).toBeGreaterThanOrEqual(t.status.spendTodayUSD);
  }, 780_000);

  it('jobs finishing bring the pool back to its floor, and no host is deleted while its job runs, though GitHub\'s busy flag reads false throughout', async () => {
    // GitHub's flag lags longer than any job here lasts, and removing a busy runner succeeds, as GitHub has been seen to do.
    pool.gh.busyLagMs = 60_000;
    pool.gh.deleteBusySucceeds = true;
    // Each host's runner takes a job as soon as it starts; the job runs as a Runner.Worker process on the host.
    pool.onRunner = (host) => {
      if (host.startsWith('floor-')) pool.takeJob(host);
    };
    const flags: boolean[] = [];
    const sampling = setInterval(() => flags.push(...pool.runnersOf('floor').map((r) => r.busy)), 200);
    try {
      pool.gh.queueRun('floor', labelled('floor', 3));
      await pool.target('floor', 'floor', { github: github('floor'), gce: gceSpec({}), floor: 1, maxHosts: 3, checkInterval: '30s' });
      await waitFor('3 jobs running on 3 hosts', async () => pool.jobs.filter((j) => j.host.startsWith('floor-')).length === 3, 120_000, 300);
      const running = pool.jobs.filter((j) => j.host.startsWith('floor-'));
      expect(new Set(running.map((j) => j.host)).size).toBe(3);
      await waitFor('all 3 hosts Busy in status', async () => ((await pool.get('floor'))?.status?.hosts ?? []).filter((h: any) => h.state === 'Busy').length === 3, 60_000, 300);
      // The jobs end one at a time, two checks apart, while the others go on.
      for (const job of running) {
        await checksPass('floor', 2);
        expect(pool.vmsOf('floor').map((v) => v.name)).toContain(job.host);
        await pool.finishJob(job.host);
      }
      const settled = await waitFor('the pool back at its floor: one VM, its runner idle', async () => {
        const vms = pool.vmsOf('floor');
        const runners = pool.runnersOf('floor');
        return vms.length === 1 && runners.length === 1 && runners[0]!.name === vms[0]!.name && runners[0]!.status === 'online' ? vms[0] : undefined;
      }, 180_000, 500);
      expect(running.map((j) => j.host)).not.toContain(settled.name);
      const t = await checksPass('floor', 2);
      expect(pool.vmsOf('floor').map((v) => v.name)).toEqual([settled.name]);
      expect(t.status.hosts).toEqual([expect.objectContaining({ name: settled.name, state: 'Idle' })]);
      expect(pool.peakVMs('floor')).toBeLessThanOrEqual(3);
    } finally {
      clearInterval(sampling);
      pool.onRunner = undefined;
      pool.gh.busyLagMs = 0;
      pool.gh.deleteBusySucceeds = false;
    }
    // GitHub never said busy, yet no VM was deleted while a job ran on it.
    expect(flags.length).toBeGreaterThan(0);
    expect(flags.every((busy) => !busy)).toBe(true);
    const deletes = pool.gce.requests.filter((r) => r.op === 'delete' && /\/instances\/floor-/.test(r.path));
    expect(deletes.length).toBeGreaterThanOrEqual(3);
    for (const d of deletes) {
      const host = d.path.slice(d.path.lastIndexOf('/') + 1);
      const during = pool.jobs.filter((j) => j.host === host && j.startedAt <= d.time && (j.endedAt === undefined || j.endedAt > d.time));
      expect({ host, during }).toEqual({ host, during: [] });
    }
  }, 360_000);

  it('an orphan VM (labelled for the target, no runner after the boot grace) is marked, then deleted at the next check after a last look; one whose runner comes meanwhile stays', async () => {
    // Every other test runs with production's boot grace (45 min): a host whose runner left after its job must drain without it.
    await pool.startController(['--runner-boot-grace', `${BOOT_GRACE_MS}ms`]);
    try {
      // The repository exists (one finished job) and nothing waits: no host is wanted.
      pool.gh.completeJob(pool.gh.queueRun('orphan', labelled('orphan', 1)).jobIds[0]!, 'success');
      await pool.target('orphan', 'orphan', { github: github('orphan'), gce: gceSpec({}), floor: 0, maxHosts: 3, checkInterval: '30s' });
      const target = await waitFor('the first check', async () => {
        const got = await pool.get('orphan');
        return got?.status?.lastCheckAt ? got : undefined;
      });
      // Two VMs of the pool that status never listed (a launch whose status write was lost), made as the controller would.
      const secret = await getJSON(pool.kubectl, ['secret', 'leasehold-installation', '-n', pool.ns]);
      const installation = Buffer.from(secret.data.id, 'base64').toString().trim();
      const gce = new GceClient({ key: parseServiceAccountKey(JSON.stringify(pool.gce.serviceAccountKey)), project: pool.gce.project, endpoint: pool.gce.url, tokenUrl: pool.gce.tokenUrl });
      for (const name of ['orphan-aaaa0001', 'orphan-bbbb0002']) {
        await gce.waitOperation(await gce.insert({
          zone: 'us-central1-a', name, machineType: 'e2-standard-4', spot: true, image: 'img', serviceAccountEmail: HOST_ACCOUNT,
          sshUser: userInfo().username, sshPublicKey: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHh0ZXN0a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5 stray',
          labels: vmLabels(target, installation), requestId: randomUUID(),
        }));
      }
      const orphanEvent = async (vm: string) => (await pool.events('orphan')).find((e) => e.reason === 'OrphanVM' && e.message.includes(vm));
      // The late one is marked; its runner registers before the next check's last look.
      await waitFor('orphan-bbbb0002 marked', async () => ((await pool.get('orphan'))?.status?.hosts ?? []).some((h: any) => h.name === 'orphan-bbbb0002' && h.orphanSince), BOOT_GRACE_MS + 60_000, 200);
      const jit = await fetch(`${pool.gh.url}/orgs/${pool.gh.org}/actions/runners/generate-jitconfig`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pool.gh.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'orphan-bbbb0002', runner_group_id: 1, labels: ['linux', 'x64', 'orphan', ...ownerLabels(target.metadata.uid, installation)] }),
      });
      pool.gh.startRunner(((await jit.json()) as { encoded_jit_config: string }).encoded_jit_config);
      await waitFor('the stray VM deleted', async () => !pool.vmsOf('orphan').some((v) => v.name === 'orphan-aaaa0001'), 60_000, 200);
      expect(pool.vmsOf('orphan').map((v) => v.name)).toEqual(['orphan-bbbb0002']);
      const marked = await orphanEvent('orphan-aaaa0001');
      expect(marked.message).toMatch(/deleted at the next check unless its runner registers/);
      const t = await pool.get('orphan');
      const deletes = t.status.receipts.filter((r: any) => r.action === 'Delete');
      expect(deletes).toEqual([expect.objectContaining({ hosts: ['orphan-aaaa0001'], phase: 'Done' })]);
      // Marked at one check, deleted at a later one (checks are 3 s apart; times have whole seconds).
      const markedAt = Date.parse(marked.eventTime ?? marked.lastTimestamp ?? marked.firstTimestamp);
      expect(Date.parse(deletes[0].at)).toBeGreaterThanOrEqual(Math.floor(markedAt / 1000) * 1000 + 1000);
      expect(await orphanEvent('orphan-bbbb0002')).toBeDefined();
      expect(t.status.hosts.find((h: any) => h.name === 'orphan-bbbb0002')).not.toHaveProperty('orphanSince');
    } finally {
      await pool.startController();
    }
  }, 180_000);

  it('fallbackToStandard: with no spot capacity in any zone or tier, a standard VM is launched and counted at standardPricePerHour', async () => {
    pool.gh.queueRun('standard', labelled('standard', 1));
    pool.gce.refuse({ provisioningModel: 'SPOT', code: 'ZONE_RESOURCE_POOL_EXHAUSTED', as: 'operation' });
    try {
      await pool.target('standard', 'standard', {
        github: github('standard'),
        gce: gceSpec({ fallbackToStandard: true, machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05, standardPricePerHour: 0.2 }] }),
        maxHosts: 1,
        checkInterval: '30s',
      });
      // The refused spot inserts leave nothing: the pool's one VM is the standard one.
      const vm = await waitFor('the standard VM', async () => pool.vmsOf('standard').find((v) => v.scheduling.provisioningModel === 'STANDARD'), 60_000, 300);
      // Not a spot VM in disguise: no preemptible flag, and it ends only by the host lifetime
      // bound (maxRunDuration with DELETE, which every host gets), not by preemption.
      expect(vm.scheduling).not.toHaveProperty('preemptible', true);
      expect(vm.scheduling).toMatchObject({ provisioningModel: 'STANDARD', instanceTerminationAction: 'DELETE', maxRunDuration: { seconds: expect.any(String) } });
      // Counted at the standard price once the host has run a while.
      const t = await waitFor('a check 5 s after the launch', async () => {
        const got = await pool.get('standard');
        const host = got?.status?.hosts?.[0];
        return host && Date.parse(got.status.plan.at) - Date.parse(host.createdAt) >= 5_000 ? got : undefined;
      }, 60_000, 300);
      expect(t.status.receipts.filter((r: any) => r.action === 'Launch').map((r: any) => [r.phase === 'Failed' ? 'Failed' : 'Launched', r.zone, r.provisioningModel])).toEqual([
        ['Failed', 'us-central1-a', 'SPOT'],
        ['Failed', 'us-central1-b', 'SPOT'],
        ['Launched', 'us-central1-a', 'STANDARD'],
      ]);
      expect(pool.vmsOf('standard').map((v) => v.name)).toEqual([vm.name]);
      const host = t.status.hosts[0];
      expect(host).toMatchObject({ name: vm.name, provisioningModel: 'STANDARD', pricePerHour: 0.2 });
      // plan.at and createdAt have whole seconds; spend was taken within the second after plan.at.
      const ran = Date.parse(t.status.plan.at) - Date.parse(host.createdAt);
      expect(t.status.spendTodayUSD).toBeGreaterThanOrEqual(Math.floor((0.2 * ran) / 3.6) / 1e6);
      expect(t.status.spendTodayUSD).toBeLessThanOrEqual(Math.ceil((0.2 * (ran + 1000)) / 3.6) / 1e6);
    } finally {
      pool.gce.clearRefusals();
    }
  }, 180_000);
});
