// API clients for one cluster: ours, from a kubeconfig, or another cluster
// reached with a URL and a bearer token (a peer fleet's API server).
import { BatchV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, type HttpLibrary } from '@kubernetes/client-node';
import { IDLE_CONNECTION_MS, makeCountingClient, type ApiConstructor } from './client.js';
import type { Metrics } from './metrics.js';

export interface ClusterClients {
  /** A name for logs and metrics: `local`, or the remote cluster's name. */
  readonly name: string;
  readonly kubeConfig: KubeConfig;
  readonly core: CoreV1Api;
  readonly coordination: CoordinationV1Api;
  readonly batch: BatchV1Api;
  readonly custom: CustomObjectsApi;
}

/**
 * Clients that count their requests under `client` in
 * leasehold_kube_requests_total. `httpApi` replaces client-node's own HTTP
 * library (for another party's cluster: see boundedhttp.ts).
 */
export function clusterClients(name: string, kubeConfig: KubeConfig, metrics: Metrics, client = 'controller', httpApi?: HttpLibrary): ClusterClients {
  const make = <T>(api: ApiConstructor<T>) => makeCountingClient(kubeConfig, api, metrics, client, IDLE_CONNECTION_MS, httpApi);
  return {
    name,
    kubeConfig,
    core: make(CoreV1Api),
    coordination: make(CoordinationV1Api),
    batch: make(BatchV1Api),
    custom: make(CustomObjectsApi),
  };
}

export interface RemoteCluster {
  name: string;
  /** The API server's URL, https:// unless it is a loopback test server. */
  server: string;
  /** A ServiceAccount token (or any bearer token) for that API server. */
  token: string;
  /** PEM of the CA that signed the server's certificate; the system roots when absent. */
  caPEM?: string | undefined;
}

/**
 * A kubeconfig for another cluster. TLS is always verified: a peer that
 * needs an unverified connection is a misconfiguration to report, not to
 * work around.
 */
export function remoteKubeConfig(remote: RemoteCluster): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: remote.name,
        server: remote.server,
        skipTLSVerify: false,
        ...(remote.caPEM ? { caData: Buffer.from(remote.caPEM).toString('base64') } : {}),
      },
    ],
    users: [{ name: remote.name, token: remote.token }],
    contexts: [{ name: remote.name, cluster: remote.name, user: remote.name }],
    currentContext: remote.name,
  });
  return kc;
}
