// When a Ready or Idle Lease ends: pure functions of (status, activity, now).
//  - maxLifetime releases it regardless of work;
//  - otherwise it is released idleTimeout after the last activity seen
//    (work found by a probe, the leasehold.dev/activity annotation, or
//    becoming Ready). A failed probe renews nothing.

/**
 * What the leasehold.dev/activity annotation says, at `now`. A time in the
 * future counts as now, and only when first seen (`seen` false): counted
 * again at every check, it would keep the machine until maxLifetime.
 * Undefined when unset, not a time, or a future time seen before.
 */
export function annotatedActivity(annotation: string | undefined, now: number, seen: boolean): { at: number; future: boolean } | undefined {
  // Whole seconds, as status records times: compared with lastActivityAt, the same time must read the same.
  const t = annotation ? Math.floor(Date.parse(annotation) / 1000) * 1000 : NaN;
  if (!Number.isFinite(t)) return undefined;
  if (t <= now) return { at: t, future: false };
  return seen ? undefined : { at: Math.floor(now / 1000) * 1000, future: true };
}

/** What a check makes of a machine's use: past its lifetime or idle deadline, working, or idle until releaseAt. */
export type Usage =
  | { kind: 'expired'; reason: 'MaxLifetime' | 'IdleTimeout'; message: string }
  | { kind: 'busy' }
  | { kind: 'idle'; releaseAt: number };

export interface CheckInputs {
  now: number;
  expiresAt?: string;
  idleTimeoutMs: number;
  lastActivityMs: number;
  /** Jobs the probe saw running; undefined when the machine could not be reached. */
  busy?: number;
}

export function judgeUsage(c: CheckInputs): Usage {
  const expires = c.expiresAt ? Date.parse(c.expiresAt) : Infinity;
  if (c.now >= expires) {
    return { kind: 'expired', reason: 'MaxLifetime', message: `maxLifetime reached at ${new Date(expires).toISOString()}; releasing even if work is running` };
  }
  if (c.busy !== undefined && c.busy > 0) return { kind: 'busy' };
  const releaseAt = c.lastActivityMs + c.idleTimeoutMs;
  if (c.now >= releaseAt) {
    return { kind: 'expired', reason: 'IdleTimeout', message: `idle since ${new Date(c.lastActivityMs).toISOString()}, past the idle timeout; releasing` };
  }
  return { kind: 'idle', releaseAt };
}

/** How long until the next check: the check interval, or sooner when a deadline comes first. */
export function nextCheckIn(now: number, checkIntervalMs: number, deadlines: number[]): number {
  const soonest = Math.min(now + checkIntervalMs, ...deadlines.filter((d) => d > now));
  return Math.max(100, soonest - now);
}
