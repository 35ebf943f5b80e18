/** The message of anything thrown, for logs, events and status. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// statusCode lives here, apart from client.ts, so that reading an API error
// does not load @kubernetes/client-node: the CLI's own HTTP client throws
// errors of the same shape.

/** The HTTP status of an error thrown by a client-node 1.x API call (or one shaped like it), if any. */
export function statusCode(err: unknown): number | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof (err as { code: unknown }).code === 'number') {
    return (err as { code: number }).code;
  }
  return undefined;
}

export const isConflict = (err: unknown) => statusCode(err) === 409;
export const isNotFound = (err: unknown) => statusCode(err) === 404;
