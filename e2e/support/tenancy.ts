// What the tenancy e2e files share: a namespace user with exactly
// leasehold.dev "*" in their own namespace (the rights an admin hands a team
// that runs its own PeerFleet or RunnerTarget), and the chart's admission
// policy as helm renders it, so that the attacks run against what an install
// really enforces.
import { chartDir, docs, kubeVersionArgs, testHelm } from './helm.js';
import type { Kubectl } from './kube.js';

const ADMISSION_KINDS = new Set(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);

async function must(kubectl: Kubectl, args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/**
 * A Role on every leasehold.dev resource in `namespace`, bound to `user`,
 * and a kubectl that impersonates that user (and nothing more) through the
 * admin kubeconfig.
 */
export async function namespaceUser(kubectl: Kubectl, namespace: string, user: string): Promise<Kubectl> {
  const role = `${user}-leasehold`;
  await must(kubectl, ['apply', '-f', '-'], JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: role, namespace }, rules: [{ apiGroups: ['leasehold.dev'], resources: ['*'], verbs: ['*'] }] },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: role, namespace },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    ],
  }));
  return (args, input) => kubectl([`--as=${user}`, ...args], input);
}

/** The chart's ValidatingAdmissionPolicies and their bindings for a release, rendered by helm and applied. */
export async function chartAdmission(kubectl: Kubectl, release: string, namespace: string, set: string[] = []): Promise<void> {
  const { helmOK } = testHelm();
  const rendered = docs((await helmOK(['template', release, chartDir, ...(await kubeVersionArgs(kubectl)), '--namespace', namespace, ...set.flatMap((v) => ['--set', v])])).stdout);
  const items = rendered.filter((d) => ADMISSION_KINDS.has(d.kind));
  if (items.length === 0) throw new Error('helm rendered no admission policy');
  await must(kubectl, ['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
}

/** Removes what chartIdentity and chartAdmission left outside the release namespace. */
export async function removeChartClusterObjects(kubectl: Kubectl, release: string): Promise<void> {
  await kubectl(['delete', 'clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding', '-l', `app.kubernetes.io/instance=${release}`, '--ignore-not-found']);
}
