// The CLI's Lease and Offer calls through @kubernetes/client-node, for a
// kubeconfig the CLI's own client cannot serve (an auth-provider plugin, a
// proxy, no kubeconfig file but a service account). Imported only then.
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { GROUP, VERSION } from '../src/api/common.js';
import type { Lease } from '../src/api/lease.js';
import type { Offer } from '../src/api/offer.js';
import { statusCode } from '../src/kube/errors.js';
import type { CommonFlags } from './flags.js';
import { timed, type Cluster, type LeaseAPI } from './leaseapi.js';

export function connectWithClientNode(flags: CommonFlags, env: NodeJS.ProcessEnv): Cluster {
  const kc = new KubeConfig();
  if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
  else kc.loadFromDefault();
  if (flags.context) {
    if (!kc.getContextObject(flags.context)) throw new Error(`--context ${flags.context}: no such context in the kubeconfig; kubectl config get-contexts lists them`);
    kc.setCurrentContext(flags.context);
  }
  if (!kc.getCurrentCluster()) throw new Error('the kubeconfig names no current cluster: pass --kubeconfig or --context, or set KUBECONFIG');
  const namespace = flags.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? env.LEASEHOLD_NAMESPACE ?? 'default';
  return { namespace, leases: new ClientNodeLeaseAPI(kc.makeApiClient(CustomObjectsApi)) };
}

const LEASES = { group: GROUP, version: VERSION, plural: 'leases' };
const MERGE = () => setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

class ClientNodeLeaseAPI implements LeaseAPI {
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

  async patch(namespace: string, name: string, body: unknown): Promise<Lease> {
    return (await timed(this.api.patchNamespacedCustomObject({ ...LEASES, namespace, name, body }, MERGE()))) as Lease;
  }

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
