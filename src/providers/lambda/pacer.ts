// Lambda accepts one launch per account every 12 seconds. Leases that
// launch together wait their turn here, first come first served, instead of
// hammering the API and collecting 429s.

export interface PacerOptions {
  intervalMs: number;
  /** A holder that never calls done() loses its turn after this long. */
  holdLimitMs?: number;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

interface Waiter {
  resolve: (turn: Turn) => void;
  reject: (err: unknown) => void;
}

/** A granted turn: call sent() right before the launch request goes out, done() when finished with the turn. */
export interface Turn {
  sent(): void;
  done(): void;
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new Error('aborted'));
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason ?? new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One queue per account. */
export class LaunchPacer {
  private last = Number.NEGATIVE_INFINITY;
  private readonly queue: Waiter[] = [];
  private running = false;
  private readonly now: () => number;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;

  constructor(private readonly opts: PacerOptions) {
    this.now = opts.now ?? Date.now;
    this.sleep = opts.sleep ?? abortableSleep;
  }

  /** How many launches are waiting for a turn. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Resolves when the caller may send its launch request. The next turn is
   * not granted before the holder calls done() (or 60 s pass), and comes
   * `intervalMs` after the moment the holder said its request was sent, so
   * whatever the holder does between grant and send (a fresh listing) never
   * shortens the spacing. `first` puts the caller at the head of the queue
   * (a request the API turned away keeps its place).
   */
  turn(signal?: AbortSignal, first = false): Promise<Turn> {
    return new Promise<Turn>((resolve, reject) => {
      const w: Waiter = { resolve, reject };
      if (first) this.queue.unshift(w);
      else this.queue.push(w);
      signal?.addEventListener(
        'abort',
        () => {
          const i = this.queue.indexOf(w);
          if (i >= 0) {
            this.queue.splice(i, 1);
            reject(signal.reason ?? new Error('aborted'));
          }
        },
        { once: true },
      );
      void this.pump();
    });
  }

  /** Pushes the next turn back, e.g. after the API answered 429 with Retry-After. */
  backOff(ms: number): void {
    this.last = Math.max(this.last, this.now() + ms - this.opts.intervalMs);
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length) {
        const wait = this.last + this.opts.intervalMs - this.now();
        if (wait > 0) await this.sleep(wait);
        const w = this.queue.shift();
        if (!w) break;
        let finish!: () => void;
        const finished = new Promise<void>((r) => (finish = r));
        let over = false;
        w.resolve({
          sent: () => {
            if (!over) this.last = Math.max(this.last, this.now());
          },
          done: () => {
            over = true;
            finish();
          },
        });
        const guard = setTimeout(finish, this.opts.holdLimitMs ?? 60_000);
        await finished;
        clearTimeout(guard);
        over = true;
      }
    } finally {
      this.running = false;
    }
  }
}

/** Pacers by account, so every Offer on one account shares one queue. */
export class PacerRegistry {
  private readonly pacers = new Map<string, LaunchPacer>();
  constructor(private readonly intervalMs: number) {}

  for(account: string): LaunchPacer {
    let p = this.pacers.get(account);
    if (!p) {
      p = new LaunchPacer({ intervalMs: this.intervalMs });
      this.pacers.set(account, p);
    }
    return p;
  }
}

/**
 * Lambda allows about one API request per second per account, launches
 * included. Requests of one account start at least `intervalMs` apart, in
 * the order they asked, so a busy controller slows down instead of
 * collecting 429s.
 */
export class RequestSpacer {
  private next = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Resolves when the caller may send; a cancelled wait gives up its slot to nobody (the spacing only grows). */
  async turn(signal?: AbortSignal): Promise<void> {
    const at = Math.max(this.now(), this.next);
    this.next = at + this.intervalMs;
    const wait = at - this.now();
    if (wait > 0) await abortableSleep(wait, signal);
  }
}
