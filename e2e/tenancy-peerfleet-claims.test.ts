// Tenancy, forged claims: whoever runs the peer (here the same team that
// wrote the PeerFleet, with leasehold.dev "*" in their namespace) can write
// our claim annotation on any Job of their queue. Recovery used to start a
// mirror for every such Job, skipping the fit check, the holder Lease and
// pacing. Now only a claim our PeerFleet status recorded before writing it
// is ours to run; the forged ones are reported and counted, and none runs.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ControlPlane } from './cluster/controlplane.js';
import type { ControllerProcess } from './support/controller.js';
import { apply, json, type Kubectl, must, waitFor } from './support/kube.js';
import { fleetManifest, optedIn, peerJob, QUEUE, tenantLending, type TenantLending } from './support/lending.js';

const NS = 'team-a';
const POOL = { 'leasehold.dev/pool': 'gpu' };
const FORGED = 5;
let ours: ControlPlane;
let peer: ControlPlane;
let tenant: Kubectl;
let controller: ControllerProcess;
let setup: TenantLending;

beforeAll(async () => {
  setup = await tenantLending('pfclaims', NS, [{ name: 'gpu-1', gpus: 8, ...optedIn(NS, POOL) }]);
  ({ ours, peer, tenant, controller } = setup);
}, 240_000);

afterAll(async () => {
  await controller?.stop();
  await Promise.all([ours?.stop(), peer?.stop()]);
});

describe('claims in our name that we never made', () => {
  it('a forged claimed-by annotation on peer Jobs runs nothing; each is reported and counted', async () => {
    const created = await tenant(['apply', '-f', '-'], JSON.stringify(fleetManifest(peer, 'fleet', NS, { lendableNodes: { matchLabels: POOL }, idleWindow: '1s', pollInterval: '5s' })));
    expect(created.code).toBe(0);
    // An honest Job first: its claim shows the form our claims take.
    await apply(peer, peerJob('honest', { runFor: '3s' }));
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=120s', 'job/honest']);
    const claim: string = (await json(peer, ['-n', QUEUE, 'get', 'job', 'honest'])).metadata.annotations['leasehold.dev/claimed-by'];
    expect(claim).toMatch(/^[a-z0-9]+\/team-a\.fleet\/gpu-1$/);

    // The peer writes that same claim on Jobs of its own, each asking for a whole node.
    for (let i = 0; i < FORGED; i++) {
      const job = peerJob(`forged-${i}`, { gpus: 8, runFor: '600s' });
      await apply(peer, { ...job, metadata: { ...job.metadata, annotations: { 'leasehold.dev/claimed-by': claim } } });
    }
    const uids = new Set<string>();
    for (let i = 0; i < FORGED; i++) uids.add((await json(peer, ['-n', QUEUE, 'get', 'job', `forged-${i}`])).metadata.uid);

    const reported = await waitFor('a ForgedClaim event for each forged Job', async () => {
      const messages: string[] = (await json(ours, ['-n', NS, 'get', 'events', '--field-selector', 'reason=ForgedClaim'])).items.map((e: { message: string }) => e.message);
      return Array.from({ length: FORGED }, (_, i) => `forged-${i}`).every((n) => messages.some((m) => m.includes(`peer Job ${QUEUE}/${n} carries a claim by us`))) ? messages : undefined;
    }, 90_000, 500);
    expect(reported.join('\n')).toMatch(/that we never recorded; it is not run/);
    await waitFor('the forged claims counted', async () => (await controller.metric('leasehold_peerfleet_forged_claims', { peerfleet: 'fleet' })) === FORGED, 60_000, 500);

    // No mirror of any of them, and none of them shows a start.
    const mirrors = (await json(ours, ['-n', NS, 'get', 'jobs'])).items;
    expect(mirrors.filter((m: any) => uids.has(m.metadata.labels['leasehold.dev/peer-job-uid']))).toEqual([]);
    expect((await json(ours, ['-n', NS, 'get', 'pods'])).items.filter((p: any) => uids.has(p.metadata.labels?.['leasehold.dev/peer-job-uid']))).toEqual([]);
    for (let i = 0; i < FORGED; i++) expect((await json(peer, ['-n', QUEUE, 'get', 'job', `forged-${i}`])).status?.startTime).toBeUndefined();
  });

  it('after a restart of the controller the forged claims still run nothing', async () => {
    await controller.stop();
    controller = await setup.restartController();
    await waitFor('the forged claims counted again', async () => (await controller.metric('leasehold_peerfleet_forged_claims', { peerfleet: 'fleet' }).catch(() => 0)) === FORGED, 90_000, 500);
    const mirrors = (await json(ours, ['-n', NS, 'get', 'jobs'])).items;
    expect(mirrors.filter((m: any) => m.metadata.labels['leasehold.dev/peer-job-uid'] && m.metadata.annotations?.['leasehold.dev/peer-job']?.startsWith(`${QUEUE}/forged-`))).toEqual([]);
  });
});
