// A RunnerTarget being deleted keeps its finalizer until its pool is gone
// and every receipt is settled: its checks plan as if no job waited (floor
// and maxHosts 0), so idle hosts drain the usual way (runner removed, no job
// process found, then the VM deleted) and a busy host stays until its job
// ends. Nothing is launched and no launch is continued: an open Launch
// receipt settles from what the check sees, so that deletion never waits on
// a launch that will not be finished. A VM that never got a runner is
// deleted at once, since no job can run there; a runner registered but not
// online is removed first and its host drained, since it may come online.
import type { RunnerTargetSpec, RunnerTargetStatus } from '../../../src/api/index.js';
import { vmPhase, type Observation } from '../observation.js';
import type { Change, CheckPlan, PlanEvent } from './plan.js';
import { openReceipts, settled, type Receipt } from './receipts.js';

/** Kept on a RunnerTarget until none of its VMs and runner registrations is left. */
export const RUNNER_HOSTS_FINALIZER = 'leasehold.dev/runner-hosts';

/** The spec a teardown check plans with: no job counts, no host is wanted. */
export function teardownSpec(spec: RunnerTargetSpec): RunnerTargetSpec {
  return { ...spec, floor: 0, maxHosts: 0, github: { ...spec.github, repositories: [] } };
}

/**
 * Past this long after a launch's receipt, and after the deletion began, an
 * insert whose VM never appeared cannot land any more: no teardown check
 * repeats it, the check that last sent it has ended (the check lease), and
 * its request gave up after 30 s.
 */
export const ABANDON_AFTER_MS = 2 * 60_000;

export interface Abandoned {
  receipts: Receipt[];
  events: PlanEvent[];
}

/**
 * Each open Launch receipt of a target being deleted, settled from this
 * check's look: Done once its runner is online (the host then drains with
 * the rest), Failed once its VM exists (deleted or drained below) or once
 * no VM can appear any more; left open only while an insert may still land.
 */
export function abandonLaunches(receipts: readonly Receipt[] | undefined, observation: Pick<Observation, 'vms' | 'runners' | 'at' | 'unreachableZones'>, deletingSince: number, abandonAfterMs = ABANDON_AFTER_MS): Abandoned {
  let list = [...(receipts ?? [])];
  const events: PlanEvent[] = [];
  for (const r of openReceipts(list)) {
    // A re-run waits for its run up to a day; a pool being deleted does not wait for it.
    if (r.action === 'Rerun') {
      const message = `the RunnerTarget is being deleted: workflow run ${r.runId} in ${r.repository} is not re-run`;
      list = settled(list, r.id, 'Failed', message) ?? list;
      events.push({ type: 'Normal', reason: 'RerunAbandoned', message: `receipt ${r.id}: ${message}` });
      continue;
    }
    if (r.action !== 'Launch') continue;
    const name = r.hosts[0] ?? '';
    const runner = observation.runners.find((x) => x.name === name);
    const vm = observation.vms.find((v) => v.name === name);
    const since = Math.max(Date.parse(r.at), Number.isFinite(deletingSince) ? deletingSince : 0);
    let phase: 'Done' | 'Failed';
    let message: string;
    if (runner?.status === 'online') {
      phase = 'Done';
      message = `runner ${name} registered; the RunnerTarget is being deleted, so the host drains with the rest of the pool`;
    } else if (vm) {
      phase = 'Failed';
      message = `the RunnerTarget is being deleted: the launch of ${name} is abandoned and its VM (${vm.status}) removed`;
    } else if (r.zone && observation.unreachableZones?.includes(r.zone)) {
      // Its zone went unread this check: the VM may be there.
      continue;
    } else if (observation.at - since >= abandonAfterMs) {
      phase = 'Failed';
      message = `the RunnerTarget is being deleted: the launch of ${name} is abandoned; no VM appeared within ${abandonAfterMs / 1000} s`;
    } else continue;
    list = settled(list, r.id, phase, message) ?? list;
    events.push({ type: 'Normal', reason: 'LaunchAbandoned', message: `receipt ${r.id}: ${message}` });
  }
  return { receipts: list, events };
}

