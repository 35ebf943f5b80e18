// What a reconciler reads and returns, whatever its kind.

/** A read-only view of an informer's cache. Objects are shared: never mutate them. */
export interface ObjectCache<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(): T[];
}

/** What a reconcile asks of its work queue: come back after this many milliseconds. */
export interface ReconcileResult {
  requeueAfter?: number;
}

/**
 * A cache that tells of each change as it lands (an informer): indexes kept
 * from it stay current without walking the whole cache on every read.
 */
export interface ChangeFeed<T> {
  on(event: 'add' | 'update' | 'delete', fn: (object: T) => void): unknown;
}

/** An index fed from a cache: what the cache holds now, then every change. */
export interface CacheIndex<T> {
  observe(object: T): void;
  gone(object: T): void;
}

/** Seeds `index` with what `cache` holds, then keeps it fed from the cache's changes. */
export function feedIndex<T>(cache: ObjectCache<T> & ChangeFeed<T>, index: CacheIndex<T>): void {
  for (const o of cache.list()) index.observe(o);
  cache.on('add', (o) => index.observe(o));
  cache.on('update', (o) => index.observe(o));
  cache.on('delete', (o) => index.gone(o));
}
