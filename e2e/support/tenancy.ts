// What the tenancy e2e files share: a namespace user with exactly
// leasehold.dev "*" in their own namespace (the rights an admin hands a team
// that runs its own Leases, PeerFleets or RunnerTargets), and the chart's RBAC
// identity and admission policy as helm renders them, so that the attacks run
// against what an install really enforces.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { chartDir, chartIdentity, docs, kubeVersionArgs, testHelm } from './helm.js';
import { freshNamespace, type Kubectl } from './kube.js';

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

export interface Tenant {
  user: string;
  ns: string;
  /** kubectl as the tenant, in their namespace. */
  kubectl: Kubectl;
}

/** A fresh namespace and a user who may do anything to leasehold.dev objects there, and nothing else. */
export async function makeTenant(kubectl: Kubectl, prefix: string, user: string): Promise<Tenant> {
  const ns = await freshNamespace(kubectl, prefix);
  const asUser = await namespaceUser(kubectl, ns, user);
  return { user, ns, kubectl: (args, input) => asUser(['-n', ns, ...args], input) };
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

export interface ChartInstall {
  release: string;
  /** The controller's namespace (the release namespace). */
  ns: string;
  kubeconfig: string;
  /** Removes what the install made outside its namespace (cluster roles, the admission policy), and its namespace. */
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
  await chartAdmission(kubectl, release, ns, values);
  return {
    release,
    ns,
    kubeconfig,
    remove: async () => {
      await removeChartClusterObjects(kubectl, release);
      await kubectl(['delete', 'namespace', ns, '--wait=false']);
    },
  };
}

export interface TwoTeams {
  /** The namespace of a team the tenant attacks. */
  victimNS: string;
  tenant: Tenant;
  /** One install serving both namespaces. */
  install: ChartInstall;
}

/** A victim team's namespace and a tenant's, each prepared by `prepare` (their Secrets), served by one chart install. */
export async function twoTeams(kubectl: Kubectl, prefix: string, user: string, prepare: (ns: string) => Promise<void>): Promise<TwoTeams> {
  const victimNS = await freshNamespace(kubectl, `${prefix}-victim`);
  const tenant = await makeTenant(kubectl, `${prefix}-tenant`, user);
  await prepare(victimNS);
  await prepare(tenant.ns);
  const install = await chartInstall(kubectl, prefix.replace(/[^a-z0-9]/g, ''), [victimNS, tenant.ns]);
  return { victimNS, tenant, install };
}

/**
 * Removes both teams' namespaces and the install once the controller is
 * stopped: the finalizers it would have removed from `resource` objects are
 * stripped first, so the namespaces can go.
 */
export async function removeTwoTeams(kubectl: Kubectl, teams: TwoTeams | undefined, resource: string): Promise<void> {
  if (!teams) return;
  await teams.install.remove();
  for (const ns of [teams.victimNS, teams.tenant.ns]) {
    const r = await kubectl(['get', resource, '-n', ns, '-o', 'name']);
    for (const name of r.stdout.split('\n').filter(Boolean)) await kubectl(['patch', name, '-n', ns, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
    await kubectl(['delete', 'namespace', ns, '--wait=false']);
  }
}