export function teardownPlan(base: CheckPlan, observation: Pick<Observation, 'vms' | 'runners' | 'unreachableZones'>): CheckPlan {
  const changes: Change[] = base.changes.filter((c) => c.kind !== 'launch' && c.kind !== 'register' && !(c.kind === 'resume' && c.receipt.action === 'Launch'));
  const touched = new Set(changes.flatMap((c) => (c.kind === 'resume' ? c.receipt.hosts : c.intent.hosts)));
  const runners = new Map(observation.runners.map((r) => [r.name, r]));
  const known = new Map(base.hosts.map((h) => [h.name, h]));
  for (const vm of observation.vms) {
    const host = known.get(vm.name);
    const runner = runners.get(vm.name);
    // Leaving VMs are on their way out already; an unknown status is left alone, as everywhere.
    if (touched.has(vm.name) || vmPhase(vm) === 'leaving' || vmPhase(vm) === 'unknown') continue;
    if (runner) {
      // A registration not online (a config delivered, a runner not started, a runner gone offline) may come
      // online and take a job: it is removed, and the host then drains, SSH confirming no job before the delete.
      if (runner.status === 'online' || runner.busy || host?.state === 'Draining' || host?.state === 'Busy') continue;
      changes.push({ kind: 'deregister', intent: { action: 'Deregister', hosts: [vm.name], message: 'the RunnerTarget is being deleted and this runner is not online' }, runnerID: runner.id });
      continue;
    }
    // A host that had a runner may still run its job: it drains (SSH) instead.
    if (host?.state === 'Draining' || host?.runnerID !== undefined) continue;
    changes.push({ kind: 'delete', intent: { action: 'Delete', hosts: [vm.name], zone: vm.zone, message: 'the RunnerTarget is being deleted and this VM has no runner' }, reason: 'Orphan' });
  }
  // A Launching host leaves status only once its zone could be listed without its VM: one unseen may still run.
  const hosts = base.hosts.filter((h) => h.state !== 'Launching' || observation.vms.some((v) => v.name === h.name) || (observation.unreachableZones ?? []).includes(h.zone));
  return { ...base, hosts, changes, plan: { ...base.plan, launch: 0, reason: `the RunnerTarget is being deleted: its hosts drain and go; ${base.plan.reason}` } };
}

/** Nothing of the pool is left, no zone went unread and no change may still land: the finalizer may go. */
export const poolGone = (observation: Pick<Observation, 'vms' | 'runners' | 'unreachableZones'>, receipts?: readonly Receipt[]) =>
  observation.vms.length === 0 && observation.runners.length === 0 && (observation.unreachableZones ?? []).length === 0 && openReceipts(receipts).length === 0;

/**
 * Whether a deleted target's status shows nothing a teardown would have to
 * undo: no host, no Launch receipt and no change still open. Every VM is
 * launched under a receipt written before the insert, so such a target has
 * no VM and no runner anywhere, and its finalizer may go without asking
 * either provider (which a refused target could not do anyway).
 */
export function nothingLaunched(status: Pick<RunnerTargetStatus, 'hosts' | 'receipts'> | undefined): boolean {
  return !status?.hosts?.length && !(status?.receipts ?? []).some((r) => r.action === 'Launch') && openReceipts(status?.receipts).length === 0;
}

/**
 * The message of a deleted target whose check was refused before it could
 * reach the providers (credentials, an endpoint): what it still holds, why
 * the finalizer stays, then the refusal with its own fix, last so that a
 * shortened message loses the least.
 */
export function teardownBlockedMessage(status: Pick<RunnerTargetStatus, 'hosts' | 'receipts'> | undefined, problem: string): string {
  const hosts = (status?.hosts ?? []).map((h) => h.name);
  const open = openReceipts(status?.receipts).length;
  const launches = (status?.receipts ?? []).filter((r) => r.action === 'Launch').length;
  const named = hosts.length > 3 ? `${hosts.slice(0, 3).join(', ')} and ${hosts.length - 3} more` : hosts.join(', ');
  const holds = [
    ...(hosts.length ? [`${hosts.length} host${hosts.length === 1 ? '' : 's'} (${named})`] : []),
    ...(open ? [`${open} open receipt${open === 1 ? '' : 's'}`] : []),
    ...(!hosts.length && launches ? [`${launches} launch receipt${launches === 1 ? '' : 's'}`] : []),
  ].join(' and ') || 'receipts of earlier changes';
  return `teardown blocked: the RunnerTarget is being deleted and keeps its finalizer ${RUNNER_HOSTS_FINALIZER} while its status holds ${holds}; the check that removes the pool's VMs and runners stopped before reaching Compute Engine and GitHub, and runs again once this is fixed: ${problem}`;

}
