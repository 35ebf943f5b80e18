// Host reuse under SIGKILL: a reused host's Register is held at each of its
// steps (the receipt written, the last runner config removed from the host,
// the finished runner's registration removed, the new registration made,
// the new config written), the controller is SIGKILLed there and started
// again with the same flags. Each time the host ends with one runner online
// under its name, which takes the waiting job; the Register receipt settles
// Done; no VM is inserted for the job, no name is registered twice and no
// registration is left behind. GitHub keeps listing a finished runner
// offline here (its removal lag is long), so that the Register has that
// registration to remove.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { startRunnerTargetPool, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtreusecrash', { gated: true });
  pool.gh.jitRemovalLagMs = 600_000;
  // Every runner takes the oldest job it fits the moment it starts; the test ends each job.
  pool.onRunner = (host) => void pool.takeJob(host);
}, 120_000);

afterAll(async () => {
  await pool?.quiet().catch(() => undefined);
  await pool?.stop();
});

const receipts = async (name: string) => (await pool.get(name))?.status?.receipts ?? [];
const made = (name: string) => pool.gce.inserts().filter((r) => r.name.startsWith(`${name}-`) && !r.refused).length;
const since = (t0: number, op: string) => pool.gh.requests.filter((r) => r.time >= t0 && r.op === op);

/** Where the controller dies: `arm` sets the hold before the Register, `hit` says the Register stands there, `release` lets go of what the hold keeps. */
interface KillPoint {
  arm(name: string, t0: number): { hit(): boolean; release(): void };
}

/** A target with hostReuse reuse and one host, busy with the first of two queued jobs; returns that host and its runner. */
async function busyHost(name: string): Promise<{ host: string; runnerID: number; config: string; waiting: number }> {
  const labels = ['self-hosted', 'linux', name];
  pool.gh.queueRun(name, [{ labels }]);
  const github = { org: pool.gh.org, repositories: [`${pool.gh.org}/${name}`], labels: [name], tokenSecretRef: { name: 'gh-token' }, apiURL: pool.gh.url, hostReuse: 'reuse' };
  await pool.target(name, name, { github, maxHosts: 1, checkInterval: '30s' });
  const host = await waitFor(`${name}: its host Busy`, async () => {
    const t = await pool.get(name);
    const done = (t?.status?.receipts ?? []).some((r: any) => r.action === 'Launch' && r.phase === 'Done');
    return done ? t.status.hosts?.find((h: any) => h.state === 'Busy')?.name : undefined;
  }, 120_000, 500);
  // maxHosts 1: the second job waits for this host, and no check launches for it.
  const { jobIds } = pool.gh.queueRun(name, [{ labels }]);
  const runner = pool.runnersOf(name).find((r) => r.name === host)!;
  return { host, runnerID: runner.id, config: pool.configOn(host)!, waiting: jobIds[0]! };
}

async function killedDuringRegister(name: string, point: KillPoint, atKill: (host: string, finished: number, config: string, waiting: number) => void): Promise<{ host: string; finished: number; t0: number }> {
  const { host, runnerID: finished, config, waiting } = await busyHost(name);
  const t0 = Date.now();
  const hold = point.arm(name, t0);
  // The job ends: GitHub lists the runner offline, and the next check finds the host finished with a job waiting.
  await pool.finishJob(host);
  await waitFor(`${name}: the Register held`, async () => hold.hit(), 120_000, 100);
  await pool.controller.stop('SIGKILL');
  expect((await receipts(name)).map((r: any) => [r.action, r.phase])).toEqual([['Launch', 'Done'], ['Register', 'Intended']]);
  atKill(host, finished, config, waiting);
  hold.release();
  await pool.startController();
  return { host, finished, t0 };
}

