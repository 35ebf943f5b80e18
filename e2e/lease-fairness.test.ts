// Fairness between tenants of one cluster, tried as a namespace user would
// (kubectl --as a user with a Role on leasehold.dev in the namespace): slots
// of Leases that vanish come back, Offer namespaceSelector and
// maxLeasesPerNamespace, an activity time in the future, a command release
// without its recipe, and a refusal naming hundreds of Offers.
import { describe, it, expect, beforeAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { apply, getJSON, waitFor } from './support/kube.js';
import { SSHD_PROVIDER, sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';
import { leaseManifest } from './support/builders.js';

const fx = leaseSuite('fair', { maxLeases: 2 });
const TENANT = ['--as=fair-tenant', '--as-group=fair-tenants'];
const tenant = (args: string[], input?: string) => fx.kubectl([...TENANT, '-n', fx.ns, ...args], input);
const leases = 'leases.leasehold.dev';

async function tenantLease(name: string, offer: string, annotations?: Record<string, string>) {
  const r = await tenant(['apply', '-f', '-'], JSON.stringify(leaseManifest(name, fx.ns, { where: 'cpus>=1', offer }, annotations ? { annotations } : {})));
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
}

async function waitReason(name: string, reason: string, ms = 30_000) {
  return waitFor(`${name} Pending with ${reason}`, async () => {
    const s = await fx.status(name);
    return s?.phase === 'Pending' && s.reason === reason ? s : undefined;
  }, ms);
}

async function deleteLease(name: string) {
  const r = await fx.kubectl(['-n', fx.ns, 'delete', leases, name, '--timeout=90s']);
  expect(r.code).toBe(0);
}

/** Runs the sshd provider's release for a machine no Lease will release any more. */
function releaseByHand(leaseID: string) {
  execFileSync(SSHD_PROVIDER, ['release'], { env: { ...process.env, LEASEHOLD_LEASE_ID: leaseID, LEASEHOLD_MACHINES_DIR: fx.machines } });
}

beforeAll(async () => {
  await apply(fx.kubectl, JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'lease-user', namespace: fx.ns }, rules: [{ apiGroups: ['leasehold.dev'], resources: ['*'], verbs: ['*'] }, { apiGroups: [''], resources: ['events'], verbs: ['get', 'list'] }] },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'lease-user', namespace: fx.ns }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'lease-user' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'fair-tenant' }] },
    ],
  }));
});

