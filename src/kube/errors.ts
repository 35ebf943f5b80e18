/** The message of anything thrown, for logs, events and status. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
