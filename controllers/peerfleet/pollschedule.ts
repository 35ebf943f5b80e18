// When a PeerFleet's Secrets and peer are read again. A fleet is polled at
// its pollInterval, never faster than the schema's minimum; a peer that did
// not answer is asked again sooner, backing off to the poll interval, so a
// short outage does not cost a whole interval.
import { DEFAULT_POLL_INTERVAL, durationMs, MIN_POLL_INTERVAL_MS, type PeerFleet } from '../../src/api/index.js';
import type { Verdict } from './policy/verdict.js';

/** The first retry after the peer did not answer; doubled up to pollInterval. */
export const UNREACHABLE_RETRY_MS = 1000;

export function pollInterval(fleet: PeerFleet): number {
  // An object stored before the schema's minimum (or written around it) must not poll the peer in a tight loop.
  return Math.max(MIN_POLL_INTERVAL_MS, durationMs(fleet.spec.pollInterval ?? DEFAULT_POLL_INTERVAL));
}

export class PollSchedule {
  /** Consecutive polls each fleet found the peer down, for the backoff. */
  private readonly downStreak = new Map<string, number>();

  /** How long until the next reading of a fleet whose last reading gave `verdict`. */
  next(key: string, fleet: PeerFleet, verdict: Verdict): number {
    const poll = pollInterval(fleet);
    if (verdict.failureClass !== 'infra_down') {
      this.downStreak.delete(key);
      return poll;
    }
    const streak = (this.downStreak.get(key) ?? 0) + 1;
    this.downStreak.set(key, streak);
    return Math.min(poll, UNREACHABLE_RETRY_MS * 2 ** Math.min(streak - 1, 20));
  }

  forget(key: string): void {
    this.downStreak.delete(key);
  }
}
