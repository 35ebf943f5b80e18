// Manifests of the four kinds for e2e tests, one builder a kind, so a test
// states only the spec it is about. The result is a plain object: give it to
// apply (support/kube.ts) or JSON.stringify it for a tenant's kubectl.
import { API_VERSION } from '../../src/api/group.js';

type Spec = Record<string, unknown>;
type Metadata = { annotations?: Record<string, string>; labels?: Record<string, string>; finalizers?: string[] };

function manifest(kind: string, name: string, namespace: string | undefined, spec: unknown, metadata: Metadata = {}) {
  return { apiVersion: API_VERSION, kind, metadata: { name, ...(namespace !== undefined ? { namespace } : {}), ...metadata }, spec };
}

/** With no namespace, the request's path (or kubectl's context) gives it. */
export const leaseManifest = (name: string, namespace: string | undefined, spec: Spec, metadata?: Metadata) => manifest('Lease', name, namespace, spec, metadata);
/** Offers are cluster-scoped. */
export const offerManifest = (name: string, spec: Spec, metadata?: Metadata) => manifest('Offer', name, undefined, spec, metadata);
export const peerFleetManifest = (name: string, namespace: string, spec: Spec, metadata?: Metadata) => manifest('PeerFleet', name, namespace, spec, metadata);
/** With no namespace, kubectl puts it in its context's (a tenant's) namespace. */
export const runnerTargetManifest = (name: string, namespace: string | undefined, spec: unknown, metadata?: Metadata) => manifest('RunnerTarget', name, namespace, spec, metadata);
