// A Lease's activity as the controller records it and as anyone reading the
// Lease sees it: the annotation that reports work and the last activity the
// status holds. The Lease controller counts the idle timeout from it; the CLI
// marks it and shows the deadline. It imports nothing: `leasehold run` loads
// it and must not load the schemas (zod).

export const ACTIVITY_ANNOTATION = 'leasehold.dev/activity';

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
