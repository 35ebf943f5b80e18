// What counts as work on a rented machine: pure functions of what a probe
// saw and the Offer's spec.busyWhen.
import { BUSY_KINDS, type BusyKind, type LeaseStatus } from '../../../src/api/index.js';

/** What a probe counted on the machine. */
export interface WorkSeen {
  jobs: number;
  sessions: number;
  gpuProcesses: number;
}

export type Usage = NonNullable<LeaseStatus['usage']>;

const NAMES: Record<BusyKind, [string, string]> = {
  jobs: ['job', 'jobs'],
  sessions: ['session', 'sessions'],
  gpuProcesses: ['GPU process', 'GPU processes'],
};

/**
 * The work that keeps the machine, of what busyWhen counts (all kinds when
 * the Offer is gone or says nothing), and how to say it: "1 job, 2 sessions",
 * or "none".
 */
export function busyOf(seen: WorkSeen, busyWhen: readonly BusyKind[] | undefined): { busy: number; summary: string; counted: readonly BusyKind[] } {
  const counted: readonly BusyKind[] = busyWhen?.length ? BUSY_KINDS.filter((k) => busyWhen.includes(k)) : BUSY_KINDS;
  const parts = counted.filter((k) => seen[k] > 0).map((k) => `${seen[k]} ${NAMES[k][seen[k] === 1 ? 0 : 1]}`);
  return { busy: counted.reduce((n: number, k) => n + seen[k], 0), summary: parts.length ? parts.join(', ') : 'none', counted };
}

/**
 * status.usage after a check at `at`, or undefined when it needs no write:
 * a check that sees the same counts of what busyWhen counts on an idle
 * machine changes nothing, so a quiet cluster costs no writes. The kinds
 * busyWhen leaves out are recorded with the next write, never the reason
 * for one: on a machine shared by several Leases the sessions come and go
 * with the controller's own connections, and each would be a write. A busy
 * check writes anyway (it records lastActivityAt too), and then `at` says
 * when work was last seen.
 */
export function nextUsage(prev: Usage | undefined, seen: WorkSeen, counted: readonly BusyKind[], summary: string, busy: boolean, at: string): Usage | undefined {
  const same = prev && counted.every((k) => prev[k] === seen[k]) && prev.busy === summary;
  if (same && !busy) return undefined;
  return { jobs: seen.jobs, sessions: seen.sessions, gpuProcesses: seen.gpuProcesses, busy: summary, at };
}
