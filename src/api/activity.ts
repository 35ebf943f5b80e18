// A Lease's activity as the controller records it and as anyone reading the
// Lease sees it: the annotation that reports work and the last activity the
// status holds. The Lease controller counts the idle timeout from it; the CLI
// marks it and shows the deadline. It imports only the duration parser:
// `leasehold run` loads it and must not load the schemas (zod).
import { durationMs } from './duration.js';

export const ACTIVITY_ANNOTATION = 'leasehold.dev/activity';

/** An Offer's idle timeout when it sets none; a Lease copies its Offer's into status.idleTimeout. */
export const DEFAULT_IDLE_TIMEOUT = '20m';

/** The Lease's idle timeout in ms, as its status records it. */
export function idleTimeoutMs(st: { idleTimeout?: string | undefined }): number {
  return durationMs(st.idleTimeout ?? DEFAULT_IDLE_TIMEOUT);
}

/** When a Lease whose last activity was at `lastMs` is released if no work is seen: the idle timeout on, or its lifetime end if sooner. */
export function idleDeadline(st: { idleTimeout?: string | undefined; expiresAt?: string | undefined }, lastMs: number): number {
  const expires = Date.parse(st.expiresAt ?? '');
  const idle = lastMs + idleTimeoutMs(st);
  return Number.isFinite(expires) ? Math.min(idle, expires) : idle;
}

export interface ActivityInputs {
  readyAt?: string | undefined;
  lastActivityAt?: string | undefined;
}

/** The last activity the controller has recorded: becoming Ready, or work a probe or an annotation showed. */
export function lastActivity(a: ActivityInputs): number {
  const times = [a.readyAt, a.lastActivityAt]
    .map((t) => (t ? Date.parse(t) : NaN))
    .filter((t) => Number.isFinite(t));
  return times.length ? Math.max(...times) : 0;
}
