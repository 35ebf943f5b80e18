// How many hosts the pool wants: the jobs its runners could take (queued in
// a followed repository, every runs-on label one the runners have) plus the
// jobs they run, between floor and maxHosts, and only as many launches as
// the budget allows. Idle runners absorb queued jobs first, so they count
// as capacity; so do hosts still launching or registering (within their
// boot grace: a marked orphan is none). A host whose runner went offline
// takes no jobs: it is no capacity, so demand replaces it at once.
import type { RunnerHost, RunnerTargetSpec } from '../../../src/api/index.js';
import type { Observation, PoolRunner, WorkflowJob } from '../observation.js';

/** Labels every self-hosted Linux x64 runner has. */
export const DEFAULT_RUNNER_LABELS = ['self-hosted', 'linux', 'x64'] as const;

const lower = (s: string) => s.toLowerCase();

/** The labels the pool's runners register with. */
export function runnerLabels(github: Pick<RunnerTargetSpec['github'], 'labels'>): string[] {
  return [...new Set([...DEFAULT_RUNNER_LABELS, ...(github.labels ?? [])].map(lower))];
}

/**
 * A job the runners could take: queued in a followed repository, asking for
 * every label of spec.github.labels, and every label it asks for is one the
 * runners have (GitHub compares labels without case).
 */
export function jobFits(job: WorkflowJob, github: Pick<RunnerTargetSpec['github'], 'labels' | 'repositories'>): boolean {
  if (!github.repositories.some((r) => lower(r) === lower(job.repository))) return false;
  const have = new Set(runnerLabels(github));
  const asks = new Set(job.labels.map(lower));
  if (!(github.labels ?? []).every((l) => asks.has(lower(l)))) return false;
  return [...asks].every((l) => have.has(l));
}

/** Hosts that are, or are becoming, runners: not on their way out. */
export const CAPACITY_STATES: readonly RunnerHost['state'][] = ['Launching', 'Registering', 'Idle', 'Busy'];

export interface Demand {
  queued: number;
  running: number;
  busy: number;
  idle: number;
  /** Hosts the pool should have. */
  desired: number;
  /** Hosts to launch now. */
  launch: number;
  /** Capacity hosts beyond desired: idle ones may be drained. */
  surplus: number;
  /** Launches the budget held back. */
  heldByBudget: number;
  reason: string;
}

export interface DemandInput {
  spec: Pick<RunnerTargetSpec, 'floor' | 'maxHosts'> & { github: Pick<RunnerTargetSpec['github'], 'labels' | 'repositories'> };
  hosts: readonly RunnerHost[];
  observation: Pick<Observation, 'jobs' | 'runners'>;
  /** How many launches the daily budget allows (budget.ts). */
  affordableLaunches: number;
}

/** Runners that run a job: the busy flag, or a job in progress on them (the flag lags). */
export function busyRunners(runners: readonly PoolRunner[], jobs: readonly WorkflowJob[]): Set<string> {
  const running = new Set(jobs.filter((j) => j.status === 'in_progress' && j.runnerName).map((j) => j.runnerName!));
  return new Set(runners.filter((r) => r.busy || running.has(r.name)).map((r) => r.name));
}

export function demand({ spec, hosts, observation, affordableLaunches }: DemandInput): Demand {
  const queued = observation.jobs.filter((j) => j.status === 'queued' && jobFits(j, spec.github)).length;
  const running = observation.jobs.filter((j) => j.status === 'in_progress' && jobFits(j, spec.github)).length;
  const busyNames = busyRunners(observation.runners, observation.jobs);
  // A host SSH found running a job (hosts.ts) takes no queued job, whatever GitHub's lagging flag says.
  for (const h of hosts) if (h.state === 'Busy') busyNames.add(h.name);
  const busy = busyNames.size;
  const idle = observation.runners.filter((r) => r.status === 'online' && !busyNames.has(r.name)).length;
  // A host marked as an orphan has had no runner past its boot grace: it takes no jobs, so it is no capacity.
  const capacity = hosts.filter((h) => CAPACITY_STATES.includes(h.state) && !h.orphanSince).length;
  const desired = Math.min(spec.maxHosts, Math.max(spec.floor, busy + queued));
  // Draining and deleting hosts are still VMs: maxHosts counts them until they are gone.
  const room = Math.max(0, spec.maxHosts - hosts.length);
  const wanted = Math.min(Math.max(0, desired - capacity), room);
  const launch = Math.min(wanted, Math.max(0, affordableLaunches));
  const surplus = Math.max(0, capacity - desired);
  const parts = [
    `${queued} queued job${queued === 1 ? '' : 's'} the runners can take, ${busy} busy and ${idle} idle runner${idle === 1 ? '' : 's'}`,
    `${desired} host${desired === 1 ? '' : 's'} wanted (floor ${spec.floor}, maxHosts ${spec.maxHosts}), ${capacity} up or coming up`,
  ];
  if (launch > 0) parts.push(`launching ${launch}`);
  if (wanted > launch) parts.push(`${wanted - launch} launch${wanted - launch === 1 ? '' : 'es'} held back: they would pass dailyBudgetUSD`);
  else if (desired > capacity && room < desired - capacity) parts.push(`${hosts.length - capacity} draining host${hosts.length - capacity === 1 ? '' : 's'} still count against maxHosts`);
  if (surplus > 0) parts.push(`${surplus} more than wanted`);
  return { queued, running, busy, idle, desired, launch, surplus, heldByBudget: wanted - launch, reason: parts.join('; ') };
}
