// Tenancy, PeerFleet nodes: a namespace user with leasehold.dev "*" in their
// own namespace writes a PeerFleet whose selector picks every node, hoping
// to lend control-plane, cordoned, never-opted-in and another team's
// dedicated nodes to a peer they run. Only the nodes an admin opted in
// (leasehold.dev/lendable=true) and whose taints the admin listed are lent;
// the mirrors tolerate the listed taint and nothing else. The controller
// runs with the chart's RBAC and admission policy.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ControlPlane } from './cluster/controlplane.js';
import type { ControllerProcess } from './support/controller.js';
import { apply, json, type Kubectl, must, waitFor } from './support/kube.js';
import { fleetManifest, OPTED_IN, peerJob, QUEUE, tenantLending } from './support/lending.js';

const NS = 'team-a';
const POOL = { 'leasehold.dev/pool': 'gpu' };
const GOOD = ['opted-in', 'listed-taint'];
let ours: ControlPlane;
let peer: ControlPlane;
let tenant: Kubectl;
let controller: ControllerProcess;

beforeAll(async () => {
  ({ ours, peer, tenant, controller } = await tenantLending('pfnodes', NS, [
    { name: 'opted-in', gpus: 2, labels: { ...POOL, ...OPTED_IN } },
    { name: 'listed-taint', gpus: 2, labels: { ...POOL, ...OPTED_IN }, taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] },
    { name: 'control-plane', gpus: 2, labels: { ...POOL, ...OPTED_IN, 'node-role.kubernetes.io/control-plane': '' } },
    { name: 'cordoned', gpus: 2, labels: { ...POOL, ...OPTED_IN } },
    { name: 'not-opted-in', gpus: 2, labels: POOL },
    { name: 'team-b', gpus: 2, labels: { ...POOL, ...OPTED_IN }, taints: [{ key: 'team-b/dedicated', value: 'true', effect: 'NoSchedule' }] },
  ], ['--peer-tolerate-taints', 'nvidia.com/gpu:NoSchedule'], async (cluster: ControlPlane) => {
    await must(cluster, ['cordon', 'cordoned']);
  }));
}, 240_000);

afterAll(async () => {
  await controller?.stop();
  await Promise.all([ours?.stop(), peer?.stop()]);
});

describe('a namespace user and the nodes a PeerFleet lends', () => {
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
