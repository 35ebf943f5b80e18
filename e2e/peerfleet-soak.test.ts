// PeerFleet soak: many KWOK GPU nodes lend to a peer queue of Jobs of random
// length while our own Jobs arrive at random and drain nodes. At the end no
// peer Job was cut off or run twice, and the accounting equals the sum of the
// peer's own records to the second. `make test` runs 300 peer Jobs with 50
// or more drains (a few minutes); PEERFLEET_SOAK=full runs 1000 with 150 or more.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ControlPlane } from './cluster/controlplane.js';
import { createFakeNodes } from './cluster/kwok.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, json, must, waitFor } from './support/kube.js';
import { fleetManifest, lendingNamespace, optedIn, ourJob, peerJob, QUEUE, startLendingClusters } from './support/lending.js';

const FULL = process.env.PEERFLEET_SOAK === 'full';
const NODES = 20;
const PEER_JOBS = FULL ? 1000 : 300;
const OUR_JOBS = FULL ? 300 : 100;
const MIN_DRAINS = FULL ? 150 : 50;
const NS = 'soak';
const POOL = { 'leasehold.dev/pool': 'soak' };

let ours: ControlPlane;
let peer: ControlPlane;
let controller: ControllerProcess;

// A fixed seed: a failure can be run again as it was.
let seed = 20261203;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const between = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));

beforeAll(async () => {
  const clusters = await startLendingClusters('soak');
  ({ ours, peer } = clusters);
  await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'work' } });
  await lendingNamespace(clusters, NS);
  await createFakeNodes(ours.kubectl.bind(ours), Array.from({ length: NODES }, (_, i) => ({ name: `soak-${i}`, gpus: 2, ...optedIn(NS, POOL) })), '240s');
  controller = await startController(ours.info.kubeconfig, ['--namespace', NS, '--watch-namespace', NS, '--leader-election-namespace', NS, '--log-level', 'info', '--allowed-peer-origins', peer.info.server]);
  await apply(ours, fleetManifest(peer, 'soak', NS, { lendableNodes: { matchLabels: POOL }, pricePerGPUHour: 3, idleWindow: '2s', pollInterval: '5s' }));
  await must(ours, ['wait', '-n', NS, '--for=condition=Ready', '--timeout=120s', 'peerfleet.leasehold.dev/soak']);
}, 600_000);

afterAll(async () => {
  await controller?.stop();
  await Promise.all([ours?.stop(), peer?.stop()]);
});

describe('PeerFleet soak', () => {
  it(`${PEER_JOBS} peer Jobs on ${NODES} nodes with our work arriving: none cut off, none run twice, the accounting to the second`, async () => {
    const done = (j: any) => j.status?.conditions?.some((c: any) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    const peerNames = Array.from({ length: PEER_JOBS }, (_, i) => `p-${i}`);
    const peerJobs = peerNames.map((n) => peerJob(n, { gpus: between(1, 2), runFor: `${between(2, 8)}s` }));
    // Ours take a whole node: while the pool lends they wait, and a waiting pod drains every node it could run on.
    const ourJobs = Array.from({ length: OUR_JOBS }, (_, i) => ourJob(`o-${i}`, 'work', POOL, { gpus: 2, runFor: `${between(1, 3)}s` }));
    // The peer queue fills in batches while our Jobs arrive between them.
    const batches = 6;
    for (let b = 0; b < batches; b++) {
      const slice = peerJobs.slice((b * PEER_JOBS) / batches, ((b + 1) * PEER_JOBS) / batches);
      await must(peer, ['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: slice }));
      const mine = ourJobs.slice((b * OUR_JOBS) / batches, ((b + 1) * OUR_JOBS) / batches);
      for (const o of mine) {
        // Ours should land while a node lends; a batch the pool has already run to the end has none left to lend to, so it goes on then.
        await waitFor('a node lending, or the peer queue run dry', async () => {
          if (((await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'soak'])).status?.hosts ?? []).some((h: { state: string }) => h.state === 'Lending')) return true;
          return (await json(peer, ['-n', QUEUE, 'get', 'jobs'])).items.every(done);
        }, 120_000, 500);
        await must(ours, ['create', '-f', '-'], JSON.stringify(o));
      }
    }
    const finishedPeer = await waitFor('every peer Job finished', async () => {
      const list = (await json(peer, ['-n', QUEUE, 'get', 'jobs'])).items;
      return list.length === PEER_JOBS && list.every(done) ? list : undefined;
    }, FULL ? 1_800_000 : 900_000, 2000);
    await waitFor('every one of our Jobs finished', async () => (await json(ours, ['-n', 'work', 'get', 'jobs'])).items.every(done), 300_000, 2000);

    let sum = 0;
    const hosts = new Set<string>();
    for (const j of finishedPeer) {
      // Cut off or run twice would show as a failure (the mirror lost, or a second run refused by backoffLimit 0).
      expect({ job: j.metadata.name, succeeded: j.status.succeeded, failed: j.status.failed ?? 0 }).toEqual({ job: j.metadata.name, succeeded: 1, failed: 0 });
      hosts.add(j.metadata.annotations['leasehold.dev/host']);
      const gpus = Number(j.spec.template.spec.containers[0].resources.limits['nvidia.com/gpu']);
      sum += ((Date.parse(j.status.completionTime) - Date.parse(j.status.startTime)) / 1000) * gpus;
    }
    // Each Job was claimed exactly once: one claim per Job, no more.
    expect(await controller.metric('leasehold_peerfleet_claims_total', { outcome: 'claimed' })).toBe(PEER_JOBS);
    const drains = await controller.metric('leasehold_peerfleet_drains_total', {});
    expect(drains).toBeGreaterThanOrEqual(MIN_DRAINS);
    const fleet = await waitFor('the accounting of every Job', async () => {
      const f = await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'soak']);
      return f.status?.accounting?.jobs === PEER_JOBS ? f : undefined;
    }, 120_000, 1000);
    expect(fleet.status.accounting.gpuSeconds).toBe(sum);
    expect(fleet.status.accounting.unmeasured).toBe(0);
    console.log(`soak: ${PEER_JOBS} peer Jobs on ${hosts.size} nodes, ${OUR_JOBS} of ours, ${drains} drains, ${sum} GPU-seconds`);
  }, FULL ? 3_600_000 : 1_200_000);
});
