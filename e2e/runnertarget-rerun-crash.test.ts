// The re-run of a job a spot preemption cut, with the controller SIGKILLed
// at either side of the request to GitHub. Killed once GitHub has acted on
// `rerun-failed-jobs` but before the answer came back (so before the Rerun
// receipt was written Done), the controller started again finds the run's
// later attempt and settles the receipt Done without asking again, even
// though that attempt has failed too. Killed with the receipt written but
// the request not yet acted on, it asks once after the restart. Either way
// the run ends with two attempts, never three, and no VM or runner is left.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { startRunnerTargetPool, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtreruncrash');
  // GitHub fails a lost runner's job after minutes; seconds here, still some checks after the preemption.
  pool.gh.lostRunnerFailMs = 10_000;
}, 120_000);

afterAll(async () => {
  await pool?.stop();
});

const JOB = [{ labels: ['self-hosted', 'linux'] }];
const reruns = async (name: string) => ((await pool.get(name))?.status?.receipts ?? []).filter((r: any) => r.action === 'Rerun');
const attemptOf = (runId: number) => pool.gh.runs().find((r) => r.id === runId)?.run_attempt;
/** The re-run requests GitHub got for run `runId`: [status, fault] each, in order (status 0: never answered). */
const rerunRequests = (runId: number) => pool.gh.requests.filter((r) => r.op === 'rerun-failed-jobs' && r.path.includes(`/runs/${runId}/`)).map((r) => [r.status, r.fault]);

/**
 * A target following `repo` with re-runs on, one host busy with the run's
 * only job, then preempted: returns once the Rerun receipt is in status.
 */
async function preemptedWithJob(name: string): Promise<{ runId: number; host: string }> {
  const { gh, gce } = pool;
  const { runId, jobIds } = gh.queueRun(name, JOB);
  const github = { org: gh.org, repositories: [`${gh.org}/${name}`], tokenSecretRef: { name: 'gh-token' }, apiURL: gh.url, rerunPreemptedJobs: true };
  await pool.target(name, name, { checkInterval: '50s', maxHosts: 1, github });
  const idle = await waitFor(`${name}: the host Idle`, async () => (await pool.get(name))?.status?.hosts?.find((h: any) => h.state === 'Idle'), 120_000, 500);
  expect(pool.takeJob(idle.name)?.jobId).toBe(jobIds[0]);
  await waitFor(`${name}: the host Busy`, async () => (await pool.get(name))?.status?.hosts?.find((h: any) => h.state === 'Busy'), 60_000, 500);
  gce.preempt(idle.zone, idle.name);
  await waitFor(`${name}: the Rerun receipt`, async () => (await reruns(name)).length > 0, 60_000, 500);
  expect(await reruns(name)).toEqual([expect.objectContaining({ phase: 'Intended', runId, runAttempt: 1, hosts: [idle.name] })]);
  return { runId, host: idle.name };
}

/** Three checks after now: enough for a controller that would re-run twice to have done so. */
async function threeChecks(name: string): Promise<void> {
  const since = Date.now();
  await waitFor(`${name}: three more checks`, async () => Date.parse((await pool.get(name))?.status?.lastCheckAt ?? '') > since + 15_000, 90_000, 1000);
}

/** Nothing of target `name` left: no VM, no runner registration, no host in status. */
async function nothingLeft(name: string): Promise<void> {
  await waitFor(`${name}: no VM, runner or host left`, async () => {
    const t = await pool.get(name);
    return pool.vmsOf(name).length === 0 && pool.runnersOf(name).length === 0 && (t?.status?.hosts ?? []).length === 0;
  }, 180_000, 1000);
}

