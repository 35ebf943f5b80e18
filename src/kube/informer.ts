// A list-then-watch cache of one resource that keeps itself alive.
//
// client-node's own informer stops for good on any watch error but 410 and
// never resyncs. This one lists (paginated), watches from the list's
// resourceVersion with bookmarks, and on any close or error watches again
// after a jittered exponential backoff. It relists when the resourceVersion
// has expired (410 Gone, as an HTTP status or as an ERROR event in the
// stream), diffing the new list against the cache so handlers see the deletes
// and changes they missed. A watchdog restarts a watch that has gone silent,
// and a periodic resync re-emits every cached object as an update.
//
// Handlers receive the cached objects themselves: they must not mutate them.
// What is received is checked and transformed before it is stored, and
// dropped, never thrown, when it fails (objectintake.ts).
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { ApiStatusError, InputLimitError, isResourceVersionExpired, KubeListWatch, statusFromObject, type ListWatchTransport, type RawWatchEvent } from './listwatch.js';
import { MAX_LIST_PAGES, readList } from './listpages.js';
import { HoldBudget, OverBudgetError } from './holdbudget.js';
import type { InformerOptions, RestartReason } from './informeroptions.js';
import type { Logger } from 'pino';
import { errorText } from './errors.js';
import { ObjectIntake } from './objectintake.js';
import { checkKubeObject } from './objectschema.js';
import { diffRelist, type InformerEvent } from './relistdiff.js';
import { objectKey } from './resource.js';
import { stripManagedFields } from './transform.js';
import { realClock, sleep, type Clock } from './clock.js';

export { MAX_LIST_PAGES } from './listpages.js';

export type { InformerOptions, RestartReason } from './informeroptions.js';

interface Handlers<T> {
  add: (object: T) => void;
  update: (object: T, old: T) => void;
  delete: (object: T) => void;
  error: (err: Error) => void;
}

export class ResilientInformer<T extends KubernetesObject> {
  /** Lists done (the first included), relists after it, restarts of the list-watch loop, and watchdog firings. */
  readonly stats = { lists: 0, relists: 0, restarts: 0, watchdogs: 0 };
  private cache = new Map<string, T>();
  private resourceVersion = '';
  private needsList = true;
  private synced = false;
  private syncWaiters: (() => void)[] = [];
  private readonly handlers: { [E in keyof Handlers<T>]: Handlers<T>[E][] } = { add: [], update: [], delete: [], error: [] };
  private readonly transport: ListWatchTransport<T>;
  private readonly clock: Clock;
  private readonly log?: Logger;
  private readonly resyncMs: number;
  private readonly watchdogMs: number;
  private readonly intake: ObjectIntake<T>;
  private readonly stopController = new AbortController();
  private request?: AbortController;
  private watchdog?: unknown;
  private resyncTimer?: unknown;
  private loop?: Promise<void>;
  private watchDelivered = false;
  private readonly budget?: HoldBudget;
  /** Why the informer stopped for good past its budget; undefined while it runs. */
  private overBudget?: OverBudgetError;

  constructor(
    kc: KubeConfig,
    readonly path: string,
    private readonly opts: InformerOptions<T> = {},
  ) {
    this.transport = opts.transport ?? new KubeListWatch<T>(kc, path, opts.limits);
    if (opts.budget) this.budget = new HoldBudget(opts.budget);
    this.clock = opts.clock ?? realClock;
    this.log = opts.log;
    this.resyncMs = opts.resyncMs ?? 10 * 60_000;
    this.watchdogMs = opts.watchdogMs ?? 5 * 60_000;
    this.intake = new ObjectIntake<T>({
      path,
      check: opts.check ?? checkKubeObject,
      transform: opts.transform ?? stripManagedFields,
      clock: this.clock,
      log: opts.log,
      onDrop: (reason) => this.opts.onDrop?.(reason),
    });
  }

  on<E extends keyof Handlers<T>>(event: E, fn: Handlers<T>[E]): this {
    this.handlers[event].push(fn);
    return this;
  }

  start(): void {
    if (this.loop || this.stopController.signal.aborted) return;
    this.loop = this.run();
    this.scheduleResync();
  }

