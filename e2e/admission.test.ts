// The chart's ValidatingAdmissionPolicy and user roles against the real API
// server, tried as tenants would: a namespace user with the Lease editor role
// (what `edit` aggregates) and one with leasehold.dev "*" cannot write a
// Lease's status or strip its release finalizer, while the controller's
// ServiceAccount, the chart's exempt groups and users, and cluster admins can.
// The same holds for the status and finalizer of PeerFleets and RunnerTargets.
// No controller runs: the policy alone is under test.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import YAML from 'yaml';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';
import { chartDir, testHelm } from './support/helm.js';

const kubectl = testKubectl();
const { helm, helmOK } = testHelm();
const suffix = Date.now().toString(36);
const release = `adm-${suffix}`;
const fullname = `${release}-leasehold`;
const FINALIZER = 'leasehold.dev/release';

let relNS: string; // the release namespace: where the controller's ServiceAccount lives
let leaseNS: string; // watchNamespace: the Leases the policy guards
let otherNS: string; // a namespace another installation would serve
let installed = false;
let controllerUser: string;

interface Subject { user?: string; groups?: string[] }
const admin: Subject = {};
const tenantAll: Subject = { user: 'tenant-all', groups: ['tenants'] }; // a Role on leasehold.dev "*"
const tenantEditor: Subject = { user: 'tenant-editor', groups: ['tenants'] }; // the chart's lease-editor ClusterRole

/** kubectl as a subject, through the admin kubeconfig (impersonation). */
const kubectlAs = (who: Subject, args: string[]) =>
  kubectl([...(who.user ? [`--as=${who.user}`] : []), ...(who.groups ?? []).map((g) => `--as-group=${g}`), ...args]);

/**
 * A merge patch sent as the subject, the one request and verb the controller
 * sends (kubectl patch would first GET the object, which the controller's
 * rights do not cover on leases/status). Resolves the HTTP status and the
 * API server's message.
 */
function mergePatch(who: Subject, ns: string, name: string, body: object, subresource = '', resource = 'leases'): Promise<{ code: number; message: string }> {
  const cfg = YAML.parse(readFileSync(process.env.E2E_KUBECONFIG!, 'utf8'));
  const cluster = cfg.clusters[0].cluster;
  const cred = cfg.users[0].user;
  const url = new URL(`/apis/leasehold.dev/v1alpha1/namespaces/${ns}/${resource}/${name}${subresource ? `/${subresource}` : ''}`, cluster.server);
  const headers: Record<string, string | string[]> = { 'content-type': 'application/merge-patch+json' };
  if (who.user) headers['impersonate-user'] = who.user;
  if (who.groups?.length) headers['impersonate-group'] = who.groups;
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'PATCH',
      headers,
      ca: readFileSync(cluster['certificate-authority']),
      cert: readFileSync(cred['client-certificate']),
      key: readFileSync(cred['client-key']),
    }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, message: res.statusCode === 200 ? '' : (JSON.parse(text).message as string) }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
const patchStatus = (who: Subject, ns: string, name: string, status: object) => mergePatch(who, ns, name, { status }, 'status');
const stripFinalizers = (who: Subject, ns: string, name: string) => mergePatch(who, ns, name, { metadata: { finalizers: null } });
/** The other kinds whose status and finalizer only the controller may touch: a valid spec and the finalizer each carries. */
const OTHER_KINDS = [
  {
    kind: 'PeerFleet', resource: 'peerfleets', finalizer: 'leasehold.dev/peer-lending',
    spec: { origin: 'https://peer.example.com:6443', namespace: 'queue', credentialSecretRef: { name: 'peer-token' }, lendableNodes: { matchLabels: { pool: 'lendable' } }, pricePerGPUHour: 2 },
  },
  {
    kind: 'RunnerTarget', resource: 'runnertargets', finalizer: 'leasehold.dev/runner-hosts',
    spec: {
      github: { org: 'example', repositories: ['example/app'], tokenSecretRef: { name: 'gh' } },
      gce: { project: 'my-project', zones: ['us-central1-a'], machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }], serviceAccount: 'host@my-project.iam.gserviceaccount.com', credentialsSecretRef: { name: 'gce' } },
      floor: 0, maxHosts: 1, dailyBudgetUSD: 1,
    },
  },
];
const lease = async (ns: string, name: string) => getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', name]);

async function createLease(ns: string, name: string): Promise<void> {
  await apply(kubectl, JSON.stringify({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: { name, namespace: ns, finalizers: [FINALIZER] },
    spec: { where: 'cpus>=1', offer: `no-such-offer-${suffix}` },
  }));
}

/** Role on every leasehold.dev resource (status included) for the tenants and the exempt subjects, in ns. */
async function grantAll(ns: string): Promise<void> {
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'leasehold-all', namespace: ns },
    rules: [{ apiGroups: ['leasehold.dev'], resources: ['*'], verbs: ['*'] }],
  }));
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'leasehold-all', namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'leasehold-all' },
    subjects: [
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-all' },
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'oncall' },
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'lease-ops' },
    ],
  }));
}

