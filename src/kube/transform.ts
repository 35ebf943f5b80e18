// Cache transforms: what an informer does to an object before it stores it.
import type { KubernetesObject } from '@kubernetes/client-node';

export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * The cache transform informers use unless told otherwise, after
 * controller-runtime's TransformStripManagedFields: `metadata.managedFields`
 * and the `kubectl.kubernetes.io/last-applied-configuration` annotation are
 * server-side and client-side apply bookkeeping, often larger than the rest
 * of the object, and no reconciler reads them. Mutates and returns `object`,
 * which was parsed for the cache alone.
 */
export function stripManagedFields<T extends KubernetesObject>(object: T): T {
  const metadata = object.metadata;
  if (typeof metadata !== 'object' || metadata === null) return object;
  delete metadata.managedFields;
  const annotations = metadata.annotations;
  if (typeof annotations === 'object' && annotations !== null && LAST_APPLIED_ANNOTATION in annotations) {
    delete annotations[LAST_APPLIED_ANNOTATION];
    if (Object.keys(annotations).length === 0) delete metadata.annotations;
  }
  return object;
}