  /** Aborts the list or watch in flight and clears every timer; the informer cannot start again. */
  async stop(): Promise<void> {
    this.stopController.abort();
    this.request?.abort();
    this.disarmWatchdog();
    if (this.resyncTimer !== undefined) this.clock.clearTimeout(this.resyncTimer);
    this.resyncTimer = undefined;
    await this.loop;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves once the first list is in the cache and its add events have been delivered. */
  waitForSync(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.cache.get(namespace ? `${namespace}/${name}` : name);
  }

  /** Why the informer was cut off past its budget; undefined while it has not been. */
  cutOff(): OverBudgetError | undefined {
    return this.overBudget;
  }

  /** The resourceVersion the next watch starts from. */
  lastResourceVersion(): string {
    return this.resourceVersion;
  }

  private get stopped(): boolean {
    return this.stopController.signal.aborted;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      let reason: RestartReason;
      let failure: unknown;
      this.watchDelivered = false;
      try {
        if (this.needsList) await this.relist();
        reason = await this.watchOnce();
      } catch (err) {
        if (this.stopped) break;
        if (err instanceof OverBudgetError) {
          this.cutOffAt(err);
          break;
        }
        failure = err;
        reason = isResourceVersionExpired(err) ? 'expired' : 'error';
        if (err instanceof InputLimitError) this.opts.onDrop?.(err.reason);
      }
      if (this.stopped) break;
      // A watch that delivered events was healthy, however it ended: back off from the start again.
      if (this.watchDelivered) failures = 0;
      const delayMs = this.backoff(failures++);
      if (reason === 'expired') {
        this.needsList = true;
        this.log?.info({ path: this.path, err: errorText(failure), retryInMs: delayMs }, 'resourceVersion expired; relisting');
      } else if (reason === 'error') {
        this.log?.warn({ path: this.path, err: errorText(failure), retryInMs: delayMs }, 'list or watch failed; retrying');
        this.emitError(failure);
      }
      this.stats.restarts++;
      this.opts.onRestart?.(reason);
      await sleep(this.clock, delayMs, this.stopController.signal);
    }
  }

  /**
   * Past the budget the source is not read any further: whatever it sends
   * next would only be held again. The cache goes too, so what it held is
   * freed; consumers see an informer that never synced.
   */
  private cutOffAt(err: OverBudgetError): void {
    this.overBudget = err;
    this.cache = new Map();
    this.budget?.clear();
    this.synced = false;
    this.stopController.abort();
    if (this.resyncTimer !== undefined) this.clock.clearTimeout(this.resyncTimer);
    this.resyncTimer = undefined;
    this.log?.warn({ path: this.path, held: err.held, limits: err.limits, reason: err.kind }, 'over its budget: stopped reading this source and dropped its cache');
    this.opts.onOverBudget?.(err);
  }

  private backoff(failures: number): number {
    const base = Math.min(this.opts.maxBackoffMs ?? 30_000, (this.opts.initialBackoffMs ?? 200) * 2 ** Math.min(failures, 20));
    return Math.round(base * (0.8 + 0.4 * Math.random()));
  }

  private selectors(): Record<string, string> {
    const q: Record<string, string> = {};
    if (this.opts.labelSelector) q.labelSelector = this.opts.labelSelector;
    if (this.opts.fieldSelector) q.fieldSelector = this.opts.fieldSelector;
    return q;
  }

  private async relist(): Promise<void> {
    const { items, resourceVersion } = await readList<T>({
      path: this.path,
      selectors: this.selectors(),
      pageSize: this.opts.pageSize ?? 500,
      maxPages: this.opts.maxListPages ?? MAX_LIST_PAGES,
      fetch: (query) => this.guarded((signal) => this.transport.list(query, signal)),
      intake: this.intake,
      budget: this.budget,
    });

    const initial = this.stats.lists === 0;
    this.stats.lists++;
    if (!initial) this.stats.relists++;
    const { cache, events } = diffRelist(this.cache, items);
    // The cache is replaced before any handler runs, so a handler that reads
    // the cache sees the state the event belongs to.
    this.cache = cache;
    this.resourceVersion = resourceVersion;
    this.needsList = false;
    for (const e of events) this.dispatch(e);
    if (!this.synced) {
      this.synced = true;
      this.syncWaiters.splice(0).forEach((r) => r());
    }
  }

  /** Runs one request under its own AbortController, aborted by stop() or by the watchdog. */
  private async guarded<R>(fn: (signal: AbortSignal) => Promise<R>, onWatchdog?: () => void): Promise<R> {
    const request = new AbortController();
    this.request = request;
    this.armWatchdog(request, onWatchdog);
    try {
      return await fn(request.signal);
    } catch (err) {
      if (request.signal.aborted && !this.stopped && !onWatchdog) throw new Error(`no answer from ${this.path} for ${this.watchdogMs} ms`);
      throw err;
    } finally {
      this.disarmWatchdog();
      if (this.request === request) this.request = undefined;
    }
  }

