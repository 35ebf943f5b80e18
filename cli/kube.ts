// The cluster as the CLI sees it: the user's kubeconfig and context, as
// kubectl picks them (--kubeconfig, $KUBECONFIG, ~/.kube/config; --context;
// the context's namespace unless -n), and the few Lease and Offer calls the
// commands make. Every write that depends on what was read carries the
// resourceVersion it was read at.
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { GROUP, VERSION } from '../src/api/common.js';
import type { Lease } from '../src/api/lease.js';
import type { Offer } from '../src/api/offer.js';
import { statusCode } from '../src/kube/errors.js';
import type { CommonFlags } from './flags.js';

/** How long one API call may take before its answer counts as lost. */
export const API_TIMEOUT_MS = 30_000;

export class AnswerLostError extends Error {
  override readonly name = 'AnswerLostError';
}

export interface Cluster {
  namespace: string;
  leases: LeaseAPI;
}

export function connect(flags: CommonFlags, env: NodeJS.ProcessEnv = process.env): Cluster {
  const kc = new KubeConfig();
  if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
  else kc.loadFromDefault();
  if (flags.context) {
    if (!kc.getContextObject(flags.context)) throw new Error(`--context ${flags.context}: no such context in the kubeconfig; kubectl config get-contexts lists them`);
    kc.setCurrentContext(flags.context);
  }
  if (!kc.getCurrentCluster()) throw new Error('the kubeconfig names no current cluster: pass --kubeconfig or --context, or set KUBECONFIG');
  const namespace = flags.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? env.LEASEHOLD_NAMESPACE ?? 'default';
  return { namespace, leases: new LeaseAPI(kc.makeApiClient(CustomObjectsApi)) };
}

const LEASES = { group: GROUP, version: VERSION, plural: 'leases' };
const MERGE = () => setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export class LeaseAPI {
  constructor(private readonly api: CustomObjectsApi) {}

  async get(namespace: string, name: string): Promise<Lease | undefined> {
    try {
      return (await timed(this.api.getNamespacedCustomObject({ ...LEASES, namespace, name }))) as Lease;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async list(namespace: string | undefined): Promise<Lease[]> {
    const r = namespace === undefined
      ? await timed(this.api.listClusterCustomObject(LEASES))
      : await timed(this.api.listNamespacedCustomObject({ ...LEASES, namespace }));
    return (r as { items: Lease[] }).items;
  }

  async create(lease: Lease): Promise<Lease> {
    return (await timed(this.api.createNamespacedCustomObject({ ...LEASES, namespace: lease.metadata!.namespace!, body: lease }))) as Lease;
  }

  /** A merge patch; include metadata.resourceVersion in `body` to make it conditional (409 when the Lease changed). */
  async patch(namespace: string, name: string, body: unknown): Promise<Lease> {
    return (await timed(this.api.patchNamespacedCustomObject({ ...LEASES, namespace, name, body }, MERGE()))) as Lease;
  }

  /**
   * Deletes the Lease; false when it was already gone. The controller
   * releases its machine first (finalizer). With `resourceVersion`, only
   * the Lease as it was then (409 when it changed since).
   */
  async delete(namespace: string, name: string, resourceVersion?: string): Promise<boolean> {
    const body = resourceVersion ? { preconditions: { resourceVersion } } : undefined;
    try {
      await timed(this.api.deleteNamespacedCustomObject({ ...LEASES, namespace, name, ...(body ? { body } : {}) }));
      return true;
    } catch (err) {
      if (statusCode(err) === 404) return false;
      throw err;
    }
  }

  async offers(): Promise<Offer[]> {
    const r = await timed(this.api.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'offers' }));
    return (r as { items: Offer[] }).items;
  }
}

function timed<T>(call: Promise<T>, ms = API_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const lost = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AnswerLostError(`the API server did not answer within ${ms / 1000}s`)), ms);
  });
  return Promise.race([call, lost]).finally(() => clearTimeout(timer));
}

/** Whether an error means the request may or may not have been applied: no HTTP answer came back. */
export function answerLost(err: unknown): boolean {
  return err instanceof AnswerLostError || (statusCode(err) === undefined && !(err instanceof TypeError && /Invalid URL/.test(err.message)));
}

/** An API error as one line for people: what was refused and why, with the fix when it is RBAC. */
export function apiErrorText(err: unknown, what: string): string {
  const code = statusCode(err);
  const body = (err as { body?: unknown }).body;
  let reason = err instanceof Error ? err.message : String(err);
  if (typeof body === 'string') {
    try {
      reason = (JSON.parse(body) as { message?: string }).message ?? reason;
    } catch {
      // not JSON: keep the error's own message
    }
  }
  if (code === 403) {
    return `${what}: forbidden (${reason}); Leases need the leasehold-lease-editor role in the namespace (edit or admin include it), listing Offers a ClusterRoleBinding to leasehold-lease-viewer (see "CLI" in the README)`;
  }
  if (code === undefined) return `${what}: ${reason}`;
  return `${what}: ${reason} (HTTP ${code})`;
}
