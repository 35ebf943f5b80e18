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
