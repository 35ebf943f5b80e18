// Jobs a spot preemption cut, and their one re-run. A cut job is one GitHub
// lists in progress on the preempted host's runner, or, when GitHub no
// longer lists it (it failed already), the job the host was Busy with. With
// spec.github.rerunPreemptedJobs its workflow run gets a Rerun receipt in
// the same status write that removes the host, so the preemption is counted
// and its re-run intended exactly once; the receipt is acted on when the run
// has concluded (GitHub refuses to re-run a run in progress).
import type { Receipt, RunnerHost, RunnerTargetSpec } from '../../../src/api/index.js';
import type { WorkflowJob } from '../observation.js';
import type { Intent } from './receipts.js';

/** How long a Rerun receipt waits for its run to conclude before it gives up. */
export const RERUN_GIVE_UP_MS = 24 * 3_600_000;

export interface CutJob {
  host: string;
  /** Absent when the host was Busy but GitHub lists no job on its runner any more. */
  job?: WorkflowJob | undefined;
}

/** The jobs the preemption of `preempted` cut; `before` is status.hosts as the check read it. */
export function cutJobs(preempted: readonly string[], before: readonly RunnerHost[], jobs: readonly WorkflowJob[]): CutJob[] {
  const out: CutJob[] = [];
  for (const host of preempted) {
    const on = jobs.filter((j) => j.runnerName === host && j.status === 'in_progress');
    if (on.length > 0) out.push(...on.map((job) => ({ host, job })));
    else if (before.find((h) => h.name === host)?.state === 'Busy') out.push({ host });
  }
  return out;
}

/**
 * One Rerun intent per workflow run attempt a cut job belongs to, when the
 * spec asks for re-runs; none for a run attempt a receipt (of any phase)
 * names already, so a run is never re-run twice for one preemption.
 */
export function rerunIntents(cut: readonly CutJob[], spec: Pick<RunnerTargetSpec, 'github'>, receipts: readonly Receipt[] | undefined): Intent[] {
  if (!spec.github.rerunPreemptedJobs) return [];
  const known = new Set((receipts ?? []).filter((r) => r.action === 'Rerun').map((r) => `${r.repository}#${r.runId}#${r.runAttempt ?? 1}`));
  const byRun = new Map<string, Intent>();
  for (const { host, job } of cut) {
    if (!job || job.runId === undefined) continue;
    const key = `${job.repository}#${job.runId}#${job.runAttempt ?? 1}`;
    if (known.has(key)) continue;
    const intent = byRun.get(key);
    if (intent) {
      if (!intent.hosts.includes(host)) intent.hosts.push(host);
      continue;
    }
    byRun.set(key, {
      action: 'Rerun',
      hosts: [host],
      repository: job.repository,
      runId: job.runId,
      runAttempt: job.runAttempt ?? 1,
      message: `job ${job.id} was cut by the preemption of ${host}; its failed jobs are re-run once the run concludes`,
    });
  }
  return [...byRun.values()];
}

/** The event that says what a preemption cut. */
export function cutJobMessage({ host, job }: CutJob, rerun: boolean): string {
  if (!job) return `host ${host} was running a job when its spot VM was preempted; GitHub no longer lists a job on its runner, so it is not re-run`;
  const what = `job ${job.id} of workflow run ${job.runId ?? '?'} in ${job.repository} was running on host ${host} when its spot VM was preempted`;
  return rerun ? `${what}; its failed jobs are re-run once, after the run concludes` : `${what}; set spec.github.rerunPreemptedJobs to true to have it re-run`;
}

/** A workflow run as the Rerun step reads it. */
export interface RunState {
  status: string;
  conclusion: string | null;
  runAttempt?: number | undefined;
}

export type RerunStep =
  /** Ask GitHub to re-run the failed jobs. */
  | { step: 'rerun'; message: string }
  /** The run was re-run already, or has nothing to re-run: settle Done. */
  | { step: 'done'; message: string }
  /** The run is still going: look again at the next check. */
  | { step: 'wait'; message: string }
  /** Settle Failed: the run is gone, or did not conclude within the bound. */
  | { step: 'giveUp'; message: string };

/** What to do with an open Rerun receipt, from the run as GitHub shows it now (undefined: not found). */
export function rerunStep(receipt: Receipt, run: RunState | undefined, now: number, giveUpMs = RERUN_GIVE_UP_MS): RerunStep {
  const name = `workflow run ${receipt.runId} in ${receipt.repository}`;
  if (!run) return { step: 'giveUp', message: `${name} is not found (deleted, or the token cannot see it); it is not re-run` };
  // A later attempt is the re-run (ours, whose answer was lost, or someone's): a second request would re-run it twice.
  if ((run.runAttempt ?? 1) > (receipt.runAttempt ?? 1)) return { step: 'done', message: `${name} was re-run already (attempt ${run.runAttempt})` };
  if (!(now - Date.parse(receipt.at) < giveUpMs)) {
    return { step: 'giveUp', message: `${name} did not conclude as failure within ${giveUpMs / 3_600_000} h of the preemption (now ${run.status}${run.conclusion ? `, ${run.conclusion}` : ''}); it is not re-run` };
  }
  if (run.status !== 'completed') return { step: 'wait', message: `${name} is ${run.status}; its failed jobs are re-run once it concludes` };
  if (run.conclusion !== 'failure') return { step: 'done', message: `${name} concluded ${run.conclusion ?? 'without a conclusion'}; nothing to re-run` };
  return { step: 'rerun', message: `${name} concluded as failure: re-running its failed jobs` };
}