/** After the restart: one runner online on the host, which took the waiting job; the receipt Done; nothing inserted, doubled or left. */
async function converged(name: string, host: string, finished: number, t0: number): Promise<void> {
  await waitFor(`${name}: the Register Done and the host's new runner on the waiting job`, async () => {
    const r = await receipts(name);
    const online = pool.runnersOf(name).filter((x) => x.status === 'online');
    return r.some((x: any) => x.action === 'Register' && x.phase === 'Done') && online.length === 1 && pool.jobs.filter((j) => j.host === host).length === 2;
  }, 180_000, 500);
  expect((await receipts(name)).map((r: any) => [r.action, r.phase])).toEqual([['Launch', 'Done'], ['Register', 'Done']]);
  const [runner, ...left] = pool.runnersOf(name);
  expect(left).toEqual([]);
  expect(runner).toMatchObject({ name: host, status: 'online' });
  expect(runner!.id).not.toBe(finished);
  expect(made(name)).toBe(1);
  expect(pool.vmsOf(name).map((v) => v.name)).toEqual([host]);
  // GitHub never refused a registration for a name already registered.
  expect(since(t0, 'generate-jitconfig').filter((r) => r.status === 409)).toEqual([]);
  // The finished runner's registration was removed once (a stalled removal was made all the same).
  expect(since(t0, 'delete-runner').filter((r) => r.path.endsWith(`/${finished}`) && (r.status === 204 || r.fault === 'stall'))).toHaveLength(1);
  await pool.must(['patch', 'runnertarget', name, '-n', pool.ns, '--type=merge', '-p', '{"spec":{"checkInterval":"1h"}}']);
}

