// A work queue with client-go's guarantees: a key is queued at most once, a
// key being processed is never handed to a second worker (an add meanwhile
// marks it dirty and it comes back after done), failures back off per key
// exponentially from 5 ms to 1000 s, and timers requeue at a set time.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import { errorText } from './errors.js';
import { unrefClock, type Clock } from './clock.js';

export interface WorkQueueOptions {
  clock?: Clock;
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  /** Keys being processed, with when their processing started. */
  private readonly processing = new Map<string, number>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; handle: unknown }>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private readonly drained: (() => void)[] = [];
  private shuttingDown = false;
  private readonly clock: Clock;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(opts: WorkQueueOptions = {}) {
    this.clock = opts.clock ?? unrefClock;
    this.baseDelayMs = opts.baseDelayMs ?? 5;
    this.maxDelayMs = opts.maxDelayMs ?? 1_000_000;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.dirty.delete(key);
      this.processing.set(key, this.clock.now());
      waiter(key);
    } else {
      this.queue.push(key);
    }
  }

  /** Adds the key after `ms`; of several pending timers for one key, the earliest wins. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) return this.add(key);
    const at = this.clock.now() + ms;
    const prev = this.timers.get(key);
    if (prev && prev.at <= at) return;
    if (prev) this.clock.clearTimeout(prev.handle);
    const handle = this.clock.setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, { at, handle });
  }

  /** Re-adds a failed key after its backoff: 5 ms, 10 ms, 20 ms, ... capped at 1000 s. */
  addRateLimited(key: string): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.addAfter(key, this.backoff(n));
  }

  backoff(failures: number): number {
    return Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.min(failures, 40));
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  len(): number {
    return this.queue.length;
  }

  /** Seconds of work begun and not yet done, summed over keys in process (client-go's unfinished_work_seconds). */
  unfinishedWorkSeconds(): number {
    const now = this.clock.now();
    let total = 0;
    for (const since of this.processing.values()) total += now - since;
    return total / 1000;
  }

  /** Seconds the longest-running key has been in process (client-go's longest_running_processor_seconds). */
  longestRunningProcessorSeconds(): number {
    const now = this.clock.now();
    let oldest = now;
    for (const since of this.processing.values()) oldest = Math.min(oldest, since);
    return (now - oldest) / 1000;
  }

  /** The next key to process, or undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.set(key, this.clock.now());
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Marks a key finished; if it was added meanwhile, it is queued again. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
    if (this.shuttingDown && this.processing.size === 0) this.drained.splice(0).forEach((r) => r());
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const t of this.timers.values()) this.clock.clearTimeout(t.handle);
    this.timers.clear();
    this.queue.length = 0;
    this.dirty.clear();
    this.waiters.splice(0).forEach((w) => w(undefined));
  }

  /** Shuts down and resolves once every key in flight is done. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((r) => this.drained.push(r));
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }
}

export type Reconcile = (key: string) => Promise<{ requeueAfter?: number } | void | undefined>;

/** Runs `concurrency` workers until the queue shuts down; resolves when all are idle. */
export async function runWorkers(queue: WorkQueue, concurrency: number, reconcile: Reconcile, opts: { log?: Logger } = {}): Promise<void> {
  const worker = async () => {
    for (;;) {
      // A reconcile that needs no I/O settles in microtasks, and so does
      // get() while keys wait: without a turn of the event loop between
      // keys, a drain of thousands would starve the HTTP server (/healthz,
      // /metrics) and the watches until it ended.
      await nextTurn();
      const key = await queue.get();
      if (key === undefined) return;
      try {
        const result = await reconcile(key);
        queue.forget(key);
        if (result?.requeueAfter !== undefined) queue.addAfter(key, result.requeueAfter);
      } catch (err) {
        opts.log?.warn({ key, err: errorText(err), requeues: queue.numRequeues(key) + 1 }, 'reconcile failed; requeued with backoff');
        queue.addRateLimited(key);
      } finally {
        queue.done(key);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}
