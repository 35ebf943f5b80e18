// A spot host preempted while its runner runs a job: the check says so
// (a PreemptedJob Warning naming the job, its run and the host) and counts
// it in status.preemptedJobs; with spec.github.rerunPreemptedJobs the run's
// failed jobs are re-run exactly once, after GitHub failed the lost job and
// the run completed, however many checks follow.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { startRunnerTargetPool, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtpreempt');
  // GitHub fails a lost runner's job after some minutes; seconds here, still several checks after the preemption.
  pool.gh.lostRunnerFailMs = 15_000;
});

afterAll(async () => {
  await pool?.stop();
});

describe('a preemption that cuts a job', () => {
  it('is reported and counted, and with rerunPreemptedJobs the run is re-run exactly once', async () => {
    const { gh, gce } = pool;
    const { runId, jobIds } = gh.queueRun('cut', [{ labels: ['self-hosted', 'linux'] }]);
    const github = { org: gh.org, repositories: [`${gh.org}/cut`], tokenSecretRef: { name: 'gh-token' }, apiURL: gh.url, rerunPreemptedJobs: true };
    await pool.target('cut', 'cut', { checkInterval: '50s', maxHosts: 1, github });
    const idle = await waitFor('the host Idle', async () => (await pool.get('cut'))?.status?.hosts?.find((h: any) => h.state === 'Idle'), 120_000, 500);
    expect(pool.takeJob(idle.name)?.jobId).toBe(jobIds[0]);
    await waitFor('the host Busy', async () => (await pool.get('cut'))?.status?.hosts?.find((h: any) => h.state === 'Busy'), 60_000, 500);

    gce.preempt(idle.zone, idle.name);
    const cut = await waitFor('the PreemptedJob event', async () => (await pool.events('cut')).find((e) => e.reason === 'PreemptedJob'), 60_000, 500);
    expect(cut.type).toBe('Warning');
    expect(cut.message).toContain(`job ${jobIds[0]} of workflow run ${runId}`);
    expect(cut.message).toContain(idle.name);
    const t = await pool.get('cut');
    expect(t.status.preemptedJobs).toBe(1);
    // The intent is in status before GitHub could be asked: the run is still in progress.
    expect(t.status.receipts.filter((r: any) => r.action === 'Rerun')).toEqual([expect.objectContaining({ runId, runAttempt: 1, hosts: [idle.name] })]);

    const done = await waitFor('the Rerun receipt Done', async () => (await pool.get('cut'))?.status?.receipts?.find((r: any) => r.action === 'Rerun' && r.phase === 'Done'), 120_000, 500);
    expect(done.message).toContain(`workflow run ${runId}`);
    expect(gh.runs().find((r) => r.id === runId)?.run_attempt).toBe(2);
    expect((await pool.events('cut')).some((e) => e.reason === 'JobsRerun')).toBe(true);

    // Three checks more: no second re-run, no second count.
    const since = Date.now();
    await waitFor('three more checks', async () => Date.parse((await pool.get('cut'))?.status?.lastCheckAt ?? '') > since + 15_000, 90_000, 1000);
    expect(gh.mutations.filter((m) => m.op === 'rerun-failed-jobs').map((m) => m.status)).toEqual([201]);
    const after = await pool.get('cut');
    expect(after.status.preemptedJobs).toBe(1);
    expect(after.status.receipts.filter((r: any) => r.action === 'Rerun')).toHaveLength(1);
  }, 480_000);
});
