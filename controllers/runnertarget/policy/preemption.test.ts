import { describe, expect, it } from '@jest/globals';
import type { Receipt, RunnerTargetStatus } from '../../../src/api/index.js';
import type { Observation } from '../observation.js';
import { planCheck, plannedStatus } from './plan.js';
import { cutJobs, RERUN_GIVE_UP_MS, rerunIntents, rerunStep, type RunState } from './preemption.js';
import { openReceipts } from './receipts.js';
import { abandonLaunches } from './teardown.js';
import { NOW, ago, host, job, runner, spec, vm } from '../testing/pool.js';

const rerunSpec = { ...spec, github: { ...spec.github, rerunPreemptedJobs: true } };
const onA = (over = {}) => job('in_progress', ['self-hosted'], { runnerName: 'a', runId: 77, runAttempt: 1, ...over });

describe('cutJobs: what a preemption cut', () => {
  it.each<[string, Parameters<typeof cutJobs>, string[]]>([
    ['a job GitHub lists in progress on the preempted runner', [['a'], [host('a', 'Busy')], [onA()]], ['a:job']],
    ['the same when status still said Idle (the busy flag lags)', [['a'], [host('a', 'Idle')], [onA()]], ['a:job']],
    ['a Busy host whose job GitHub no longer lists: counted, no job to re-run', [['a'], [host('a', 'Busy')], []], ['a:?']],
    ['an idle host with no job: nothing cut', [['a'], [host('a', 'Idle')], []], []],
    ['a job on a host that was not preempted: nothing cut', [['b'], [host('a', 'Busy'), host('b', 'Idle')], [onA()]], []],
    ['a queued job never ran anywhere', [['a'], [host('a', 'Idle')], [job('queued', ['self-hosted'], { runId: 77 })]], []],
  ])('%s', (_what, args, want) => {
    expect(cutJobs(...args).map((c) => `${c.host}:${c.job ? 'job' : '?'}`)).toEqual(want);
  });
});

describe('rerunIntents: when a cut job is re-run', () => {
  const j = onA();
  it.each<[string, Parameters<typeof rerunIntents>, number]>([
    ['rerunPreemptedJobs false (the default): never', [[{ host: 'a', job: j }], spec, []], 0],
    ['rerunPreemptedJobs true: one receipt for the run', [[{ host: 'a', job: j }], rerunSpec, []], 1],
    ['two jobs of one run on two hosts: one receipt', [[{ host: 'a', job: j }, { host: 'b', job: onA({ runnerName: 'b' }) }], rerunSpec, []], 1],
    ['no job known (a Busy host only): nothing to re-run', [[{ host: 'a' }], rerunSpec, []], 0],
    [
      'a receipt for this run attempt exists already (even settled): never twice',
      [[{ host: 'a', job: j }], rerunSpec, [{ id: 'rerun-1', action: 'Rerun', phase: 'Done', at: ago(60), hosts: ['x'], repository: j.repository, runId: 77, runAttempt: 1 }]],
      0,
    ],
    [
      'the re-run attempt is cut again: a new receipt for the new attempt',
      [[{ host: 'a', job: onA({ runAttempt: 2 }) }], rerunSpec, [{ id: 'rerun-1', action: 'Rerun', phase: 'Done', at: ago(60), hosts: ['x'], repository: j.repository, runId: 77, runAttempt: 1 }]],
      1,
    ],
  ])('%s', (_what, args, n) => {
    const out = rerunIntents(...args);
    expect(out).toHaveLength(n);
    if (n) expect(out[0]).toMatchObject({ action: 'Rerun', repository: 'swack-tools/oxidex', runId: 77 });
  });
});

