// A RunnerTarget being deleted keeps its finalizer until its pool is gone:
// its checks plan as if no job waited (floor and maxHosts 0), so idle hosts
// drain the usual way (runner removed, no job process found, then the VM
// deleted) and a busy host stays until its job ends. Nothing is launched
// and no launch is continued; a VM that never got a runner is deleted at
// once, since no job can run there.
import type { RunnerTargetSpec } from '../../src/api/index.js';
import { vmPhase, type Observation } from './observation.js';
import type { Change, CheckPlan } from './plan.js';

/** Kept on a RunnerTarget until none of its VMs and runner registrations is left. */
export const RUNNER_HOSTS_FINALIZER = 'leasehold.dev/runner-hosts';

/** The spec a teardown check plans with: no job counts, no host is wanted. */
export function teardownSpec(spec: RunnerTargetSpec): RunnerTargetSpec {
  return { ...spec, floor: 0, maxHosts: 0, github: { ...spec.github, repositories: [] } };
}

export function teardownPlan(base: CheckPlan, observation: Pick<Observation, 'vms' | 'runners'>): CheckPlan {
  const changes: Change[] = base.changes.filter((c) => c.kind !== 'launch' && c.kind !== 'register' && !(c.kind === 'resume' && c.receipt.action === 'Launch'));
  const touched = new Set(changes.flatMap((c) => (c.kind === 'resume' ? c.receipt.hosts : c.intent.hosts)));
  const runners = new Set(observation.runners.map((r) => r.name));
  for (const vm of observation.vms) {
    // Leaving VMs are on their way out already; an unknown status is left alone, as everywhere.
    if (touched.has(vm.name) || runners.has(vm.name) || vmPhase(vm) === 'leaving' || vmPhase(vm) === 'unknown') continue;
    changes.push({ kind: 'delete', intent: { action: 'Delete', hosts: [vm.name], zone: vm.zone, message: 'the RunnerTarget is being deleted and this VM has no runner' }, reason: 'Orphan' });
  }
  const hosts = base.hosts.filter((h) => h.state !== 'Launching' || observation.vms.some((v) => v.name === h.name));
  return { ...base, hosts, changes, plan: { ...base.plan, launch: 0, reason: `the RunnerTarget is being deleted: its hosts drain and go; ${base.plan.reason}` } };
}

/** Nothing of the pool is left: the finalizer may go. */
export const poolGone = (observation: Pick<Observation, 'vms' | 'runners' | 'unreachableZones'>) =>
  observation.vms.length === 0 && observation.runners.length === 0 && (observation.unreachableZones ?? []).length === 0;