describe('a preempted job re-run across a controller SIGKILL', () => {
  it('killed after GitHub re-ran the run, before the receipt was written Done: started again, it settles Done from the later attempt and never asks again', async () => {
    const { gh } = pool;
    // GitHub acts on the re-run and never answers: the controller waits for the answer when it dies.
    gh.fault({ op: 'rerun-failed-jobs', mode: 'stall', times: 1 });
    const { runId } = await preemptedWithJob('sent');
    await waitFor('the re-run request stalled at GitHub', async () => rerunRequests(runId).length > 0, 120_000, 100);
    await pool.controller.stop('SIGKILL');

    expect(rerunRequests(runId)).toEqual([[0, 'stall']]);
    expect(attemptOf(runId)).toBe(2);
    expect(await reruns('sent')).toEqual([expect.objectContaining({ phase: 'Intended' })]);
    // The re-run fails as well while no controller runs: the run is completed as failure once more, which a
    // controller that did not count its attempts would take for the one it was asked to re-run.
    const again = gh.jobs().find((j) => j.run_id === runId && j.run_attempt === 2)!;
    gh.completeJob(again.id, 'failure');
    expect(gh.runs().find((r) => r.id === runId)).toMatchObject({ status: 'completed', conclusion: 'failure', run_attempt: 2 });

    await pool.startController();
    const done = await waitFor('the Rerun receipt Done', async () => (await reruns('sent')).find((r: any) => r.phase === 'Done'), 120_000, 500);
    expect(done.message).toContain(`workflow run ${runId}`);
    expect(done.message).toContain('attempt 2');
    expect((await pool.events('sent')).some((e) => e.reason === 'RerunSettled')).toBe(true);

    await threeChecks('sent');
    expect(rerunRequests(runId)).toEqual([[0, 'stall']]);
    expect(attemptOf(runId)).toBe(2);
    const t = await pool.get('sent');
    expect(t.status.receipts.filter((r: any) => r.action === 'Rerun')).toEqual([expect.objectContaining({ id: done.id, phase: 'Done' })]);
    expect(t.status.preemptedJobs).toBe(1);
    await nothingLeft('sent');
  }, 480_000);

  it('killed with the receipt written, before GitHub acted on the request: started again, it asks once, and the re-run job runs on a new host', async () => {
    const { gh } = pool;
    // The request reaches GitHub and is never acted on: the re-run has not happened when the controller dies.
    gh.fault({ op: 'rerun-failed-jobs', mode: 'hang', times: 1 });
    const { runId, host } = await preemptedWithJob('unsent');
    await waitFor('the re-run request hanging at GitHub', async () => rerunRequests(runId).length > 0, 120_000, 100);
    await pool.controller.stop('SIGKILL');

    expect(attemptOf(runId)).toBe(1);
    expect(gh.runs().find((r) => r.id === runId)).toMatchObject({ status: 'completed', conclusion: 'failure' });
    expect(await reruns('unsent')).toEqual([expect.objectContaining({ phase: 'Intended' })]);

    await pool.startController();
    const done = await waitFor('the Rerun receipt Done', async () => (await reruns('unsent')).find((r: any) => r.phase === 'Done'), 120_000, 500);
    expect(done.message).toContain(`workflow run ${runId}`);
    expect((await pool.events('unsent')).some((e) => e.reason === 'JobsRerun')).toBe(true);
    expect(rerunRequests(runId)).toEqual([[0, 'hang'], [201, undefined]]);
    expect(attemptOf(runId)).toBe(2);

    // The re-run job brings up a host of its own, which runs it to the end; then the pool drains to its floor.
    const fresh = await waitFor('a new host Idle', async () => (await pool.get('unsent'))?.status?.hosts?.find((h: any) => h.state === 'Idle' && h.name !== host), 120_000, 500);
    const again = gh.jobs().find((j) => j.run_id === runId && j.run_attempt === 2)!;
    expect(pool.takeJob(fresh.name)?.jobId).toBe(again.id);
    await pool.finishJob(fresh.name);
    expect(gh.runs().find((r) => r.id === runId)).toMatchObject({ status: 'completed', conclusion: 'success', run_attempt: 2 });

    await threeChecks('unsent');
    expect(rerunRequests(runId)).toEqual([[0, 'hang'], [201, undefined]]);
    expect(attemptOf(runId)).toBe(2);
    expect((await reruns('unsent')).map((r: any) => r.phase)).toEqual(['Done']);
    await nothingLeft('unsent');
  }, 480_000);
});
