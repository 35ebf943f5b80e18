// A tenant as the tenancy tests attack with: a namespace user whose only
// rights are leasehold.dev "*" in their own namespace, and a controller that
// runs with the chart's own RBAC identity and admission policy, as helm
// renders them for an install serving that namespace.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { chartDir, chartIdentity, docs, kubeVersionArgs, testHelm } from './helm.js';
import { apply, freshNamespace, type Kubectl } from './kube.js';

export interface Tenant {
  user: string;
  ns: string;
  /** kubectl as the tenant, in their namespace. */
  kubectl: Kubectl;
}

/** A fresh namespace and a user who may do anything to leasehold.dev objects there, and nothing else. */
export async function makeTenant(kubectl: Kubectl, prefix: string, user: string): Promise<Tenant> {
  const ns = await freshNamespace(kubectl, prefix);
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'leasehold-team', namespace: ns },
    rules: [{ apiGroups: ['leasehold.dev'], resources: ['*'], verbs: ['*'] }],
  }));
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'leasehold-team', namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'leasehold-team' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
  }));
  return { user, ns, kubectl: (args, input) => kubectl([`--as=${user}`, '-n', ns, ...args], input) };
}

export interface ChartInstall {
  release: string;
  /** The controller's namespace (the release namespace). */
  ns: string;
  kubeconfig: string;
  /** Removes what the install made outside its namespace (cluster roles, the admission policy). */
  remove(): Promise<void>;
}

/**
 * The chart's RBAC identity and admission policy for an install in a fresh
 * namespace that reads Secrets in `serves`: watching only that namespace when
 * it is one, every namespace otherwise. Returns the kubeconfig a controller
 * run with those rights uses.
 */
export async function chartInstall(kubectl: Kubectl, prefix: string, serves: string | string[], set: string[] = []): Promise<ChartInstall> {
  const ns = await freshNamespace(kubectl, `${prefix}-ctl`);
  const release = `${prefix}-${randomBytes(3).toString('hex')}`;
  const namespaces = typeof serves === 'string' ? [serves] : serves;
  const values = [...(namespaces.length === 1 ? [`watchNamespace=${namespaces[0]}`] : []), `secretNamespaces={${namespaces.join(',')}}`, ...set];
  const kubeconfig = await chartIdentity({ kubectl, release, namespace: ns, set: values, file: join(process.env.E2E_CP_DIR!, `${release}.kubeconfig`) });
  const { helmOK } = testHelm();
  const rendered = docs((await helmOK(['template', release, chartDir, ...(await kubeVersionArgs(kubectl)), '--namespace', ns, ...values.flatMap((v) => ['--set', v])])).stdout);
  const policy = rendered.filter((d) => d.kind === 'ValidatingAdmissionPolicy' || d.kind === 'ValidatingAdmissionPolicyBinding');
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: policy }));
  const clusterWide = [...policy, ...rendered.filter((d) => d.kind === 'ClusterRole' || d.kind === 'ClusterRoleBinding')];
  return {
    release,
    ns,
    kubeconfig,
    remove: async () => {
      for (const d of clusterWide) await kubectl(['delete', d.kind, d.metadata.name, '--ignore-not-found', '--wait=false']);
      await kubectl(['delete', 'namespace', ns, '--wait=false']);
    },
  };
}