describe('rerunStep: an open Rerun receipt', () => {
  const receipt: Receipt = { id: 'rerun-1', action: 'Rerun', phase: 'Intended', at: ago(600), hosts: ['a'], repository: 'swack-tools/oxidex', runId: 77, runAttempt: 1 };
  const run = (status: string, conclusion: string | null, runAttempt = 1): RunState => ({ status, conclusion, runAttempt });
  it.each<[string, RunState | undefined, number, string]>([
    ['the run still goes (GitHub refuses a re-run then): wait', run('in_progress', null), NOW, 'wait'],
    ['the run concluded as failure: re-run', run('completed', 'failure'), NOW, 'rerun'],
    ['a later attempt exists (our answer was lost, or someone re-ran it): done, never again', run('completed', 'failure', 2), NOW, 'done'],
    ['a later attempt is running: done', run('in_progress', null, 2), NOW, 'done'],
    ['the run concluded as success (another runner finished it): nothing to re-run', run('completed', 'success'), NOW, 'done'],
    ['the run is gone: give up', undefined, NOW, 'giveUp'],
    ['still going after the bound: give up', run('in_progress', null), NOW + RERUN_GIVE_UP_MS, 'giveUp'],
    ['concluded as failure but only after the bound: give up', run('completed', 'failure'), NOW + RERUN_GIVE_UP_MS, 'giveUp'],
  ])('%s', (_what, r, now, step) => {
    expect(rerunStep(receipt, r, now).step).toBe(step);
  });
});

describe('a check that finds a busy host preempted', () => {
  const observation = (over: Partial<Observation> = {}): Observation => ({ at: NOW, jobs: [], runners: [], vms: [], probes: new Map(), ...over });
  const status: RunnerTargetStatus = { hosts: [host('a', 'Busy'), host('f', 'Idle')], preemptedJobs: 3 };
  const seen = observation({ vms: [vm('f')], runners: [runner('a', true), runner('f')], jobs: [onA()] });

  it('says so in a Warning naming the job, run and host, and counts it with the host\'s removal', () => {
    const p = planCheck({ name: 'pool', spec, status, observation: seen });
    const e = p.events.find((x) => x.reason === 'PreemptedJob')!;
    expect(e.type).toBe('Warning');
    expect(e.message).toMatch(/job \d+ of workflow run 77 in swack-tools\/oxidex was running on host a .*set spec.github.rerunPreemptedJobs/);
    const next = plannedStatus(status, p);
    expect(next.preemptedJobs).toBe(4);
    expect(next.hosts!.map((h) => h.name)).toEqual(['f']);
    expect(openReceipts(next.receipts)).toEqual([]);
  });

  it('with rerunPreemptedJobs, writes one Intended Rerun receipt in that same status, and the ghost runner is still removed', () => {
    const p = planCheck({ name: 'pool', spec: rerunSpec, status, observation: seen });
    const next = plannedStatus(status, p);
    expect(openReceipts(next.receipts)).toEqual([expect.objectContaining({ action: 'Rerun', hosts: ['a'], runId: 77, runAttempt: 1 })]);
    expect(p.changes.map((c) => c.kind)).toContain('removeRunner');
    // The next check, with the host gone from status: the receipt is resumed, nothing is counted or intended again.
    const later = planCheck({ name: 'pool', spec: rerunSpec, status: next, observation: observation({ at: NOW + 60_000, vms: [vm('f')], runners: [runner('f')], jobs: [onA()] }) });
    expect(later.preemptedJobs).toBe(0);
    expect(later.reruns).toEqual([]);
    expect(later.changes.filter((c) => c.kind === 'resume').map((c) => (c.kind === 'resume' ? c.receipt.action : ''))).toEqual(['Rerun']);
    expect(plannedStatus(next, later).preemptedJobs).toBe(4);
  });

  it('a target being deleted settles its open Rerun receipts Failed, so its finalizer does not wait a day', () => {
    const p = planCheck({ name: 'pool', spec: rerunSpec, status, observation: seen });
    const receipts = plannedStatus(status, p).receipts;
    const out = abandonLaunches(receipts, { at: NOW, vms: [], runners: [] }, NOW);
    expect(openReceipts(out.receipts)).toEqual([]);
    expect(out.events.map((e) => e.reason)).toEqual(['RerunAbandoned']);
  });
});
