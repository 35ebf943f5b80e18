// The peer side of PeerFleet: a ServiceAccount on the peer's control plane
// that may only read and patch the Jobs (and their status) of one queue
// namespace, and a token for it minted through the TokenRequest API.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ControlPlane } from './controlplane.js';
import { kubeconfigYAML } from './pki.js';

export interface PeerCredential {
  namespace: string;
  serviceAccount: string;
  token: string;
  /** A kubeconfig for the peer's API server that authenticates with the token. */
  kubeconfig: string;
}

export interface PeerCredentialOptions {
  /** The peer's queue namespace; created when absent. */
  namespace: string;
  serviceAccount?: string;
  /** Token lifetime, as `kubectl create token --duration` takes it. */
  duration?: string;
}

/** get/list/watch/patch on jobs and jobs/status in the queue namespace, nothing else. */
export function queueRoleManifests(namespace: string, serviceAccount: string): Record<string, unknown> {
  const name = `${serviceAccount}-queue`;
  return {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: serviceAccount, namespace } },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name, namespace },
        rules: [{ apiGroups: ['batch'], resources: ['jobs', 'jobs/status'], verbs: ['get', 'list', 'watch', 'patch'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name, namespace },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
      },
    ],
  };
}

/** Creates the queue namespace, ServiceAccount, Role and RoleBinding on `peer` and mints a token. */
export async function createPeerCredential(peer: ControlPlane, opts: PeerCredentialOptions): Promise<PeerCredential> {
  const { namespace, serviceAccount = 'leasehold-lender', duration = '24h' } = opts;
  const must = async (args: string[], input?: string) => {
    const res = await peer.kubectl(args, input);
    if (res.code !== 0) throw new Error(`kubectl ${args.join(' ')} on ${peer.info.clusterName} failed: ${res.stderr}`);
    return res.stdout;
  };
  const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } };
  await must(['apply', '-f', '-'], JSON.stringify(ns));
  await must(['apply', '-f', '-'], JSON.stringify(queueRoleManifests(namespace, serviceAccount)));
  const token = (await must(['create', 'token', serviceAccount, '-n', namespace, `--duration=${duration}`])).trim();
  const kubeconfig = join(peer.info.dir, `${namespace}-${serviceAccount}.kubeconfig`);
  await writeFile(kubeconfig, kubeconfigYAML({
    server: peer.info.server,
    ca: join(peer.info.dir, 'pki', 'ca.crt'),
    clusterName: peer.info.clusterName,
    userName: serviceAccount,
    user: { token },
    namespace,
  }), { mode: 0o600 });
  return { namespace, serviceAccount, token, kubeconfig };
}
