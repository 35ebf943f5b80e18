// Rate limits per caller. The limits are read on every check, so that a test
// can change them while the emulator runs.

/** At most `perSecond()` requests per key in any one second; 0 turns it off. */
export class RequestRateLimiter {
  private readonly recent = new Map<string, number[]>();

  constructor(private readonly perSecond: () => number) {}

  get limit(): number {
    return this.perSecond();
  }

  /** Whether the request may pass; a refused request does not count. */
  admit(key: string, now = Date.now()): boolean {
    const limit = this.perSecond();
    if (!(limit > 0)) return true;
    const list = (this.recent.get(key) ?? []).filter((t) => now - t < 1000);
    this.recent.set(key, list);
    if (list.length >= limit) return false;
    list.push(now);
    return true;
  }
}

/** At most one counted event per key per `intervalMs()`; 0 turns it off. */
export class IntervalLimiter {
  private readonly last = new Map<string, number>();

  constructor(private readonly intervalMs: () => number) {}

  get interval(): number {
    return this.intervalMs();
  }

  /** Milliseconds until the key may go again; 0 when it may now. */
  waitMs(key: string, now = Date.now()): number {
    const interval = this.intervalMs();
    if (!(interval > 0)) return 0;
    const last = this.last.get(key);
    return last !== undefined && now - last < interval ? interval - (now - last) : 0;
  }

  /** Counts an event; not while the limit is off, so that turning it on later starts clean. */
  count(key: string, now = Date.now()): void {
    if (this.intervalMs() > 0) this.last.set(key, now);
  }
}