beforeAll(async () => {
  relNS = await freshNamespace(kubectl, 'adm-rel');
  leaseNS = await freshNamespace(kubectl, 'adm-leases');
  otherNS = await freshNamespace(kubectl, 'adm-other');
  await helmOK(['install', release, chartDir, '-n', relNS,
    '--set', `watchNamespace=${leaseNS}`,
    '--set', 'admissionPolicy.exemptGroups={lease-ops}',
    '--set', 'admissionPolicy.exemptUsers={oncall}']);
  installed = true;
  controllerUser = `system:serviceaccount:${relNS}:${fullname}`;

  await grantAll(leaseNS);
  await grantAll(otherNS);
  // What a namespace admin hands out through `edit`: the aggregated editor role.
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'lease-editor', namespace: leaseNS },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${fullname}-lease-editor` },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-editor' }],
  }));
  for (const name of ['by-controller', 'by-admin', 'edited']) await createLease(leaseNS, name);
  await createLease(otherNS, 'elsewhere');
  for (const k of OTHER_KINDS) await apply(kubectl, JSON.stringify({ apiVersion: 'leasehold.dev/v1alpha1', kind: k.kind, metadata: { name: 'guarded', namespace: leaseNS, finalizers: [k.finalizer] }, spec: k.spec }));

  // The policy is in force once a tenant's harmless status write is refused.
  await waitFor('admission policy in force', async () => (await patchStatus(tenantAll, leaseNS, 'edited', { message: 'probe' })).code === 403, 30_000);
}, 60_000);

afterAll(async () => {
  const leases: [string | undefined, string][] = [[leaseNS, 'by-controller'], [leaseNS, 'by-admin'], [leaseNS, 'edited'], [otherNS, 'elsewhere']];
  for (const [ns, name] of leases) {
    if (!ns) continue;
    await stripFinalizers(admin, ns, name);
    await kubectl(['-n', ns, 'delete', 'leases.leasehold.dev', name, '--ignore-not-found', '--wait=false']);
  }
  for (const k of OTHER_KINDS) {
    if (!leaseNS) break;
    await mergePatch(admin, leaseNS, 'guarded', { metadata: { finalizers: null } }, '', k.resource);
    await kubectl(['-n', leaseNS, 'delete', `${k.resource}.leasehold.dev`, 'guarded', '--ignore-not-found', '--wait=false']);
  }
  if (installed) await helm(['uninstall', release, '-n', relNS]);
  for (const ns of [relNS, leaseNS, otherNS]) if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
});

describe('the admission policy on Leases', () => {
  it('refuses a status write by a tenant with leasehold.dev "*", naming who may', async () => {
    expect((await kubectlAs(tenantAll, ['auth', 'can-i', 'patch', 'leases.leasehold.dev', '--subresource=status', '-n', leaseNS])).stdout.trim()).toBe('yes');
    const before = (await lease(leaseNS, 'edited')).status;
    const r = await patchStatus(tenantAll, leaseNS, 'edited', { expiresAt: '2099-01-01T00:00:00Z', message: 'tampered' });
    expect(r.code).toBe(403);
    expect(r.message).toContain(`denied request: leases/status of leasehold.dev may be written only by the Leasehold controller (${controllerUser}) or a cluster admin (group system:masters, lease-ops; user oncall)`);
    expect((await lease(leaseNS, 'edited')).status).toEqual(before);
  });

  it('gives the editor role no status at all, refuses it the finalizer, and lets it edit the spec', async () => {
    const can = async (...args: string[]) => (await kubectlAs(tenantEditor, ['auth', 'can-i', ...args, '-n', leaseNS])).stdout.trim();
    expect(await can('patch', 'leases.leasehold.dev', '--subresource=status')).toBe('no');
    expect(await can('delete', 'leases.leasehold.dev')).toBe('yes');
    expect(await can('list', 'offers.leasehold.dev')).toBe('yes');
    const status = await patchStatus(tenantEditor, leaseNS, 'edited', { message: 'tampered' });
    expect(status).toEqual({ code: 403, message: expect.stringMatching(/User "tenant-editor" cannot patch resource "leases\/status"/) });

    const key = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOVTuVOBZU0ilhBAixSQNkPr2gmavAgItj8dXKYgUVuk tenant@laptop';
    expect(await mergePatch(tenantEditor, leaseNS, 'edited', { spec: { sshKeys: [key] }, metadata: { labels: { team: 'ml' } } })).toEqual({ code: 200, message: '' });
    expect((await lease(leaseNS, 'edited')).spec.sshKeys).toEqual([key]);

    // Stripping the finalizer, by merge patch or by replacing the list, is refused.
    const strip = await stripFinalizers(tenantEditor, leaseNS, 'edited');
    expect(strip.code).toBe(403);
    expect(strip.message).toContain(`denied request: the finalizer leasehold.dev/release may be removed only by the Leasehold controller (${controllerUser})`);
    expect(strip.message).toContain('Releasing by hand when the controller is gone');
    const swap = await kubectlAs(tenantEditor, ['-n', leaseNS, 'patch', 'leases.leasehold.dev', 'edited', '--type=json', '-p', JSON.stringify([{ op: 'replace', path: '/metadata/finalizers', value: ['example.com/mine'] }])]);
    expect(swap.stderr).toContain('denied request: the finalizer leasehold.dev/release');
    // Finalizers of its own come and go; only the release finalizer is guarded.
    const add = await kubectlAs(tenantEditor, ['-n', leaseNS, 'patch', 'leases.leasehold.dev', 'edited', '--type=json', '-p', JSON.stringify([{ op: 'add', path: '/metadata/finalizers/-', value: 'example.com/mine' }])]);
    expect(add.stderr).toBe('');
    const remove = await kubectlAs(tenantEditor, ['-n', leaseNS, 'patch', 'leases.leasehold.dev', 'edited', '--type=json', '-p', JSON.stringify([{ op: 'remove', path: '/metadata/finalizers/1' }])]);
    expect(remove.stderr).toBe('');
    expect((await lease(leaseNS, 'edited')).metadata.finalizers).toEqual([FINALIZER]);
  });

  it('lets the controller, the exempt group and user, and cluster admins write status and remove the finalizer', async () => {
    const controller: Subject = { user: controllerUser };
    const writers: [string, Subject][] = [['controller', controller], ['exempt user', { user: 'oncall' }], ['exempt group', { user: 'bob', groups: ['lease-ops'] }], ['admin', admin]];
    for (const [who, subject] of writers) {
      const r = await patchStatus(subject, leaseNS, 'by-controller', { message: `written by ${who}` });
      expect({ who, ...r }).toEqual({ who, code: 200, message: '' });
      expect((await lease(leaseNS, 'by-controller')).status.message).toBe(`written by ${who}`);
    }
    expect(await stripFinalizers(controller, leaseNS, 'by-controller')).toEqual({ code: 200, message: '' });
    expect((await lease(leaseNS, 'by-controller')).metadata.finalizers).toBeUndefined();

    // The controller gone, a tenant deletes its Lease: it hangs on the
    // finalizer, the tenant cannot strip it, an admin can (after releasing by hand).
    expect((await kubectlAs(tenantEditor, ['-n', leaseNS, 'delete', 'leases.leasehold.dev', 'by-admin', '--wait=false'])).code).toBe(0);
    expect((await lease(leaseNS, 'by-admin')).metadata.deletionTimestamp).toBeDefined();
    expect((await stripFinalizers(tenantEditor, leaseNS, 'by-admin')).code).toBe(403);
    expect((await stripFinalizers(admin, leaseNS, 'by-admin')).code).toBe(200);
    await waitFor('by-admin gone', async () => (await lease(leaseNS, 'by-admin')) === undefined);
  });

  it('guards only the namespace this installation serves', async () => {
    expect(await patchStatus(tenantAll, otherNS, 'elsewhere', { message: 'not ours' })).toEqual({ code: 200, message: '' });
    expect((await lease(otherNS, 'elsewhere')).status.message).toBe('not ours');
  });
});

describe.each(OTHER_KINDS)('the admission policy on $kind', ({ kind, resource, finalizer }) => {
  const get = async () => getJSON(kubectl, ['-n', leaseNS, `${resource}.leasehold.dev`, 'guarded']);

  it('refuses a tenant with leasehold.dev "*" its status and its finalizer, naming who may and what to do instead', async () => {
    const before = await get();
    const status = await mergePatch(tenantAll, leaseNS, 'guarded', { status: { observedGeneration: 99 } }, 'status', resource);
    expect(status.code).toBe(403);
    expect(status.message).toContain(`denied request: ${resource}/status of leasehold.dev may be written only by the Leasehold controller (${controllerUser}) or a cluster admin (group system:masters, lease-ops; user oncall)`);
    expect(status.message).toContain(`Change the ${kind}'s spec instead`);
    const strip = await mergePatch(tenantAll, leaseNS, 'guarded', { metadata: { finalizers: null } }, '', resource);
    expect(strip.code).toBe(403);
    expect(strip.message).toContain(`denied request: the finalizer ${finalizer} may be removed only by the Leasehold controller (${controllerUser})`);
    const after = await get();
    expect(after.status).toEqual(before.status);
    expect(after.metadata.finalizers).toEqual([finalizer]);
  });

  it('lets the controller write its status', async () => {
    expect(await mergePatch({ user: controllerUser }, leaseNS, 'guarded', { status: { observedGeneration: 7 } }, 'status', resource)).toEqual({ code: 200, message: '' });
    expect((await get()).status.observedGeneration).toBe(7);
  });
});
