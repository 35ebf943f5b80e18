// Scale-down that never deletes a host whose runner may be busy. GitHub's
// busy flag lags 25-60 s behind a job's start and can read false mid-job,
// and deleting the VM of a busy runner may succeed, so a host leaves in
// three steps: its runner is deregistered (GitHub refuses, 422, while it
// holds a job), then SSH confirms that no job process runs, and only then is
// the VM deleted. A job found on a drained host keeps the host: it is
// registered again when jobs wait, else left until the job ends.
import type { RunnerHost } from '../../../src/api/index.js';
import type { HostProbe, PoolRunner } from '../observation.js';

/** The longest GitHub's busy flag lags behind a job's start. */
export const BUSY_FLAG_LAG_MS = 60_000;

export interface DrainPick {
  drain: string[];
  /** Idle hosts kept, with why. */
  kept: { host: string; reason: string }[];
}

/**
 * Which idle hosts to drain, at most `surplus`. A host qualifies only when
 * its runner is online, not busy, and has been seen idle for longer than
 * the busy flag can lag. Hosts off the pool's tier go first, then standard
 * ones (they cost more), then the dearest, then the longest idle.
 */
export function pickDrains(
  hosts: readonly RunnerHost[],
  runners: readonly PoolRunner[],
  busy: ReadonlySet<string>,
  surplus: number,
  tierMachineType: string,
  now: number,
  lagMs = BUSY_FLAG_LAG_MS,
): DrainPick {
  const kept: DrainPick['kept'] = [];
  const byName = new Map(runners.map((r) => [r.name, r]));
  const candidates = hosts.filter((h) => {
    if (h.state !== 'Idle') return false;
    const r = byName.get(h.name);
    const since = Date.parse(h.idleSince ?? '');
    if (!r || r.status !== 'online') kept.push({ host: h.name, reason: 'its runner is not online' });
    else if (busy.has(h.name)) kept.push({ host: h.name, reason: 'its runner is busy' });
    else if (!Number.isFinite(since) || now - since < lagMs) kept.push({ host: h.name, reason: `idle for less than ${lagMs / 1000} s, within the lag of GitHub's busy flag` });
    else return true;
    return false;
  });
  const rank = (h: RunnerHost) => [h.machineType === tierMachineType ? 1 : 0, h.provisioningModel === 'STANDARD' ? 0 : 1, -h.pricePerHour, Date.parse(h.idleSince!)];
  const sorted = [...candidates].sort((a, b) => {
    const ra = rank(a);
    const rb = rank(b);
    for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return ra[i]! - rb[i]!;
    return a.name.localeCompare(b.name);
  });
  const drain = sorted.slice(0, Math.max(0, surplus)).map((h) => h.name);
  for (const h of sorted.slice(Math.max(0, surplus))) kept.push({ host: h.name, reason: 'the pool needs it' });
  return { drain, kept };
}

/** How long a host's runner may stay offline after it was online before the host is drained and replaced. */
export const OFFLINE_GRACE_MS = 5 * 60_000;

/**
 * Offline hosts past the grace, with why: they drain like a broken host
 * (drainStep: the runner is removed unless SSH sees a job, then the VM is
 * deleted once SSH confirms none runs). Within the grace a runner may come
 * back (a restarted service, a network blip); it is no capacity meanwhile.
 */
export function offlineDrains(hosts: readonly RunnerHost[], now: number, graceMs = OFFLINE_GRACE_MS): { host: string; reason: string }[] {
  const out: { host: string; reason: string }[] = [];
  for (const h of hosts) {
    if (h.state !== 'Offline') continue;
    const since = Date.parse(h.offlineSince ?? '');
    // A host with no offlineSince has no clock to judge by: the next check starts one.
    if (!Number.isFinite(since) || now - since < graceMs) continue;
    out.push({
      host: h.name,
      reason: `runner ${h.name} has been offline since ${h.offlineSince}, past the offline grace of ${Math.round(graceMs / 1000)} s (--runner-offline-grace): it is removed unless SSH sees a job, and the VM deleted once SSH confirms none runs`,
    });
  }
  return out;
}

/** GitHub's answer to removing a host's runner. */
export type DeregisterOutcome = 'removed' | 'gone' | 'busy';

/** Where a host goes after its runner's removal: a 422 (busy) keeps it as a busy host. */
export function afterDeregister(host: RunnerHost, outcome: DeregisterOutcome): Pick<RunnerHost, 'state' | 'message'> {
  if (outcome === 'busy') return { state: 'Busy', message: 'GitHub refused to remove the runner while it runs a job (422); the host stays' };
  return { state: 'Draining', message: `runner ${host.name} ${outcome === 'gone' ? 'was already gone' : 'removed'}; confirming over SSH that no job runs before the VM is deleted` };
}

export type DrainStep =
  | { action: 'delete'; reason: string }
  /** A job runs on the drained host and jobs wait: give it a new runner. */
  | { action: 'reregister'; reason: string }
  /** A job runs and nothing waits: keep the host until the job ends. */
  | { action: 'leave'; reason: string }
  /** Nothing confirmed either way: look again next check. */
  | { action: 'wait'; reason: string }
  /** The runner is still registered: remove it first. */
  | { action: 'deregister'; reason: string };

/**
 * The next step for a Draining host, from this check's look at its runner
 * (`busy`: its flag, a job in progress on it, or a job process SSH saw) and
 * its processes. A runner still registered is removed first, but never
 * while it may be running a job: removing a busy runner can succeed.
 */
export function drainStep(host: RunnerHost, runner: PoolRunner | undefined, busy: boolean, probe: HostProbe | undefined, jobsWaiting: number): DrainStep {
  const job = probe?.job ?? 'unknown';
  if (runner && (busy || job === 'running')) return { action: 'leave', reason: `runner ${host.name} is still registered and runs a job; the host is kept until it ends` };
  if (runner) return { action: 'deregister', reason: `runner ${host.name} is still registered; it is removed before the VM` };
  if (job === 'none') return { action: 'delete', reason: `runner removed and no job process runs on ${host.name}` };
  if (job === 'unknown') return { action: 'wait', reason: `could not confirm over SSH that no job runs on ${host.name}; the VM is kept and looked at again next check` };
  if (jobsWaiting > 0) return { action: 'reregister', reason: `a job still runs on ${host.name} after its runner was removed, and ${jobsWaiting} job${jobsWaiting === 1 ? '' : 's'} wait: it gets a new runner` };
  return { action: 'leave', reason: `a job still runs on ${host.name} after its runner was removed; the host is kept until it ends` };
}
