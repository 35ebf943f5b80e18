// A lent node keeps working: when a mirror finishes, the node claims the next
// peer Job at once, on the mirror's watch event, not at the next poll. The
// PeerFleet polls every 60 s here, so a node that waited for a poll between
// two peer Jobs would show a gap of a minute; the idle window (2 s) guards
// only the start of lending. Six nodes finish mirrors while the PeerFleet's
// effects run, so the watch events that come meanwhile must not be lost. Each peer Job costs the peer its floor of
// writes: the claim, the Running write-back and the finished one, the host
// and exit-code annotations in the same PATCH. While a node runs one Job, its
// session records the Job it claims next, so that claim needs no status
// write when the room frees.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { apply, json, waitFor } from './support/kube.js';
import { fleetManifest, optedIn, peerJob, QUEUE, tenantLending, type TenantLending } from './support/lending.js';

const NS = 'lend';
const POOL = { 'leasehold.dev/pool': 'next' };
/** Nodes of one GPU, each running three peer Jobs one after another. */
const NODES = ['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4', 'gpu-5', 'gpu-6'];
const JOBS = Array.from({ length: 3 * NODES.length }, (_, i) => `next-${String(i).padStart(2, '0')}`);
/** Far below the 60 s poll: the watch event of the finished mirror, a pass, a claim, the mirror's start. */
const GAP_S = 10;

let env: TenantLending;

interface PeerJob {
  metadata: { name: string; uid: string; annotations?: Record<string, string> };
  status?: { startTime?: string; completionTime?: string; conditions?: { type: string; status: string }[] };
}

beforeAll(async () => {
  env = await tenantLending('next-claim', NS, NODES.map((name) => ({ name, gpus: 1, ...optedIn(NS, POOL) })));
}, 400_000);

afterAll(async () => {
  await env?.controller.stop();
  await Promise.all([env?.ours.stop(), env?.peer.stop()]);
});

describe('PeerFleet: a lent node keeps working', () => {
  it('claims the next peer Job as soon as its mirror finishes, far inside a 60 s poll, at the floor of peer writes', async () => {
    const { ours, peer, controller } = env;
    for (const name of JOBS) await apply(peer, peerJob(name, { runFor: '6s' }));
    const patchesBefore = await controller.metric('leasehold_kube_requests_total', { client: 'peer', verb: 'PATCH' });
    await apply(ours, fleetManifest(peer, 'next', NS, { lendableNodes: { matchLabels: POOL }, idleWindow: '2s', pollInterval: '60s' }));
    // When each peer Job's uid is first seen in a node's session (recorded before its claim).
    const firstRecorded = new Map<string, { node: string; at: number }>();
    let watching = true;
    const watchSessions = (async () => {
      while (watching) {
        const hosts: { node: string; session?: { claims?: string[] } }[] = (await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'next'])).status?.hosts ?? [];
        const now = Date.now();
        for (const h of hosts) for (const uid of h.session?.claims ?? []) if (!firstRecorded.has(uid)) firstRecorded.set(uid, { node: h.node, at: now });
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    // Three in a row on each node: at one a poll they would take two minutes more.
    const jobs = await waitFor('every peer Job Complete with its exit code', async () => {
      const list = (await json(peer, ['-n', QUEUE, 'get', 'jobs'])).items.filter((j: PeerJob) => JOBS.includes(j.metadata.name));
      const done = list.filter((j: PeerJob) => j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') && j.metadata.annotations?.['leasehold.dev/exit-code'] === '0');
      return done.length === JOBS.length ? (done as PeerJob[]) : undefined;
    }, 150_000, 500).finally(() => (watching = false));
    await watchSessions;
    // startTime and completionTime are the mirror's, written back (whole seconds): per node, each start after the end before it.
    const byHost = new Map<string, { uid: string; start: number; end: number }[]>();
    for (const j of jobs) {
      const host = j.metadata.annotations!['leasehold.dev/host']!;
      byHost.set(host, [...(byHost.get(host) ?? []), { uid: j.metadata.uid, start: Date.parse(j.status!.startTime!), end: Date.parse(j.status!.completionTime!) }]);
    }
    const gaps = [...byHost.values()].flatMap((runs) => {
      runs.sort((a, b) => a.start - b.start);
      return runs.slice(1).map((r, i) => (r.start - runs[i]!.end) / 1000);
    });
    expect(gaps.length).toBeGreaterThanOrEqual(JOBS.length - NODES.length);
    expect(gaps.filter((g) => g > GAP_S)).toEqual([]);
    // A node's next Job was recorded in its session while the one before it
    // still ran (its completionTime is the mirror's, in whole seconds, so at
    // most the true end): most of them, where a poll can miss one.
    const follows = [...byHost.entries()].flatMap(([host, runs]) => runs.slice(1).map((r, i) => ({ node: host.split('/').pop(), uid: r.uid, before: runs[i]!.end })));
    const aside = follows.filter((f) => firstRecorded.get(f.uid)?.node === f.node && firstRecorded.get(f.uid)!.at < f.before);
    expect(aside.length).toBeGreaterThanOrEqual(Math.ceil(follows.length / 2));
    // A node lends in one session from its first claim to its last.
    expect(await controller.metric('leasehold_peerfleet_sessions_total', { peerfleet: 'next' })).toBeLessThanOrEqual(NODES.length);
    await waitFor('the accounting of every peer Job', async () => (await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'next'])).status?.accounting?.jobs === JOBS.length, 60_000, 500);
    // Claim, Running, finished (annotations in the same PATCH): three PATCHes of the peer per Job.
    const patches = (await controller.metric('leasehold_kube_requests_total', { client: 'peer', verb: 'PATCH' })) - patchesBefore;
    expect(patches).toBe(3 * JOBS.length);
  }, 200_000);
});
