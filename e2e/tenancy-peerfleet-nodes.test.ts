// Tenancy, PeerFleet nodes: a namespace user with leasehold.dev "*" in their
// own namespace writes a PeerFleet whose selector picks every node, hoping
// to lend control-plane, cordoned, never-opted-in and another team's
// dedicated nodes to a peer they run. Only the nodes an admin opted in
// (the label leasehold.dev/lendable=true, and the annotation
// leasehold.dev/lendable-namespaces naming the PeerFleet's namespace) and
// whose taints the admin listed are lent; the mirrors tolerate the listed
// taint and nothing else. A node opted in for one team's namespace is never
// lent by another team's PeerFleet, which says why in its status. The
// controller runs with the chart's RBAC and admission policy.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import type { ControlPlane } from './cluster/controlplane.js';
import { createFakeNodes } from './cluster/kwok.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { chartIdentity } from './support/helm.js';
import { apply, json, type Kubectl, must, waitFor } from './support/kube.js';
import { fleetManifest, lendingNamespace, optedIn, peerJob, QUEUE, startLendingClusters, tenantLending } from './support/lending.js';
import { chartAdmission, namespaceUser } from './support/tenancy.js';

const NS = 'team-a';
const POOL = { 'leasehold.dev/pool': 'gpu' };
const GOOD = ['opted-in', 'listed-taint'];
let ours: ControlPlane;
let peer: ControlPlane;
let tenant: Kubectl;
let controller: ControllerProcess | undefined;

describe('a namespace user and the nodes a PeerFleet lends', () => {
  beforeAll(async () => {
    ({ ours, peer, tenant, controller } = await tenantLending('pfnodes', NS, [
      { name: 'opted-in', gpus: 2, ...optedIn(NS, POOL) },
      { name: 'listed-taint', gpus: 2, ...optedIn(NS, POOL), taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] },
      { name: 'control-plane', gpus: 2, ...optedIn(NS, { ...POOL, 'node-role.kubernetes.io/control-plane': '' }) },
      { name: 'cordoned', gpus: 2, ...optedIn(NS, POOL) },
      { name: 'not-opted-in', gpus: 2, labels: POOL },
      { name: 'team-b', gpus: 2, ...optedIn('*', POOL), taints: [{ key: 'team-b/dedicated', value: 'true', effect: 'NoSchedule' }] },
    ], ['--peer-tolerate-taints', 'nvidia.com/gpu:NoSchedule'], async (cluster: ControlPlane) => {
      await must(cluster, ['cordon', 'cordoned']);
    }));
  }, 240_000);

  afterAll(async () => {
    await controller?.stop();
    controller = undefined;
    await Promise.all([ours?.stop(), peer?.stop()]);
  });

  it('a selector that picks every node lends only the nodes an admin opted in, with only the listed toleration', async () => {
    // Whole-node Jobs: one per node, more than the good nodes can take.
    for (let i = 0; i < 6; i++) await apply(peer, peerJob(`take-${i}`, { gpus: 2, runFor: '120s' }));
    const everything = { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }] };
    const r = await tenant(['apply', '-f', '-'], JSON.stringify(fleetManifest(peer, 'grab', NS, { lendableNodes: everything, idleWindow: '1s', pollInterval: '5s' })));
    expect(r.code).toBe(0);
    const mirrors = await waitFor('both opted-in nodes lending', async () => {
      const jobs = (await json(ours, ['-n', NS, 'get', 'jobs'])).items;
      return jobs.length >= GOOD.length ? jobs : undefined;
    }, 120_000, 500);
    const f = await waitFor('the hosts Lending', async () => {
      const got = await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'grab']);
      return got.status?.hosts?.filter((h: { state: string }) => h.state === 'Lending').length === GOOD.length ? got : undefined;
    }, 60_000, 500);
    // Only the opted-in nodes are hosts at all: the others are not in the PeerFleet's view.
    expect(f.status.hosts.map((h: { node: string }) => h.node).sort()).toEqual([...GOOD].sort());
    expect(mirrors.map((m: any) => m.metadata.labels['leasehold.dev/node']).sort()).toEqual([...GOOD].sort());
    for (const m of mirrors) expect(m.spec.template.spec.tolerations ?? []).toEqual(m.metadata.labels['leasehold.dev/node'] === 'listed-taint'
      ? [{ key: 'nvidia.com/gpu', operator: 'Equal', value: 'present', effect: 'NoSchedule' }]
      : []);
    // No pod of a mirror is bound anywhere else.
    const pods = (await json(ours, ['-n', NS, 'get', 'pods'])).items;
    for (const p of pods) if (p.spec.nodeName) expect(GOOD).toContain(p.spec.nodeName);
    const claimed = (await json(peer, ['-n', QUEUE, 'get', 'jobs'])).items.filter((j: any) => j.metadata.annotations?.['leasehold.dev/claimed-by']);
    expect(claimed.map((j: any) => j.metadata.annotations['leasehold.dev/claimed-by'].split('/').pop()).sort()).toEqual([...GOOD].sort());
  });

  it('a node the admin takes out of lending (cordon) leaves the PeerFleet\'s view; the running peer Job is left to finish', async () => {
    await must(ours, ['cordon', 'opted-in']);
    await waitFor('opted-in gone from the hosts', async () => {
      const got = await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'grab']);
      return !got.status?.hosts?.some((h: { node: string }) => h.node === 'opted-in');
    }, 60_000, 500);
    const mirrors = (await json(ours, ['-n', NS, 'get', 'jobs'])).items;
    expect(mirrors.filter((m: any) => m.metadata.labels['leasehold.dev/node'] === 'opted-in')).toHaveLength(1);
  });
});

