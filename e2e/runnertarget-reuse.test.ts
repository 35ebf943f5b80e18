// spec.github.hostReuse against the emulators: the same queue of short jobs
// run by an ephemeral pool (one VM per job) and by a reusing one, whose hosts
// get a new just-in-time runner over SSH after each job while jobs wait.
// Each target follows its own repository, and its jobs ask for a label of
// its own, so that neither's runners take the other's jobs.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { startRunnerTargetPool, type RunnerTargetPool } from './support/runnertarget.js';

const JOBS = 6;
const JOB_MS = 1_000;

let pool: RunnerTargetPool;
/** Targets whose runners take a job the moment they start and finish it at once. */
const atStart = new Set<string>();

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtreuse');
  // Every runner a host starts takes the oldest job it fits, which ends JOB_MS later, as a short CI job would, once a
  // check has seen it online (its receipt settled). For the targets named in `atStart` it takes the job the moment
  // it starts and finishes it at once: the config lands between checks (the boot watch), so a job of JOB_MS could
  // still be running when the launch's follow-up check lists the runners.
  pool.onRunner = (host) => {
    const target = host.slice(0, host.lastIndexOf('-'));
    if (atStart.has(target)) {
      if (pool.takeJob(host)) void pool.finishJob(host);
      return;
    }
    const take = () => {
      if (pool.takeJob(host)) setTimeout(() => void pool.finishJob(host), JOB_MS);
    };
    void waitFor(`a check saw the runner of ${host}`, async () => {
      const t = await pool.get(target);
      return !(t?.status?.receipts ?? []).some((r: any) => r.phase === 'Intended' && r.hosts.includes(host));
    }, 60_000, 200).then(take);
  };
});

afterAll(async () => {
  await pool?.quiet().catch(() => undefined);
  await pool?.stop();
});

const github = (name: string, hostReuse: string) => ({ org: pool.gh.org, repositories: [`${pool.gh.org}/${name}`], labels: [name], tokenSecretRef: { name: 'gh-token' }, apiURL: pool.gh.url, hostReuse });
const made = (name: string) => pool.gce.inserts().filter((r) => r.name.startsWith(`${name}-`) && !r.refused).length;
const jobsOf = (name: string) => pool.jobs.filter((j) => j.host.startsWith(`${name}-`));

async function runQueue(name: string, hostReuse: 'ephemeral' | 'reuse'): Promise<{ inserts: number; perHost: number[]; events: string[] }> {
  pool.gh.queueRun(name, Array.from({ length: JOBS }, () => ({ labels: ['self-hosted', 'linux', name] })));
  await pool.target(name, name, { github: github(name, hostReuse), maxHosts: 2, checkInterval: '30s' });
  await waitFor(`${JOBS} jobs of ${name} ended`, async () => jobsOf(name).filter((j) => j.endedAt !== undefined).length >= JOBS, 240_000, 500);
  const perHost = new Map<string, number>();
  for (const j of jobsOf(name)) perHost.set(j.host, (perHost.get(j.host) ?? 0) + 1);
  const events = (await pool.events(name)).map((e: any) => e.reason as string);
  return { inserts: made(name), perHost: [...perHost.values()], events };
}

describe('RunnerTarget host reuse', () => {
  it('the same six short jobs take fewer VM inserts with hostReuse reuse than ephemeral, and only reuse runs two jobs on one VM', async () => {
    const [ephemeral, reuse] = await Promise.all([runQueue('eph', 'ephemeral'), runQueue('reu', 'reuse')]);
    // Ephemeral: every job had a VM of its own.
    expect(ephemeral.perHost.every((n) => n === 1)).toBe(true);
    expect(ephemeral.inserts).toBeGreaterThanOrEqual(JOBS);
    expect(ephemeral.events).not.toContain('HostReused');
    // Reuse: hosts took job after job, with a new runner each time.
    expect(reuse.events).toContain('HostReused');
    expect(Math.max(...reuse.perHost)).toBeGreaterThanOrEqual(2);
    expect(reuse.inserts).toBeLessThan(ephemeral.inserts);
    // No host ever ran two jobs at once: each job ended before the next on its host began.
    for (const host of new Set(jobsOf('reu').map((j) => j.host))) {
      const runs = jobsOf('reu').filter((j) => j.host === host);
      for (let i = 1; i < runs.length; i++) expect(runs[i]!.startedAt).toBeGreaterThanOrEqual(runs[i - 1]!.endedAt!);
    }
  }, 300_000);

  it('ephemeral keeps one job per VM when each job ends before any check has seen its runner online', async () => {
    atStart.add('fast');
    const fast = await runQueue('fast', 'ephemeral');
    expect(fast.perHost.every((n) => n === 1)).toBe(true);
    expect(fast.inserts).toBeGreaterThanOrEqual(JOBS);
    expect(fast.events).toContain('RunnerLeft');
  }, 300_000);
});
