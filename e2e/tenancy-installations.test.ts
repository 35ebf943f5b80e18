// Several installations in one cluster: two releases in one namespace that
// both watch a team's namespace, and one that watches all namespaces. Each
// controller runs with its release's own RBAC as the chart renders it. Each
// installation stamps the Leases it takes on and leaves the others' alone:
// the all-namespaces one, which holds no record of them, must not mark them
// StatusTampered (whereupon their owner would release them).
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startController, type ControllerProcess } from './support/controller.js';
import { chartIdentity } from './support/helm.js';
import { freshNamespace, getJSON, waitFor } from './support/kube.js';
import { leaseFixture, sshdCommands, type LeaseFixture } from './support/leases.js';

let fx: LeaseFixture;
let ctlNS: string;
let allNS: string;
const dir = mkdtempSync(join(tmpdir(), 'leasehold-tenancy-'));
const controllers: ControllerProcess[] = [];
const ids: Record<string, string> = {};

/** A controller run as release `release` of the chart would run it, with that release's RBAC. */
async function install(release: string, namespace: string, watch: string | undefined, extra: string[] = []): Promise<ControllerProcess> {
  const kubeconfig = await chartIdentity({
    kubectl: fx.kubectl,
    release,
    namespace,
    set: [`leaderElection.id=${release}`, ...(watch ? [`watchNamespace=${watch}`] : []), 'peerFleet.enabled=false'],
    file: join(dir, `${release}.kubeconfig`),
  });
  const ctl = await startController(kubeconfig, [
    '--namespace', namespace, '--leader-election-namespace', namespace, '--leader-election-id', release,
    ...(watch ? ['--watch-namespace', watch] : []),
    '--no-peer-lending', '--check-interval', '1s', '--acquire-timeout', '60s', ...extra,
  ], { LEASEHOLD_MACHINES_DIR: fx.machines, LEASEHOLD_INSTALLATION_SECRET: `${release}-installation-id` });
  controllers.push(ctl);
  ids[release] = await waitFor(`${release} installation ID`, async () => {
    const s = await getJSON(fx.kubectl, ['-n', namespace, 'secret', `${release}-installation-id`]);
    return s && Buffer.from(s.data.id, 'base64').toString();
  });
  return ctl;
}

const stampOf = async (name: string): Promise<string | undefined> =>
  (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', name]))?.metadata?.annotations?.['leasehold.dev/installation'];

const reasons = async (name: string): Promise<string[]> =>
  ((await getJSON(fx.kubectl, ['-n', fx.ns, 'events', '--field-selector', `involvedObject.name=${name}`]))?.items ?? []).map((e: any) => e.reason as string);

beforeAll(async () => {
  fx = await leaseFixture('tenancy');
  ctlNS = await freshNamespace(fx.kubectl, 'tenancy-ctl');
  allNS = await freshNamespace(fx.kubectl, 'tenancy-all');
  // Two releases in one namespace, both serving the team's namespace.
  await install('leasehold-a', ctlNS, fx.ns);
  await install('leasehold-b', ctlNS, fx.ns);
}, 90_000);

afterAll(async () => {
  await fx.kubectl(['delete', 'leases.leasehold.dev', '--all', '-n', fx.ns, '--wait=false']);
  await waitFor('the team namespace\'s Leases released', async () => ((await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev']))?.items ?? []).length === 0, 60_000, 250).catch(() => undefined);
  for (const c of controllers) await c.stop();
  await fx.cleanup();
  for (const release of ['leasehold-a', 'leasehold-b', 'leasehold-all']) await fx.kubectl(['delete', 'clusterrole,clusterrolebinding', '-l', `app.kubernetes.io/instance=${release}`, '--wait=false']);
});

describe('installations sharing a namespace and a cluster', () => {
  it('have their own IDs, each Lease is taken on by one, and the all-namespaces one leaves them all alone', async () => {
    expect(ids['leasehold-a']).not.toBe(ids['leasehold-b']);
    const offer = await fx.offer('box', { ...sshdCommands(), idleTimeout: '10m', maxLifetime: '1h' });
    await fx.lease('first', { where: 'cpus>=1', offer });
    await fx.lease('second', { where: 'cpus>=1', offer });
    const ready = [await fx.waitPhase('first', 'Ready'), await fx.waitPhase('second', 'Ready')];
    const stamps = [await stampOf('first'), await stampOf('second')];
    for (const [i, stamp] of stamps.entries()) {
      expect([ids['leasehold-a'], ids['leasehold-b']]).toContain(stamp);
      // Named after the installation that took it on, whose record alone holds it.
      expect(ready[i].machineName).toMatch(new RegExp(`^leasehold-${stamp}-`));
      const record = await getJSON(fx.kubectl, ['-n', ctlNS, 'secret', '-l', `leasehold.dev/lease-namespace=${fx.ns}`]);
      const recordsOf = (record?.items ?? []).filter((s: any) => s.metadata.labels['leasehold.dev/lease-name'] === ['first', 'second'][i]);
      expect(recordsOf.map((s: any) => s.metadata.labels['leasehold.dev/installation'])).toEqual([stamp]);
    }

    // The all-namespaces installation starts once both are Ready; it holds no record of either.
    const all = await install('leasehold-all', allNS, undefined, ['--max-leases', '0']);
    const before = await all.metric('leasehold_reconcile_total', { controller: 'lease' });
    // Each Lease changes, so every installation looks at it again.
    for (const name of ['first', 'second']) expect((await fx.kubectl(['-n', fx.ns, 'annotate', 'leases.leasehold.dev', name, `touched=${Date.now()}`])).code).toBe(0);
    await waitFor('the all-namespaces installation reconciled both Leases', async () => (await all.metric('leasehold_reconcile_total', { controller: 'lease' })) >= before + 2, 30_000, 250);
    // A few more passes: its record sweep, every check interval, with both Leases there.
    const passes = await all.metric('leasehold_reconcile_total', { controller: 'lease' });
    await waitFor('more passes', async () => (await all.metric('leasehold_reconcile_total', { controller: 'lease' })) >= passes + 3, 30_000, 250);

    for (const [i, name] of ['first', 'second'].entries()) {
      const st = await fx.status(name);
      expect(st.phase).toMatch(/^(Ready|Idle)$/);
      expect(st.machineName).toBe(ready[i].machineName);
      expect(await stampOf(name)).toBe(stamps[i]);
      expect(fx.sshdFor(ready[i].leaseID)).not.toBe('');
      const seen = await reasons(name);
      for (const bad of ['StatusTampered', 'NotTakenOn', 'InstallationConflict', 'ReleaseFailed']) expect(seen).not.toContain(bad);
    }
    expect(await getJSON(fx.kubectl, ['-n', allNS, 'secret', '-l', 'app.kubernetes.io/component=lease-record'])).toMatchObject({ items: [] });
  }, 120_000);

  it('release a Lease only by the installation that took it on, once it is deleted', async () => {
    const st = await fx.status('first');
    expect((await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'first', '--wait=false'])).code).toBe(0);
    await waitFor('first gone', async () => (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', 'first'])) === undefined, 60_000, 250);
    await waitFor('its machine stopped', async () => fx.sshdFor(st.leaseID) === '', 30_000, 250);
    expect((await fx.status('second'))?.phase).toMatch(/^(Ready|Idle)$/);
  }, 90_000);
});
