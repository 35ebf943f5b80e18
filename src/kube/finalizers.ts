// Finalizer helpers. The list is written with the object's resourceVersion so
// that another writer's finalizer is never dropped by a stale read.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Object, ResourceRef } from './resource.js';

export function hasFinalizer(obj: Object, finalizer: string): boolean {
  return obj.metadata?.finalizers?.includes(finalizer) ?? false;
}

export class Finalizers {
  constructor(private readonly api: CustomObjectsApi) {}

  add<T extends Object>(ref: ResourceRef, obj: T, finalizer: string): Promise<T> {
    if (hasFinalizer(obj, finalizer)) return Promise.resolve(obj);
    return this.patch(ref, obj, [...(obj.metadata?.finalizers ?? []), finalizer]);
  }

  remove<T extends Object>(ref: ResourceRef, obj: T, finalizer: string): Promise<T> {
    if (!hasFinalizer(obj, finalizer)) return Promise.resolve(obj);
    return this.patch(ref, obj, (obj.metadata?.finalizers ?? []).filter((f) => f !== finalizer));
  }

  private async patch<T extends Object>(ref: ResourceRef, obj: T, finalizers: string[]): Promise<T> {
    const body = { metadata: { finalizers, resourceVersion: obj.metadata?.resourceVersion } };
    const opts = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const common = { group: ref.group, version: ref.version, plural: ref.plural, name: obj.metadata!.name!, body };
    return (ref.namespaced
      ? await this.api.patchNamespacedCustomObject({ ...common, namespace: obj.metadata!.namespace! }, opts)
      : await this.api.patchClusterCustomObject(common, opts)) as T;
  }
}
