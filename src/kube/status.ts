// Writes an object's status with a JSON merge patch on its /status
// subresource. Two rules make it safe and cheap:
//  - no request at all when the desired status equals the current one, so a
//    quiet cluster costs zero writes;
//  - the patch carries the resourceVersion the decision was made from, so a
//    write based on a stale read fails with 409 instead of overwriting newer
//    state. For an intent write (status recorded before a side effect) that
//    409 means "not durable": the caller must not run the effect.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { mergePatch } from './mergepatch.js';
import type { Object, ResourceRef } from './resource.js';

export interface StatusWriteOptions {
  /** Skip the resourceVersion precondition (only for writes that cannot lose information). */
  unconditional?: boolean;
}

export interface StatusClient {
  patchStatus(ref: ResourceRef, namespace: string | undefined, name: string, body: unknown): Promise<unknown>;
}

export class KubeStatusClient implements StatusClient {
  constructor(private readonly api: CustomObjectsApi) {}

  async patchStatus(ref: ResourceRef, namespace: string | undefined, name: string, body: unknown): Promise<unknown> {
    const opts = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const common = { group: ref.group, version: ref.version, plural: ref.plural, name, body };
    return ref.namespaced
      ? this.api.patchNamespacedCustomObjectStatus({ ...common, namespace: namespace! }, opts)
      : this.api.patchClusterCustomObjectStatus(common, opts);
  }
}

export class StatusWriter {
  writes = 0;
  skipped = 0;

  constructor(private readonly client: StatusClient) {}

  /**
   * Makes `obj.status` equal `status`. Returns the object as the server has
   * it after the write (with its new resourceVersion), or `obj` unchanged
   * when nothing differed.
   */
  async write<T extends Object>(ref: ResourceRef, obj: T, status: NonNullable<T['status']>, opts: StatusWriteOptions = {}): Promise<T> {
    const patch = mergePatch(obj.status ?? {}, status);
    if (patch === undefined) {
      this.skipped++;
      return obj;
    }
    const body: Record<string, unknown> = { status: patch };
    if (!opts.unconditional) body.metadata = { resourceVersion: obj.metadata?.resourceVersion };
    this.writes++;
    const updated = (await this.client.patchStatus(ref, obj.metadata?.namespace, obj.metadata!.name!, body)) as T;
    return updated;
  }
}
