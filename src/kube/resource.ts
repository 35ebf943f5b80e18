// Identifies a kind the controllers write to, for generic helpers.
import type { KubernetesObject } from '@kubernetes/client-node';

export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export interface Object<S = unknown, St = unknown> extends KubernetesObject {
  spec: S;
  status?: St;
}

export function objectKey(obj: KubernetesObject): string {
  const ns = obj.metadata?.namespace;
  return ns ? `${ns}/${obj.metadata?.name}` : `${obj.metadata?.name}`;
}

export function splitKey(key: string): { namespace?: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export function resourcePath(ref: ResourceRef, namespace?: string): string {
  const base = ref.group ? `/apis/${ref.group}/${ref.version}` : `/api/${ref.version}`;
  return ref.namespaced && namespace ? `${base}/namespaces/${namespace}/${ref.plural}` : `${base}/${ref.plural}`;
}
