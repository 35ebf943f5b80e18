// What a relist means for an informer's handlers. A watch that lost its
// resourceVersion (410 Gone) missed the deletes and changes in between; the
// informer lists again and hands its handlers the difference, so they see
// every object the cache gained, changed or lost.
import type { KubernetesObject } from '@kubernetes/client-node';
import { objectKey } from './resource.js';

export type InformerEvent<T> = { type: 'add'; object: T } | { type: 'update'; object: T; old: T } | { type: 'delete'; object: T };

/**
 * What a relist means for handlers: objects new to the cache are adds, those
 * whose resourceVersion changed are updates, and those no longer listed are
 * deletes (carrying the last state we saw). Pure; the old cache is not touched.
 */
export function diffRelist<T extends KubernetesObject>(cache: ReadonlyMap<string, T>, items: readonly T[]): { cache: Map<string, T>; events: InformerEvent<T>[] } {
  const next = new Map<string, T>();
  const events: InformerEvent<T>[] = [];
  for (const object of items) {
    const key = objectKey(object);
    next.set(key, object);
    const old = cache.get(key);
    if (!old) events.push({ type: 'add', object });
    else if (old.metadata?.resourceVersion !== object.metadata?.resourceVersion || object.metadata?.resourceVersion === undefined) {
      events.push({ type: 'update', object, old });
    }
  }
  for (const [key, object] of cache) {
    if (!next.has(key)) events.push({ type: 'delete', object });
  }
  return { cache: next, events };
}
