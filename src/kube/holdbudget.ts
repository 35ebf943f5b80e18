// How much an informer may hold from one API server: objects and bytes, the
// cache and a list in progress together. The size limits of listwatch.ts
// bound one answer; they do not bound a server that sends valid answers
// without end (pages whose `continue` never runs out, a watch that streams
// ever-new objects). Another party's API server (a peer fleet's) could grow
// our heap that way until the process dies, and every controller with it.
// With a budget, the informer stops at the first object past it instead.
import { formatBytes } from './listwatch.js';

export interface HoldLimits {
  /** Objects held at once (cache plus a list in progress). */
  objects: number;
  /** Bytes held at once, counted as each stored object's JSON length. */
  bytes: number;
}

export interface Holding {
  objects: number;
  bytes: number;
}

/** Which limit was passed: held objects, held bytes, or a list page with more items than asked for. */
export type OverBudgetKind = 'objects' | 'bytes' | 'page_items';

/** An informer's source passed its budget; `held` is the figure at that moment. */
export class OverBudgetError extends Error {
  constructor(
    readonly kind: OverBudgetKind,
    readonly held: Holding,
    readonly limits: HoldLimits,
    message: string,
  ) {
    super(message);
    this.name = 'OverBudgetError';
  }
}

/** The JSON length of an object as the cache stores it: a plain, stable measure of what it holds. */
export const jsonSize = (object: unknown): number => JSON.stringify(object)?.length ?? 0;

export function describeHolding(h: Holding): string {
  return `${h.objects} object${h.objects === 1 ? '' : 's'} in ${formatSize(h.bytes)}`;
}

/** Bytes in MiB with one decimal past 1 MiB, so that a figure just over a budget reads as over it. */
export function formatSize(bytes: number): string {
  const MiB = 1024 * 1024;
  if (bytes < MiB) return formatBytes(bytes);
  return bytes % MiB === 0 ? formatBytes(bytes) : `${(bytes / MiB).toFixed(1)} MiB`;
}

/**
 * The running count behind a budget. The cache's objects are counted by key;
 * while a list is read, its objects are counted on top of the cache (both
 * are in memory until the list ends and replaces the cache).
 */
export class HoldBudget {
  private readonly sizes = new Map<string, number>();
  private cacheBytes = 0;
  private listing?: { sizes: Map<string, number>; bytes: number };

  constructor(
    readonly limits: HoldLimits,
    private readonly sizeOf: (object: unknown) => number = jsonSize,
  ) {}

  held(): Holding {
    return {
      objects: this.sizes.size + (this.listing?.sizes.size ?? 0),
      bytes: this.cacheBytes + (this.listing?.bytes ?? 0),
    };
  }

  beginList(): void {
    this.listing = { sizes: new Map(), bytes: 0 };
  }

  /** A page of `items` objects came for a list that asked for at most `limit`. */
  checkPage(items: number, limit: number): void {
    if (items <= limit) return;
    throw this.over('page_items', `a list page held ${items} objects where at most ${limit} were asked for`);
  }

  /** Counts one listed object; throws when the holding passes the budget. */
  listed(key: string, object: unknown): void {
    const listing = this.listing ?? (this.beginList(), this.listing!);
    const size = this.sizeOf(object);
    listing.bytes += size - (listing.sizes.get(key) ?? 0);
    listing.sizes.set(key, size);
    this.check();
  }

  /** The list ended and its objects became the cache. */
  endList(): void {
    const listing = this.listing;
    this.listing = undefined;
    if (!listing) return;
    this.sizes.clear();
    for (const [k, v] of listing.sizes) this.sizes.set(k, v);
    this.cacheBytes = listing.bytes;
  }

  /** The list was abandoned: the cache stays as it was. */
  abandonList(): void {
    this.listing = undefined;
  }

  /** Counts a watched object stored under `key` (replacing what was there); throws when the holding passes the budget, counting nothing. */
  stored(key: string, object: unknown): void {
    const size = this.sizeOf(object);
    const before = this.sizes.get(key);
    const held = this.held();
    const next = { objects: held.objects + (before === undefined ? 1 : 0), bytes: held.bytes - (before ?? 0) + size };
    this.check(next);
    this.sizes.set(key, size);
    this.cacheBytes = next.bytes - (this.listing?.bytes ?? 0);
  }

  removed(key: string): void {
    const before = this.sizes.get(key);
    if (before === undefined) return;
    this.sizes.delete(key);
    this.cacheBytes -= before;
  }

  clear(): void {
    this.sizes.clear();
    this.cacheBytes = 0;
    this.listing = undefined;
  }

  private check(held: Holding = this.held()): void {
    if (held.objects > this.limits.objects) throw this.over('objects', `it would hold ${describeHolding(held)}, past the budget of ${this.limits.objects} objects`, held);
    if (held.bytes > this.limits.bytes) throw this.over('bytes', `it would hold ${describeHolding(held)}, past the budget of ${formatSize(this.limits.bytes)}`, held);
  }

  private over(kind: OverBudgetKind, message: string, held: Holding = this.held()): OverBudgetError {
    return new OverBudgetError(kind, held, this.limits, message);
  }
}
