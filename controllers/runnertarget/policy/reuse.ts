// Host reuse (spec.github.hostReuse: reuse). A just-in-time runner leaves
// after its one job, and by default its host drains with it: every job then
// costs a VM insert, a boot and a minimum billing period. With reuse, a host
// whose runner finished gets a new just-in-time runner of the same name
// instead, but only while a job it could take waits and no capacity already
// covers that job; with nothing queued it drains as it always did. GitHub
// lists a finished runner offline for a moment before it removes it: such a
// host (Offline, its runner not busy) is finished too, and its registration
// is removed before the new one is made. A host is
// reused only when nothing argues for letting it go: its VM runs (not being
// preempted or stopped), SSH saw no job process on it (the old job has
// really ended), it is not an orphan, it is short of the lifetime
// Compute Engine enforces (lifetime.ts would replace it soon anyway), and
// the pool's projected spend is within dailyBudgetUSD. Reuse never adds a
// VM, so maxHosts holds; the floor is left to demand, as in ephemeral mode.
import type { RunnerHost, RunnerTargetSpec } from '../../../src/api/index.js';
import { vmPhase, type Observation } from '../observation.js';
import { CAPACITY_STATES, jobFits } from './demand.js';
import { runnerFinished } from './hosts.js';
import { lifetimeMarginMs, maxRunDurationMs } from './lifetime.js';

export interface ReuseInput {
  spec: Pick<RunnerTargetSpec, 'gce' | 'checkInterval' | 'dailyBudgetUSD'> & { github: Pick<RunnerTargetSpec['github'], 'hostReuse' | 'labels' | 'repositories'> };
  /** status.hosts as the check read them: a finished runner is told from the state they record. */
  before: readonly RunnerHost[];
  /** The hosts as this check observed them (hosts.ts): a finished host is Draining there. */
  hosts: readonly RunnerHost[];
  observation: Pick<Observation, 'vms' | 'runners' | 'jobs' | 'probes'>;
  now: number;
  /** Projected spend over the launch horizon with the live hosts (budget.ts affordableLaunches). */
  projectedUSD: number;
  /** Hosts an open receipt holds: nothing new is decided for them. */
  held?: ReadonlySet<string>;
  /** --runner-lifetime-scale, as lifetimeDrains takes it. */
  lifetimeScale?: number;
}

export interface ReuseDecision {
  /** Hosts that get a new runner, youngest first, with why. */
  reuse: { host: string; reason: string; finishedRunnerID?: number }[];
  /**
   * Finished hosts that drain, with why (shown in events; empty in ephemeral
   * mode). `saidBefore`: the host was Offline at the last check too, whose
   * decision was already told: an Offline host stays finished, and decided
   * on, at every check until its runner's registration goes.
   */
  drain: { host: string; reason: string; saidBefore: boolean }[];
}

export function reuseHosts({ spec, before, hosts, observation, now, projectedUSD, held, lifetimeScale = 1 }: ReuseInput): ReuseDecision {
  const out: ReuseDecision = { reuse: [], drain: [] };
  if (spec.github.hostReuse !== 'reuse') return out;
  const runners = new Map(observation.runners.map((r) => [r.name, r]));
  const recorded = new Map(before.map((h) => [h.name, h]));
  const finished = hosts.filter((h) => {
    const was = recorded.get(h.name);
    if (was === undefined || held?.has(h.name)) return false;
    const runner = runners.get(h.name);
    if (h.state === 'Offline') return runner !== undefined && runner.status === 'offline' && !runner.busy;
    return h.state === 'Draining' && runnerFinished(was, runner);
  });
  if (finished.length === 0) return out;

  const queued = observation.jobs.filter((j) => j.status === 'queued' && jobFits(j, spec.github)).length;
  // Idle runners and hosts still coming up take queued jobs first: only the jobs they leave call for a reused host.
  const coming = hosts.filter((h) => CAPACITY_STATES.includes(h.state) && h.state !== 'Busy' && !h.orphanSince).length;
  let need = Math.max(0, queued - coming);
  const bound = maxRunDurationMs(spec) * lifetimeScale;
  const margin = lifetimeMarginMs(spec) * lifetimeScale;
  const vms = new Map(observation.vms.map((v) => [v.name, v]));
  const youngestFirst = [...finished].sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt) || a.name.localeCompare(b.name));
  for (const h of youngestFirst) {
    const vm = vms.get(h.name);
    const age = now - Date.parse(h.createdAt);
    let why: string | undefined;
    if (!vm || vmPhase(vm) !== 'running') why = `its VM is ${vm ? vm.status : 'not listed'}`;
    else if (h.orphanSince) why = 'it is marked as an orphan';
    else if (!(age < bound - margin)) why = `it is ${Math.floor(age / 60_000)} min old, near spec.gce.maxRunDuration`;
    else if (observation.probes.get(h.name)?.job !== 'none') why = 'SSH could not confirm that its last job has ended';
    else if (projectedUSD > spec.dailyBudgetUSD) why = `the projected spend ${projectedUSD.toFixed(2)} USD passes dailyBudgetUSD ${spec.dailyBudgetUSD}`;
    else if (need === 0) why = queued === 0 ? 'no job it could take is queued' : 'the queued jobs are covered by idle or starting runners';
    if (why) {
      out.drain.push({ host: h.name, saidBefore: h.state === 'Offline' && recorded.get(h.name)!.state === 'Offline', reason: `host ${h.name} finished its job and is not reused (spec.github.hostReuse: reuse): ${why}; it ${h.state === 'Offline' ? 'is drained once its runner is removed' : 'drains'}` });
      continue;
    }
    need--;
    const left = runners.get(h.name);
    out.reuse.push({ host: h.name, ...(left ? { finishedRunnerID: left.id } : {}), reason: `host ${h.name} finished its job and ${queued} job${queued === 1 ? '' : 's'} it could take ${queued === 1 ? 'is' : 'are'} queued: it gets a new runner over SSH instead of draining (spec.github.hostReuse: reuse)` });
  }
  return out;
}
