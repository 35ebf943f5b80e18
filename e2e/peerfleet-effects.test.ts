// PeerFleet calls to a peer run off the reconcile workers: with one worker
// and two PeerFleets, one whose peer answers several seconds late (a TCP
// proxy on loopback in front of the peer's API server holds every answer),
// the other still claims its peer Jobs as fast as when no peer was slow. Each
// quick claim is sent while a request of the slow PeerFleet is held at the
// proxy: a worker that waited on it would add the rest of the hold.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import type { ControlPlane } from './cluster/controlplane.js';
import { createFakeNodes } from './cluster/kwok.js';
import { createPeerCredential } from './cluster/peer.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { chartIdentity } from './support/helm.js';
import { apply, json, must, waitFor } from './support/kube.js';
import { fleetManifest, lendingNamespace, optedIn, peerJob, QUEUE, startLendingClusters, type LendingClusters } from './support/lending.js';

const NS = 'lendfx';
const SLOW_QUEUE = 'slowq';
const HOLD_MS = 3_000;

/**
 * Forwards bytes to `target`; every answer from it is held `delayMs` before
 * it goes on, in order. `heldRequest(ms)`: a connection whose client wrote
 * within the last `ms` and has had no answer since.
 */
class SlowProxy {
  delayMs = 0;
  private readonly server: Server;
  private readonly conns = new Set<{ waitingSince?: number; sockets: Socket[] }>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => {
      const conn: { waitingSince?: number; sockets: Socket[] } = { sockets: [client] };
      const upstream = connect(this.target.port, this.target.host);
      conn.sockets.push(upstream);
      this.conns.add(conn);
      let chain = Promise.resolve();
      client.on('data', (chunk) => {
        conn.waitingSince ??= Date.now();
        upstream.write(chunk);
      });
      upstream.on('data', (chunk) => {
        const delay = this.delayMs;
        chain = chain.then(() => new Promise<void>((resolve) => setTimeout(() => {
          delete conn.waitingSince;
          if (!client.destroyed) client.write(chunk);
          resolve();
        }, delay)));
      });
      const close = () => {
        this.conns.delete(conn);
        void chain.then(() => {
          client.destroy();
          upstream.destroy();
        });
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as { port: number }).port;
    return `https://127.0.0.1:${this.port}`;
  }

  heldRequest(withinMs: number): boolean {
    const now = Date.now();
    return [...this.conns].some((c) => c.waitingSince !== undefined && now - c.waitingSince < withinMs);
  }

  async stop(): Promise<void> {
    for (const c of this.conns) for (const s of c.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

let clusters: LendingClusters;
let ours: ControlPlane;
let peer: ControlPlane;
let controller: ControllerProcess;
let proxy: SlowProxy;

const getFleet = (name: string) => json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', name]);

beforeAll(async () => {
  clusters = await startLendingClusters('pfx');
  ({ ours, peer } = clusters);
  await lendingNamespace(clusters, NS);
  const slowLender = await createPeerCredential(peer, { namespace: SLOW_QUEUE });
  await apply(ours, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'slow-token', namespace: NS }, stringData: { token: slowLender.token } });
  const url = new URL(peer.info.server);
  proxy = new SlowProxy({ host: url.hostname, port: Number(url.port) });
  const slowOrigin = await proxy.start();
  await createFakeNodes(ours.kubectl.bind(ours), [
    { name: 'quick-a', gpus: 2, ...optedIn(NS, { 'leasehold.dev/pool': 'quick' }) },
    { name: 'slow-a', gpus: 2, ...optedIn(NS, { 'leasehold.dev/pool': 'slow' }) },
  ]);
  const kubeconfig = await chartIdentity({
    kubectl: ours.kubectl.bind(ours),
    release: 'pfx',
    namespace: NS,
    set: [`watchNamespace=${NS}`, `secretNamespaces={${NS}}`],
    file: join(ours.info.dir, 'pfx.kubeconfig'),
  });
  // One reconcile worker for two PeerFleets.
  controller = await startController(kubeconfig, ['--namespace', NS, '--watch-namespace', NS, '--leader-election-namespace', NS,
    '--allowed-peer-origins', `${peer.info.server},${slowOrigin}`, '--peerfleet-concurrency', '1']);
  const base = { idleWindow: '3s', pollInterval: '5s' };
  await apply(ours, fleetManifest(peer, 'quick', NS, { ...base, lendableNodes: { matchLabels: { 'leasehold.dev/pool': 'quick' } } }));
  await apply(ours, fleetManifest(peer, 'slow', NS, {
    ...base, origin: slowOrigin, namespace: SLOW_QUEUE, credentialSecretRef: { name: 'slow-token' }, lendableNodes: { matchLabels: { 'leasehold.dev/pool': 'slow' } },
  }));
  for (const f of ['quick', 'slow']) await must(ours, ['wait', '-n', NS, '--for=condition=Ready', '--timeout=120s', `peerfleet.leasehold.dev/${f}`]);
}, 400_000);

afterAll(async () => {
  await controller?.stop();
  await proxy?.stop();
  await Promise.all([ours?.stop(), peer?.stop()]);
});

let sample = 0;
/** Waits for the quick PeerFleet's node to be Available, queues a peer Job for it, and times its claim. */
async function quickClaimMs(before?: () => Promise<void>): Promise<number> {
  await waitFor('quick-a Available', async () => (await getFleet('quick')).status?.hosts?.find((h: { node: string }) => h.node === 'quick-a')?.state === 'Available', 120_000, 250);
  const name = `quick-${++sample}`;
  await before?.();
  const queued = Date.now();
  await apply(peer, peerJob(name, { runFor: '1s' }));
  await waitFor(`${name} claimed`, async () => !!(await json(peer, ['-n', QUEUE, 'get', 'job', name])).metadata.annotations?.['leasehold.dev/claimed-by'], 120_000, 50);
  return Date.now() - queued;
}

describe('PeerFleet effects off the reconcile workers', () => {
  it("a slow peer of one PeerFleet does not delay another's claims on the one worker", async () => {
    const baseline: number[] = [];
    for (let i = 0; i < 2; i++) baseline.push(await quickClaimMs());

    // The slow PeerFleet's peer now answers HOLD_MS late, and it has lending of its own to do over it.
    proxy.delayMs = HOLD_MS;
    await apply(peer, { ...peerJob('slow-1', { runFor: '10m' }), metadata: { name: 'slow-1', namespace: SLOW_QUEUE, labels: { 'leasehold.dev/lendable': 'true' } } });
    const slowed: number[] = [];
    for (let i = 0; i < 3; i++) {
      // Sent while a slow request has just begun its hold: a worker waiting on it would wait most of HOLD_MS.
      slowed.push(await quickClaimMs(async () => void (await waitFor('a request of the slow PeerFleet held at the proxy', async () => proxy.heldRequest(500), 120_000, 20))));
    }
    console.log(`peerfleet effects: quick claims took ${baseline.join(', ')} ms with no slow peer, ${slowed.join(', ')} ms while the other PeerFleet's peer held each answer ${HOLD_MS} ms (one worker)`);
    for (const ms of slowed) expect(ms).toBeLessThan(Math.max(...baseline) + 1_000);
    // The slow PeerFleet still lends, only slowly.
    await waitFor('slow-1 claimed through the slow peer', async () => !!(await json(peer, ['-n', SLOW_QUEUE, 'get', 'job', 'slow-1'])).metadata.annotations?.['leasehold.dev/claimed-by'], 180_000, 500);
    expect((await getFleet('slow')).status.verdict.ready).toBe(true);
  }, 600_000);
});