describe('a node an admin opted in for one namespace only', () => {
  const TEAM_A = 'ml-a';
  const TEAM_B = 'ml-b';
  const NODE = 'for-a';
  const CONTROLLER_NS = 'leasehold-system';
  let tenantA: Kubectl;
  let tenantB: Kubectl;
  const getFleet = (ns: string, name: string) => json(ours, ['-n', ns, 'get', 'peerfleet.leasehold.dev', name]);
  const hostOf = (fleet: any) => fleet.status?.hosts?.find((h: { node: string }) => h.node === NODE);
  const mirrorsIn = async (ns: string) => (await json(ours, ['-n', ns, 'get', 'jobs'])).items;
  const claimsBy = async (fleetID: string) => (await json(peer, ['-n', QUEUE, 'get', 'jobs'])).items
    .map((j: any) => j.metadata.annotations?.['leasehold.dev/claimed-by'] ?? '')
    .filter((c: string) => c.split('/')[1] === fleetID);
  const holder = async () => (await ours.kubectl(['-n', CONTROLLER_NS, 'get', 'lease', `leasehold-peer-${NODE}`, '-o', 'jsonpath={.spec.holderIdentity}'])).stdout;

  // One installation serving both teams' namespaces, as the chart installs it
  // watching every namespace: one view of the node and of its holder Lease.
  beforeAll(async () => {
    const clusters = await startLendingClusters('pfnodes-ns');
    ({ ours, peer } = clusters);
    const kubectl: Kubectl = ours.kubectl.bind(ours);
    await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: CONTROLLER_NS } });
    for (const ns of [TEAM_A, TEAM_B]) await lendingNamespace(clusters, ns);
    await createFakeNodes(kubectl, [{ name: NODE, gpus: 2, ...optedIn(TEAM_A, POOL) }]);
    tenantA = await namespaceUser(kubectl, TEAM_A, `${TEAM_A}-user`);
    tenantB = await namespaceUser(kubectl, TEAM_B, `${TEAM_B}-user`);
    const set = [`secretNamespaces={${TEAM_A},${TEAM_B}}`];
    await chartAdmission(kubectl, 'pfnodes-ns', CONTROLLER_NS, set);
    const kubeconfig = await chartIdentity({ kubectl, release: 'pfnodes-ns', namespace: CONTROLLER_NS, set, file: join(ours.info.dir, 'pfnodes-ns.kubeconfig') });
    controller = await startController(kubeconfig, ['--namespace', CONTROLLER_NS, '--leader-election-namespace', CONTROLLER_NS, '--allowed-peer-origins', peer.info.server]);
  }, 240_000);

  afterAll(async () => {
    await controller?.stop();
    await Promise.all([ours?.stop(), peer?.stop()]);
  });

  it('another namespace\'s PeerFleet never lends it and says why; the PeerFleet of that namespace does; the admin\'s fix is seen at once', async () => {
    // Whole-node Jobs the node could run, queued before either PeerFleet exists.
    for (let i = 0; i < 2; i++) await apply(peer, peerJob(`wanted-${i}`, { gpus: 2, runFor: '90s' }));
    const fleet = (name: string, ns: string) => JSON.stringify(fleetManifest(peer, name, ns, { lendableNodes: { matchLabels: POOL }, idleWindow: '1s', pollInterval: '5s' }));

    // Team B first, alone: Ready, with queued Jobs that fit, and nothing else lending the node.
    expect((await tenantB(['apply', '-f', '-'], fleet('b', TEAM_B))).code).toBe(0);
    await must(ours, ['wait', '-n', TEAM_B, '--for=condition=Ready', '--timeout=120s', 'peerfleet.leasehold.dev/b']);
    const refused = await waitFor(`${TEAM_B}'s PeerFleet reporting ${NODE} not opted in`, async () => {
      const h = hostOf(await getFleet(TEAM_B, 'b'));
      return h?.reason === 'NotOptedIn' ? h : undefined;
    }, 60_000, 500);
    expect(refused.state).toBe('Unlisted');
    expect(refused.message).toContain(`node ${NODE} is not opted in for lending to PeerFleets of namespace ${TEAM_B}`);
    expect(refused.message).toContain(`kubectl annotate node ${NODE} leasehold.dev/lendable-namespaces=<the list>,${TEAM_B} --overwrite`);
    // The namespaces the node is opted in for are another team's business.
    expect(refused.message).not.toContain(TEAM_A);
    expect((await getFleet(TEAM_B, 'b')).status.summary).toBe('1 Unlisted');

    // Team A's PeerFleet lends it.
    expect((await tenantA(['apply', '-f', '-'], fleet('a', TEAM_A))).code).toBe(0);
    const mirror = await waitFor(`a mirror of ${TEAM_A}'s PeerFleet on ${NODE}`, async () => (await mirrorsIn(TEAM_A)).find((m: any) => m.metadata.labels['leasehold.dev/node'] === NODE), 120_000, 500);
    expect(mirror.metadata.labels['leasehold.dev/peerfleet']).toBe('a');
    expect(await claimsBy(`${TEAM_A}.a`)).toEqual([expect.stringMatching(new RegExp(`/${TEAM_A}\\.a/${NODE}$`))]);
    expect(await holder()).toBe(`${TEAM_A}/a`);
    // Team B, Ready the whole time with Jobs that fit, claimed nothing, ran nothing and holds nothing.
    expect(await mirrorsIn(TEAM_B)).toEqual([]);
    expect(await claimsBy(`${TEAM_B}.b`)).toEqual([]);
    expect(hostOf(await getFleet(TEAM_B, 'b'))).toMatchObject({ state: 'Unlisted', reason: 'NotOptedIn' });

    // The admin appends team B: its PeerFleet sees the node at once, held by team A's session.
    await must(ours, ['annotate', 'node', NODE, '--overwrite', `leasehold.dev/lendable-namespaces=${TEAM_A},${TEAM_B}`]);
    const waiting = await waitFor(`${TEAM_B}'s PeerFleet waiting for ${TEAM_A}'s session on ${NODE}`, async () => {
      const h = hostOf(await getFleet(TEAM_B, 'b'));
      return h && h.reason !== 'NotOptedIn' && /lends to PeerFleet ml-a\/a/.test(h.message ?? '') ? h : undefined;
    }, 60_000, 500);
    expect(waiting.state).toBe('Waiting');
    expect(await mirrorsIn(TEAM_B)).toEqual([]);
  }, 300_000);
});
