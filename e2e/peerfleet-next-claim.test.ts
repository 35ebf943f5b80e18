// A lent node keeps working: when a mirror finishes, the node claims the next
// peer Job at once, on the mirror's watch event, not at the next poll. The
// PeerFleet polls every 60 s here, so a node that waited for a poll between
// two peer Jobs would show a gap of a minute; the idle window (2 s) guards
// only the start of lending. Each peer Job costs the peer its floor of
// writes: the claim, the Running write-back and the finished one, the host
// and exit-code annotations in the same PATCH.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { apply, fleetManifest, json, OPTED_IN, peerJob, QUEUE, tenantLending, type TenantLending } from './support/lending.js';

const NS = 'lend';
const POOL = { 'leasehold.dev/pool': 'next' };
const JOBS = ['next-1', 'next-2', 'next-3'];
/** Far below the 60 s poll: the watch event of the finished mirror, a pass, a claim, the mirror's start. */
const GAP_S = 10;

let env: TenantLending;

beforeAll(async () => {
  env = await tenantLending('next-claim', NS, [{ name: 'gpu-1', gpus: 1, labels: { ...POOL, ...OPTED_IN } }]);
}, 400_000);

afterAll(async () => {
  await env?.controller.stop();
  await Promise.all([env?.ours.stop(), env?.peer.stop()]);
});

describe('PeerFleet: a lent node keeps working', () => {
  it('claims the next peer Job as soon as its mirror finishes, far inside a 60 s poll, at the floor of peer writes', async () => {
    const { ours, peer, controller } = env;
    for (const name of JOBS) await apply(peer, peerJob(name, { runFor: '3s' }));
    const patchesBefore = await controller.metric('leasehold_kube_requests_total', { client: 'peer', verb: 'PATCH' });
    await apply(ours, fleetManifest(peer, 'next', NS, { lendableNodes: { matchLabels: POOL }, idleWindow: '2s', pollInterval: '60s' }));
    // One node of one GPU runs them one after another; three in a row at one a poll would take two minutes more.
    const jobs = await waitFor('every peer Job Complete with its exit code', async () => {
      const list = (await json(peer, ['-n', QUEUE, 'get', 'jobs'])).items.filter((j: { metadata: { name: string } }) => JOBS.includes(j.metadata.name));
      const done = list.filter((j: { status?: { conditions?: { type: string; status: string }[] }; metadata: { annotations?: Record<string, string> } }) =>
        j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') && j.metadata.annotations?.['leasehold.dev/exit-code'] === '0');
      return done.length === JOBS.length ? done : undefined;
    }, 100_000, 500);
    const runs = jobs
      .map((j: { metadata: { annotations: Record<string, string> }; status: { startTime: string; completionTime: string } }) => ({
        host: j.metadata.annotations['leasehold.dev/host'],
        start: Date.parse(j.status.startTime),
        end: Date.parse(j.status.completionTime),
      }))
      .sort((a: { start: number }, b: { start: number }) => a.start - b.start);
    expect(new Set(runs.map((r: { host: string }) => r.host)).size).toBe(1);
    // startTime and completionTime are whole seconds (the mirror's, written back): the gap is the next start after the last end.
    const gaps = runs.slice(1).map((r: { start: number }, i: number) => (r.start - runs[i]!.end) / 1000);
    for (const gap of gaps) expect(gap).toBeLessThanOrEqual(GAP_S);
    // One session lent the node from the first claim to the last.
    expect(await controller.metric('leasehold_peerfleet_sessions_total', { peerfleet: 'next' })).toBe(1);
    await waitFor('the accounting of every peer Job', async () => (await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'next'])).status?.accounting?.jobs === JOBS.length, 60_000, 500);
    // Claim, Running, finished (annotations in the same PATCH): three PATCHes of the peer per Job.
    const patches = (await controller.metric('leasehold_kube_requests_total', { client: 'peer', verb: 'PATCH' })) - patchesBefore;
    expect(patches).toBe(3 * JOBS.length);
  }, 200_000);
});
