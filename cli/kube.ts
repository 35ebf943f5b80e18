// The cluster as the CLI sees it: the user's kubeconfig and context, as
// kubectl picks them (--kubeconfig, $KUBECONFIG, ~/.kube/config; --context;
// the context's namespace unless -n), and the few Lease and Offer calls the
// commands make (leaseapi.ts), through the CLI's own HTTP client
// (kube-http.ts) unless the kubeconfig needs what only client-node does
// (kube-client-node.ts).
import type { CommonFlags } from './flags.js';
import { HttpLeaseAPI } from './kube-http.js';
import { readKubeconfig } from './kubeconfig.js';
import type { Cluster } from './leaseapi.js';

export async function connect(flags: CommonFlags, env: NodeJS.ProcessEnv = process.env): Promise<Cluster> {
  const read = readKubeconfig(flags.kubeconfig, flags.context, env);
  if ('unsupported' in read) {
    // Loaded only here: client-node alone takes longer to load than a run on a Ready Lease takes to reach its machine.
    const { connectWithClientNode } = await import('./kube-client-node.js');
    return connectWithClientNode(flags, env);
  }
  const namespace = flags.namespace ?? read.endpoint.namespace ?? env.LEASEHOLD_NAMESPACE ?? 'default';
  return { namespace, leases: new HttpLeaseAPI(read.endpoint) };
}
