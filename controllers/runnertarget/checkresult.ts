// What one check run hands back to the reconciler, and what the reconciler
// remembers between runs: the contract between the check and the worker
// that started it, apart from how a check runs.
import type { RunnerTarget } from '../../src/api/index.js';
import type { CheckStep } from './machine.js';

export interface CheckResult {
  state: CheckStep['state'];
  /** When to look again sooner than checkInterval (a lease held elsewhere). */
  retryAfterMs?: number;
  /** The check saw no VM and no runner of the pool (a finished check only). */
  poolGone?: boolean;
  /** The object as the check last had it. */
  target: RunnerTarget;
  /** A GitHub rate limit stopped (or kept from starting) the check: no check before this time (ms). */
  limitedUntil?: number;
  /** Requests this check counted against GitHub's primary limit (304s are free). */
  githubRequests?: number;
  /** Open receipts whose host has its runner config, delivered or found there by this check: no boot watch delivers to them. */
  configured?: string[];
}

/** What the reconciler remembers of a target's earlier checks. */
export interface CheckHistory {
  /** Requests the last check counted against GitHub's primary limit: a check waits for the reset when fewer are left. */
  lastGitHubRequests?: number | undefined;
  /** This check was requested (requestCheck) to serve a queued job: it does not wait for the sample window. */
  requested?: boolean | undefined;
}
