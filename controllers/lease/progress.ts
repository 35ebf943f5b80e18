// Acquire's stderr lines, shown in the Lease's status.message while it runs.
// A provider may print hundreds of lines; the API server should see at most
// one status write per interval, carrying the latest line. Pushing a line
// never waits for a write: acquire is never slowed down by its own progress.

/** How often, at most, a Launching Lease's status.message follows acquire's stderr. */
export const PROGRESS_INTERVAL_MS = 2000;
/** The longest progress line kept in status.message. */
export const PROGRESS_MAX_CHARS = 256;

/** One stderr line as a status message: control characters and runs of spaces become one space, capped. */
export function progressLine(line: string, max = PROGRESS_MAX_CHARS): string {
  // eslint-disable-next-line no-control-regex
  const clean = line.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ').replace(/\s+/g, ' ').trim();
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

/**
 * Coalesces lines into writes: the first write comes no sooner than
 * `intervalMs` after the throttle was made (a quick acquire costs no write),
 * later ones at least `intervalMs` apart, one at a time, latest line wins.
 */
export class ProgressThrottle {
  private latest: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private lastWrite: number;
  private stopped = false;

  constructor(
    private readonly intervalMs: number,
    private readonly write: (line: string) => Promise<void>,
    private readonly now: () => number = Date.now,
  ) {
    this.lastWrite = now();
  }

  push(raw: string): void {
    if (this.stopped) return;
    const line = progressLine(raw);
    if (!line) return;
    this.latest = line;
    if (!this.timer && !this.writing) this.schedule();
  }

  /** No more writes; resolves once a write in flight has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
  }

  private schedule(): void {
    const wait = Math.max(0, this.lastWrite + this.intervalMs - this.now());
    this.timer = setTimeout(() => this.flush(), wait);
    this.timer.unref?.();
  }

  private flush(): void {
    this.timer = undefined;
    const line = this.latest;
    this.latest = undefined;
    if (this.stopped || line === undefined) return;
    this.lastWrite = this.now();
    this.writing = this.write(line)
      .catch(() => undefined)
      .then(() => {
        this.writing = undefined;
        if (!this.stopped && this.latest !== undefined) this.schedule();
      });
  }
}
