// GitHub's rate limits as a RunnerTarget check obeys them: a check does not
// start while a limit holds or while the primary limit has less left than
// the last check used; a check that meets a limit stops there, and the target
// is looked at again at the time GitHub named, not sooner. Each limited
// request only lengthens a secondary limit, and GitHub may ban an
// integration that keeps sending into one.
import type { ConditionInput } from '../../../src/kube/conditions.js';
import { RateLimitedError } from '../../../src/providers/ratelimit.js';

/** GitHub asks for at least a minute when a limit names no time. */
export const UNNAMED_WAIT_MS = 60_000;
/** Room above the last check's count: a check may need a few more requests than the one before (a new run, a launch). */
export const QUOTA_HEADROOM = 1.25;

export interface QuotaFacts {
  now: number;
  /** Until when the client sends nothing (a limit answered), ms since the epoch. */
  blockedUntil?: number | undefined;
  /** The primary limit as GitHub last reported it. */
  rateLimit?: { remaining: number; resetAt: number } | undefined;
  /** Requests the last check of this target counted against the primary limit (304s are free). */
  lastCheckRequests?: number | undefined;
}

export type StartDecision = { start: true } | { start: false; until: number; message: string };

/** The requests a check is expected to need: the last check's count with headroom, at least one. */
export function requestsNeeded(lastCheckRequests: number | undefined): number {
  return Math.max(1, Math.ceil((lastCheckRequests ?? 0) * QUOTA_HEADROOM));
}

/** Whether a check may start now, or until when it waits. */
export function mayStartCheck(f: QuotaFacts): StartDecision {
  if (f.blockedUntil !== undefined && f.blockedUntil > f.now) {
    return { start: false, until: f.blockedUntil, message: `GitHub answered a rate limit; no GitHub request is sent until ${iso(f.blockedUntil)}` };
  }
  const rl = f.rateLimit;
  if (rl && rl.resetAt > f.now) {
    const need = requestsNeeded(f.lastCheckRequests);
    if (rl.remaining < need) {
      return { start: false, until: rl.resetAt, message: `GitHub's primary rate limit has ${rl.remaining} requests left until ${iso(rl.resetAt)}, and a check needs about ${need} (the last one used ${f.lastCheckRequests ?? 0}); the check waits for the reset` };
    }
  }
  return { start: true };
}

/** When to look again after a check met a limit: the time GitHub named, a minute when it named none, never in the past. */
export function retryAtAfter(err: RateLimitedError, now: number): number {
  const at = err.retryAt?.getTime() ?? now + UNNAMED_WAIT_MS;
  return Math.max(at, now + 1000);
}

/** Whether an error is GitHub's (or the client's own) rate limit refusal. */
export function isRateLimited(err: unknown): err is RateLimitedError {
  return err instanceof RateLimitedError;
}

/** The RateLimited condition: True naming the time while limited; False once a check ran through again. */
export function rateLimitedCondition(limited: { until: number; message: string } | undefined): ConditionInput {
  if (limited) {
    return {
      type: 'RateLimited',
      status: 'True',
      reason: 'GitHubRateLimit',
      message: `${limited.message}. The next check is at ${iso(limited.until)}. If this recurs, lengthen spec.checkInterval, follow fewer repositories, or give the target a token (or GitHub App) of its own`.slice(0, 1000),
    };
  }
  return { type: 'RateLimited', status: 'False', reason: 'WithinLimit', message: 'the last check ran within GitHub\'s rate limits' };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
