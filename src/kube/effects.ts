// Long effects (acquire, release, probes, launches, drains) run here, off the
// reconcile workers: a worker decides and writes, starts an effect, and is
// free again; the effect's result waits here until a later pass of the same
// object takes it, and its end re-enqueues that object.
//
// Effects are keyed by owner (an object's UID) and id (kind and attempt). An
// owner has at most one effect running: a release must not start while the
// acquire it undoes is still running, so the second waits for the first to
// be cancelled or to end.
import type { Logger } from 'pino';
import { errorText } from './errors.js';

export type EffectState<R> = { state: 'running'; id: string } | { state: 'done'; id: string; result: R };

interface Running {
  id: string;
  kind: string;
  abort: AbortController;
  done: Promise<void>;
}

export interface EffectRunnerOptions {
  log?: Logger;
  /** Called when the count of running effects of a kind changes (for a gauge). */
  onCount?: (kind: string, running: number) => void;
}

export class EffectRunner<R> {
  private readonly running = new Map<string, Running>();
  private readonly results = new Map<string, { id: string; result: R }>();
  private accepting = true;

  constructor(private readonly opts: EffectRunnerOptions = {}) {}

  /**
   * Starts `run` as effect `id` of `owner` and calls `settled` when it ends.
   * Refused (false) while another effect of the owner runs or a result of it
   * waits to be taken, and once the runner is draining.
   */
  start(owner: string, id: string, run: (signal: AbortSignal) => Promise<R>, settled: () => void): boolean {
    if (!this.accepting || this.running.has(owner) || this.results.has(owner)) return false;
    const abort = new AbortController();
    const kind = id.split('/')[0] ?? id;
    const entry: Running = { id, kind, abort, done: Promise.resolve() };
    this.running.set(owner, entry);
    this.count(kind);
    entry.done = (async () => {
      let result: R;
      try {
        result = await run(abort.signal);
      } catch (err) {
        // An effect reports failure in its result; a throw is a bug in it.
        this.opts.log?.error({ owner, effect: id, err: errorText(err) }, 'effect threw');
        this.running.delete(owner);
        this.count(kind);
        settled();
        return;
      }
      this.running.delete(owner);
      this.results.set(owner, { id, result });
      this.count(kind);
      settled();
    })();
    return true;
  }

  /** The owner's effect: running, or done with a result not yet taken; undefined when neither. */
  get(owner: string): EffectState<R> | undefined {
    const r = this.running.get(owner);
    if (r) return { state: 'running', id: r.id };
    const done = this.results.get(owner);
    return done ? { state: 'done', id: done.id, result: done.result } : undefined;
  }

  /** Removes and returns the owner's result. */
  take(owner: string): { id: string; result: R } | undefined {
    const done = this.results.get(owner);
    this.results.delete(owner);
    return done;
  }

  /** Aborts the owner's running effect; its end still re-enqueues the owner. */
  cancel(owner: string): void {
    this.running.get(owner)?.abort.abort();
  }

  /** Drops everything of an owner that no longer exists. */
  forget(owner: string): void {
    this.cancel(owner);
    this.results.delete(owner);
  }

  inFlight(kind?: string): number {
    let n = 0;
    for (const r of this.running.values()) if (kind === undefined || r.kind === kind) n++;
    return n;
  }

  /** Resolves once nothing runs (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size) await Promise.all([...this.running.values()].map((r) => r.done));
  }

  /**
   * Stops starting effects, gives the running ones `graceMs` to end on their
   * own, then aborts what is left and waits for it to wind down.
   */
  async drain(graceMs: number): Promise<void> {
    this.accepting = false;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((r) => (timer = setTimeout(r, graceMs)));
    await Promise.race([this.idle(), grace]);
    clearTimeout(timer);
    if (!this.running.size) return;
    this.opts.log?.warn({ effects: [...this.running.values()].map((r) => r.id) }, 'effects still running after the shutdown grace period; cancelling them');
    for (const r of this.running.values()) r.abort.abort();
    await this.idle();
  }

  private count(kind: string): void {
    this.opts.onCount?.(kind, this.inFlight(kind));
  }
}