describe('fairness between tenants', () => {
  it('Leases stripped of their finalizer and deleted give their maxLeases slots back', async () => {
    const box = await fx.offer('slots', sshdCommands());
    await tenantLease('a', box);
    await tenantLease('b', box);
    const ids = [(await fx.waitPhase('a', 'Ready')).leaseID, (await fx.waitPhase('b', 'Ready')).leaseID];
    await tenantLease('c', box);
    await waitReason('c', 'MaxLeases');
    // An admin strips the finalizer and deletes: the Leases vanish without ever ending.
    for (const name of ['a', 'b']) {
      const r = await fx.kubectl(['-n', fx.ns, 'patch', leases, name, '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers"}]']);
      expect(r.code).toBe(0);
      await fx.kubectl(['-n', fx.ns, 'delete', leases, name, '--timeout=30s']);
    }
    for (const id of ids) releaseByHand(id);
    await tenantLease('d', box);
    await fx.waitPhase('c', 'Ready', 90_000);
    await fx.waitPhase('d', 'Ready', 90_000);
    await deleteLease('c');
    await deleteLease('d');
  });

  it('an Offer serves only the namespaces its namespaceSelector selects, at most maxLeasesPerNamespace at a time', async () => {
    const label = `fair-${fx.suffix}`;
    const only = await fx.offer('only', sshdCommands());
    const patch = JSON.stringify({ spec: { namespaceSelector: { matchLabels: { [label]: 'yes' } }, maxLeasesPerNamespace: 1 } });
    expect((await fx.kubectl(['patch', 'offers.leasehold.dev', only, '--type=merge', '-p', patch])).code).toBe(0);
    await tenantLease('first', only);
    const refused = await waitReason('first', 'NamespaceNotAllowed');
    expect(refused.message).toContain(`spec.namespaceSelector of Offer ${only} does not select namespace ${fx.ns}`);
    // A tenant cannot label its own namespace; an admin does, and the Lease is served.
    expect((await tenant(['label', 'namespace', fx.ns, `${label}=yes`])).code).not.toBe(0);
    expect((await fx.kubectl(['label', 'namespace', fx.ns, `${label}=yes`])).code).toBe(0);
    await fx.waitPhase('first', 'Ready', 90_000);
    await tenantLease('second', only);
    const capped = await waitReason('second', 'MaxLeasesPerNamespace');
    expect(capped.message).toContain('spec.maxLeasesPerNamespace is 1');
    await deleteLease('first');
    await fx.waitPhase('second', 'Ready', 90_000);
    await deleteLease('second');
  });

  it('an activity time in the future counts as now, once, and says so', async () => {
    const short = await fx.offer('short', { ...sshdCommands(), idleTimeout: '6s' });
    await tenantLease('future', short);
    await fx.waitPhase('future', 'Ready');
    const r = await tenant(['annotate', leases, 'future', 'leasehold.dev/activity=2099-01-01T00:00:00Z', '--overwrite']);
    expect(r.code).toBe(0);
    const warned = await waitFor('an ActivityInFuture event', async () => {
      const events = await getJSON(fx.kubectl, ['-n', fx.ns, 'events', '--field-selector', 'involvedObject.name=future']);
      return events?.items.find((e: any) => e.reason === 'ActivityInFuture');
    }, 30_000);
    expect(warned.type).toBe('Warning');
    expect(warned.message).toContain('2099-01-01T00:00:00Z is in the future; counted as activity now');
    // The machine is still released once idle: the year 2099 buys one idle window, not 73 years.
    const ended = await fx.waitPhase('future', 'Released', 90_000);
    expect(ended.endReason).toBe('IdleTimeout');
    await deleteLease('future');
  });

  it('a command release with no recorded release command fails and is retried, and nothing is marked Released', async () => {
    const box = await fx.offer('closed', sshdCommands());
    await tenantLease('closed', box);
    const st = await fx.waitPhase('closed', 'Ready');
    const uid = (await getJSON(fx.kubectl, ['-n', fx.ns, leases, 'closed']))!.metadata.uid as string;
    // The recipe lives in the controller's record of the Lease; an admin's
    // mistake there (not a tenant's status write) is what can lose it. A
    // controller started afterwards reads the damaged record.
    const editRecord = async (edit: (record: any) => void) => {
      await fx.controller.stop();
      const secret = (await getJSON(fx.kubectl, ['-n', fx.ns, 'secret', `leasehold-lease-${uid}`]))!;
      const record = JSON.parse(Buffer.from(secret.data['record.json'], 'base64').toString());
      edit(record);
      const patch = JSON.stringify({ data: { 'record.json': Buffer.from(JSON.stringify(record)).toString('base64') } });
      expect((await fx.kubectl(['-n', fx.ns, 'patch', 'secret', `leasehold-lease-${uid}`, '--type=merge', '-p', patch])).code).toBe(0);
      fx.controller = await fx.startController(['--check-interval', '1s', '--acquire-timeout', '60s', '--max-leases', '2']);
    };
    await editRecord((r) => delete r.release.command);
    await fx.kubectl(['-n', fx.ns, 'delete', leases, 'closed', '--wait=false']);
    const failing = await waitFor('a failed release attempt', async () => {
      const s = await fx.status('closed');
      return s?.phase === 'Releasing' && s.releaseAttempts >= 2 && s.lastReleaseError ? s : undefined;
    }, 60_000);
    expect(failing.lastReleaseError).toContain('records no release command');
    expect(fx.sshdFor(st.leaseID)).not.toBe('');
    // Restored, the release runs the way the machine was made.
    await editRecord((r) => (r.release.command = [SSHD_PROVIDER, 'release']));
    await waitFor('the Lease gone', async () => (await fx.status('closed').catch(() => undefined)) === undefined, 60_000);
    expect(fx.sshdFor(st.leaseID)).toBe('');
  });

  it('a NoMatchingOffer naming hundreds of Offers is written, cut to a readable length', async () => {
    const label = `fair-many-${fx.suffix}`;
    const long = 'x'.repeat(200);
    const items = Array.from({ length: 150 }, (_, i) => ({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Offer',
      metadata: { name: `${long}-${i}-${fx.suffix}`, labels: { [label]: 'yes' } },
      spec: { command: { acquire: ['/bin/false'], release: ['/bin/true'], shape: { os: 'linux', arch: 'amd64', cpus: 1 } } },
    }));
    await apply(fx.kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    try {
      const r = await tenant(['apply', '-f', '-'], JSON.stringify(leaseManifest('many', fx.ns, { where: 'cpus>=64' })));
      expect(r.code).toBe(0);
      const st = await waitReason('many', 'NoMatchingOffer', 60_000);
      expect(st.message).toMatch(/; and \d+ more \(kubectl get offers.leasehold.dev\)$/);
      expect(st.conditions.find((c: any) => c.type === 'Scheduled').reason).toBe('NoMatchingOffer');
    } finally {
      await fx.kubectl(['delete', 'offers.leasehold.dev', '-l', `${label}=yes`, '--wait=false']);
    }
    await deleteLease('many');
  });
});