describe('a reused host\'s Register across a controller SIGKILL', () => {
  it('killed with the receipt written, the last config still on the host: started again, the host gets one new runner', async () => {
    const name = 'rc-receipt';
    const point: KillPoint = {
      arm: (n) => {
        const hold = pool.holdCommand(n, 'rm -f');
        return { hit: hold.held, release: hold.release };
      },
    };
    const { host, finished, t0 } = await killedDuringRegister(name, point, (h, id, config) => {
      expect(pool.configOn(h)).toBe(config);
      expect(pool.runnersOf(name)).toEqual([expect.objectContaining({ id, status: 'offline' })]);
    });
    await converged(name, host, finished, t0);
  }, 420_000);

  it('killed with the receipt written, and the waiting job cancelled while no controller runs: the receipt settles and the host drains, leaving nothing', async () => {
    const name = 'rc-gone';
    const point: KillPoint = {
      arm: (n) => {
        const hold = pool.holdCommand(n, 'rm -f');
        return { hit: hold.held, release: hold.release };
      },
    };
    const { finished, t0 } = await killedDuringRegister(name, point, (_h, _id, _config, waiting) => pool.gh.completeJob(waiting, 'cancelled'));
    await waitFor(`${name}: every receipt Done, no VM, runner or host left`, async () => {
      const t = await pool.get(name);
      const settled = (t?.status?.receipts ?? []).every((x: any) => x.phase === 'Done');
      return settled && pool.vmsOf(name).length === 0 && pool.runnersOf(name).length === 0 && (t?.status?.hosts ?? []).length === 0;
    }, 180_000, 500);
    const r = await receipts(name);
    expect(r.filter((x: any) => x.phase !== 'Done')).toEqual([]);
    expect(r.filter((x: any) => ['Launch', 'Register'].includes(x.action)).map((x: any) => x.action)).toEqual(['Launch', 'Register']);
    expect(made(name)).toBe(1);
    expect(since(t0, 'generate-jitconfig').filter((x) => x.status === 409)).toEqual([]);
    expect(since(t0, 'delete-runner').filter((x) => x.path.endsWith(`/${finished}`) && x.status === 204)).toHaveLength(1);
    await pool.must(['patch', 'runnertarget', name, '-n', pool.ns, '--type=merge', '-p', '{"spec":{"checkInterval":"1h"}}']);
  }, 420_000);

  it('killed with the last config removed, the finished registration not yet: started again, the host gets one new runner', async () => {
    const name = 'rc-removed';
    const point: KillPoint = {
      arm: (_n, t0) => {
        pool.gh.fault({ op: 'delete-runner', mode: 'hang', times: 1 });
        return { hit: () => since(t0, 'delete-runner').some((r) => r.fault === 'hang'), release: () => undefined };
      },
    };
    const { host, finished, t0 } = await killedDuringRegister(name, point, (h, id) => {
      expect(pool.configOn(h)).toBeUndefined();
      expect(pool.runnersOf(name)).toEqual([expect.objectContaining({ id, status: 'offline' })]);
    });
    await converged(name, host, finished, t0);
  }, 420_000);

  it('killed with the finished registration removed, no new one made: started again, the host gets one new runner', async () => {
    const name = 'rc-deregistered';
    const point: KillPoint = {
      arm: (_n, t0) => {
        pool.gh.fault({ op: 'delete-runner', mode: 'stall', times: 1 });
        return { hit: () => since(t0, 'delete-runner').some((r) => r.fault === 'stall'), release: () => undefined };
      },
    };
    const { host, finished, t0 } = await killedDuringRegister(name, point, (h) => {
      expect(pool.configOn(h)).toBeUndefined();
      expect(pool.runnersOf(name)).toEqual([]);
    });
    await converged(name, host, finished, t0);
  }, 420_000);

  it('killed with the new registration made, its config not written: started again, that registration goes and one new runner comes', async () => {
    const name = 'rc-registered';
    const point: KillPoint = {
      arm: (_n, t0) => {
        pool.gh.fault({ op: 'generate-jitconfig', mode: 'stall', times: 1 });
        return { hit: () => since(t0, 'generate-jitconfig').some((r) => r.fault === 'stall'), release: () => undefined };
      },
    };
    let stale = 0;
    const { host, finished, t0 } = await killedDuringRegister(name, point, (h, id) => {
      expect(pool.configOn(h)).toBeUndefined();
      const [r, ...more] = pool.runnersOf(name);
      expect(more).toEqual([]);
      expect(r).toMatchObject({ name: h, status: 'offline' });
      expect(r!.id).not.toBe(id);
      stale = r!.id;
    });
    await converged(name, host, finished, t0);
    expect(pool.runnersOf(name)[0]!.id).not.toBe(stale);
    expect(since(t0, 'delete-runner').filter((r) => r.path.endsWith(`/${stale}`) && r.status === 204)).toHaveLength(1);
  }, 420_000);

  it('killed with the new config written, its runner not started: started again, that runner is left to start and settles the receipt', async () => {
    const name = 'rc-written';
    let runners: { release(): void } | undefined;
    let old = '';
    const point: KillPoint = {
      arm: (n) => {
        runners = pool.holdRunners(n);
        const host = pool.vmsOf(n)[0]!.name;
        old = pool.configOn(host)!;
        return { hit: () => ![undefined, old].includes(pool.configOn(host)), release: () => undefined };
      },
    };
    let registered = 0;
    const { host, finished, t0 } = await killedDuringRegister(name, point, (h, id) => {
      const [r, ...more] = pool.runnersOf(name);
      expect(more).toEqual([]);
      expect(r).toMatchObject({ name: h, status: 'offline' });
      expect(r!.id).not.toBe(id);
      registered = r!.id;
    });
    // The runner starts only once the new controller has looked at the host: its config must not be replaced meanwhile.
    const checked = (await pool.get(name)).status.lastCheckAt;
    await waitFor(`${name}: a check by the new controller`, async () => (await pool.get(name))?.status?.lastCheckAt !== checked, 120_000, 500);
    const written = pool.configOn(host);
    runners!.release();
    await converged(name, host, finished, t0);
    expect(pool.runnersOf(name)[0]!.id).toBe(registered);
    expect(pool.configOn(host)).toBe(written);
    expect(since(t0, 'generate-jitconfig').filter((r) => r.status === 201)).toHaveLength(1);
    expect(old).not.toBe(written);
  }, 420_000);
});
