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
import type { Logger } from 'pino';
import { errorText } from './errors.js';
import { ObjectIntake, type DropReason } from './objectintake.js';
import { checkKubeObject, type ObjectCheck } from './objectschema.js';
import { diffRelist, type InformerEvent } from './relistdiff.js';
import { objectKey } from './resource.js';
import { stripManagedFields } from './transform.js';
import { realClock, sleep, type Clock } from './clock.js';

/** A list with more pages than this is refused: 1,000 pages of 500 objects is far beyond any cluster we serve, and a server that hands out `continue` tokens forever must not keep us listing. */
export const MAX_LIST_PAGES = 1000;

export interface InformerOptions<T> {
  log?: Logger;
  /** Applied to every listed or watched object before it is stored or handed to handlers. Default stripManagedFields. */
  transform?: (object: T) => T;
  /** Each listed or watched object must pass this before the transform; one that fails is dropped. Default checkKubeObject. */
  check?: ObjectCheck;
  /** Called for each object, event or answer dropped, with why. */
  onDrop?: (reason: DropReason) => void;
  /** Called each time a handler threw or its promise rejected. */
  onHandlerError?: () => void;
  /** Pages one list may take before it is refused. Default MAX_LIST_PAGES. */
  maxListPages?: number;
  /** Re-emit every cached object as an update this often; 0 turns it off. Default 10 min. */
  resyncMs?: number;
  /** Restart a watch (or abort a list page) that has delivered nothing for this long. Default 5 min. */
  watchdogMs?: number;
  /** Backoff between restarts: `initialBackoffMs` doubling to `maxBackoffMs`, jittered ±20 %. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  pageSize?: number;
  labelSelector?: string;
  fieldSelector?: string;
  /** Called on every restart with its reason: `error`, `expired`, `closed` or `watchdog`. */
  onRestart?: (reason: RestartReason) => void;
  clock?: Clock;
  /** Replaces the HTTP transport built from the KubeConfig (tests). */
  transport?: ListWatchTransport<T>;
}

export type RestartReason = 'error' | 'expired' | 'closed' | 'watchdog';

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

  constructor(
    kc: KubeConfig,
    readonly path: string,
    private readonly opts: InformerOptions<T> = {},
  ) {
    this.transport = opts.transport ?? new KubeListWatch<T>(kc, path);
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
    const items: T[] = [];
    let resourceVersion = '';
    let cont: string | undefined;
    let pages = 0;
    const maxPages = this.opts.maxListPages ?? MAX_LIST_PAGES;
    do {
      if (++pages > maxPages) {
        throw new InputLimitError('too_many_pages', `a list of ${this.path} still had more pages after ${maxPages}, the limit on pages per list; the list was dropped`);
      }
      const query: Record<string, string> = { ...this.selectors(), limit: String(this.opts.pageSize ?? 500) };
      if (cont) query.continue = cont;
      const page = await this.guarded((signal) => this.transport.list(query, signal));
      const itemKind = page.kind?.endsWith('List') ? page.kind.slice(0, -4) : undefined;
      for (const item of page.items) {
        const object = this.intake.admit(item, (o) => {
          // Items of a built-in list come without kind and apiVersion; fill them in so logs and handlers can rely on them.
          if (!o.kind && itemKind) o.kind = itemKind;
          if (!o.apiVersion && page.apiVersion) o.apiVersion = page.apiVersion;
        });
        if (object) items.push(object);
      }
      resourceVersion = page.resourceVersion;
      cont = page.continue;
    } while (cont);

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
              this.apply(event);
            },
            signal,
          ),
        () => (silent = true),
      );
    } catch (err) {
      if (!streamError && !silent) throw err;
    }
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
        this.cache.set(key, object);
        this.dispatch(old ? { type: 'update', object, old } : { type: 'add', object });
        break;
      }
      case 'DELETED': {
        const old = this.cache.get(key);
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