  private async watchOnce(): Promise<RestartReason> {
    let silent = false;
    let streamError: ApiStatusError | undefined;
    let overBudget: OverBudgetError | undefined;
    const query = {
      ...this.selectors(),
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: 'true',
      // Like client-go: the server ends each watch after 5 to 10 minutes, so
      // no connection lives forever behind a load balancer.
      timeoutSeconds: String(Math.floor(300 * (1 + Math.random()))),
    };
    try {
      await this.guarded(
        (signal) =>
          this.transport.watch(
            query,
            (event) => {
              if (signal.aborted) return;
              if (event.type === 'ERROR') {
                streamError = statusFromObject(event.object);
                this.request?.abort();
                return;
              }
              this.watchDelivered = true;
              this.armWatchdog(this.request!, () => (silent = true));
              try {
                this.apply(event);
              } catch (err) {
                if (!(err instanceof OverBudgetError)) throw err;
                overBudget = err;
                this.request?.abort();
              }
            },
            signal,
          ),
        () => (silent = true),
      );
    } catch (err) {
      if (!streamError && !silent && !overBudget) throw err;
    }
    if (overBudget) throw overBudget;
    if (streamError) throw streamError;
    if (silent) {
      this.stats.watchdogs++;
      this.log?.warn({ path: this.path, watchdogMs: this.watchdogMs }, 'watch silent; restarting');
      // Open for a whole watchdog period: the connection worked.
      this.watchDelivered = true;
      return 'watchdog';
    }
    this.log?.debug({ path: this.path }, 'watch closed by the server; restarting');
    return 'closed';
  }

  private apply(event: RawWatchEvent): void {
    const rv = (event.object as { metadata?: { resourceVersion?: unknown } } | null | undefined)?.metadata?.resourceVersion;
    // Taken for a dropped object too: watching again from before it would only bring it back.
    if (typeof rv === 'string' && rv !== '') this.resourceVersion = rv;
    // A BOOKMARK carries only its resourceVersion, taken above.
    if (event.type === 'BOOKMARK') return;
    if (event.type !== 'ADDED' && event.type !== 'MODIFIED' && event.type !== 'DELETED') {
      this.intake.drop('invalid_event', { event: String(event.type).replace(/[\x00-\x1f\x7f]+/g, ' ').slice(0, 32) }, 'dropped a watch event of an unknown type');
      return;
    }
    const object = this.intake.admit(event.object);
    if (!object) return;
    const key = objectKey(object);
    switch (event.type) {
      case 'ADDED':
      case 'MODIFIED': {
        const old = this.cache.get(key);
        this.budget?.stored(key, object);
        this.cache.set(key, object);
        this.dispatch(old ? { type: 'update', object, old } : { type: 'add', object });
        break;
      }
      case 'DELETED': {
        const old = this.cache.get(key);
        this.budget?.removed(key);
        this.cache.delete(key);
        if (old) this.dispatch({ type: 'delete', object });
        break;
      }
    }
  }

  private armWatchdog(request: AbortController, onFire?: () => void): void {
    this.disarmWatchdog();
    if (this.watchdogMs <= 0) return;
    this.watchdog = this.clock.setTimeout(() => {
      this.watchdog = undefined;
      onFire?.();
      request.abort();
    }, this.watchdogMs);
  }

  private disarmWatchdog(): void {
    if (this.watchdog !== undefined) this.clock.clearTimeout(this.watchdog);
    this.watchdog = undefined;
  }

  private scheduleResync(): void {
    if (this.resyncMs <= 0 || this.stopped) return;
    this.resyncTimer = this.clock.setTimeout(() => {
      if (this.synced) for (const object of this.cache.values()) this.dispatch({ type: 'update', object, old: object });
      this.scheduleResync();
    }, this.resyncMs);
  }

  private dispatch(e: InformerEvent<T>): void {
    const failed = (err: unknown) => {
      this.opts.onHandlerError?.();
      this.log?.error({ path: this.path, event: e.type, key: objectKey(e.object), err: errorText(err) }, 'informer handler threw');
    };
    for (const fn of this.handlers[e.type]) {
      try {
        const result: unknown = e.type === 'update' ? (fn as Handlers<T>['update'])(e.object, e.old) : (fn as Handlers<T>['add'])(e.object);
        // An async handler's rejection would otherwise be unhandled.
        if (result instanceof Promise) result.catch(failed);
      } catch (err) {
        failed(err);
      }
    }
  }

  private emitError(err: unknown): void {
    const error = err instanceof Error ? err : new Error(String(err));
    for (const fn of this.handlers.error) {
      try {
        fn(error);
      } catch {
        // An error handler that throws has nothing left to tell.
      }
    }
  }
}
