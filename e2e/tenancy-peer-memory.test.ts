// A peer API server that tries to exhaust the controller's memory with
// answers that are each valid: list pages of 1 MiB Jobs whose `continue`
// never runs out, and a watch that streams ever-new 1 MiB Jobs, behind six
// PeerFleets of one team's namespace (more than the cap lets it have). The
// controller runs as the chart runs it under its 1 GiB memory limit (the heap
// at three quarters of it), inside a memory cgroup of 1 GiB where the
// machine has one. Each peer must be cut off at its budget, again after each
// retry, the newest PeerFleets must be refused by the cap, and meanwhile a
// Lease of another namespace goes Ready and is released, with the
// controller's peak resident memory under the limit.
//
// The controller watches every namespace here, so this file runs on a
// control plane of its own rather than the shared one.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { ControlPlane } from './cluster/controlplane.js';
import { hostilePeerFleets, startHostilePeer, type HostilePeer } from './support/hostilepeer.js';
import { freshNamespace, getJSON, waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const GiB = 1024 ** 3;
/** As the chart sets it for resources.limits.memory 1Gi. */
const HEAP_FLAG = '--max-old-space-size=768';
const PEER_TOKEN = 'peer-memory-token-7c1d2e9a4b6f4d10';
/** Created in this order; with a cap of four, the last two are refused. */
const FLEETS = [
  { name: 'a-pages', queue: 'pages' },
  { name: 'b-flood', queue: 'flood' },
  { name: 'c-pages', queue: 'pages' },
  { name: 'd-flood', queue: 'flood' },
  { name: 'e-pages', queue: 'pages' },
  { name: 'f-flood', queue: 'flood' },
] as const;
type Queue = (typeof FLEETS)[number]['queue'];

let cp: ControlPlane;
let sharedKubeconfig: string | undefined;
const fx = leaseSuite('peer-memory', {
  startController: false,
  setupTimeoutMs: 180_000,
  before: async () => {
    cp = await ControlPlane.start({ name: 'memory' });
    const crds = await cp.kubectl(['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
    if (crds.code !== 0) throw new Error(`installing CRDs failed: ${crds.stderr}`);
    const established = await cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '-l', 'app.kubernetes.io/part-of=leasehold']);
    if (established.code !== 0) throw new Error(`CRDs not established: ${established.stderr}`);
    // The fixture (namespace, Offers, the controller's kubeconfig) is made on this control plane.
    sharedKubeconfig = process.env.E2E_KUBECONFIG;
    process.env.E2E_KUBECONFIG = cp.info.kubeconfig;
  },
  after: async () => {
    process.env.E2E_KUBECONFIG = sharedKubeconfig;
    await cp?.stop();
  },
});

const served = { pages: 0, pageBytes: 0, floodJobs: 0, floodBytes: 0 };
const PAD = 'x'.repeat(1024 * 1024);
let peer: HostilePeer;
let hostile: string;
let cgroup: string | undefined;

/** A valid lendable Job of about 1 MiB, the bulk in what the mirror would run (its env), so no projection drops it. */
const bigJob = (namespace: string, n: number) =>
  JSON.stringify({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: `job-${n}`, namespace, uid: randomUUID(), resourceVersion: String(100 + n), creationTimestamp: '2026-12-01T00:00:00Z', labels: { 'leasehold.dev/lendable': 'true' } },
    spec: { managedBy: 'leasehold.dev/peer-lending', template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox', env: [{ name: 'PAD', value: PAD }] }] } } },
  });

const list = (items: string[], cont?: string) =>
  `{"kind":"JobList","apiVersion":"batch/v1","metadata":{"resourceVersion":"10"${cont ? `,"continue":"${cont}"` : ''}},"items":[${items.join(',')}]}`;

function answer(queue: Queue, namespace: string, req: IncomingMessage, res: ServerResponse): void {
  const q = new URL(req.url!, 'https://peer').searchParams;
  res.setHeader('content-type', 'application/json');
  // The readiness probe is answered cleanly: the attack is on the watch of the queue.
  if (q.get('limit') === '1') return void res.end(list([]));
  const watching = q.get('watch') === 'true';
  if (queue === 'pages') {
    if (watching) return void res.end();
    const body = list([bigJob(namespace, ++served.pages)], `page-${served.pages}`);
    served.pageBytes += body.length;
    return void res.end(body);
  }
  if (!watching) return void res.end(list([]));
  res.writeHead(200);
  const pump = () => {
    while (!res.destroyed) {
      const line = `{"type":"ADDED","object":${bigJob(namespace, 1_000_000 + ++served.floodJobs)}}\n`;
      served.floodBytes += line.length;
      if (!res.write(line)) return void res.once('drain', pump);
    }
  };
  pump();
}

/** The controller's peak resident memory so far, from the kernel's high-water mark. */
const peakRSS = (pid: number): number => {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb ?? 0) * 1024;
};

/** A cgroup v1 memory group of 1 GiB for the controller, where the machine has the memory controller; undefined where it has not. */
function memoryCgroup(pid: number): string | undefined {
  const root = '/sys/fs/cgroup/memory';
  if (!existsSync(join(root, 'cgroup.procs'))) return undefined;
  const dir = join(root, `leasehold-peer-memory-${process.pid}`);
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'memory.limit_in_bytes'), String(GiB));
    writeFileSync(join(dir, 'cgroup.procs'), String(pid));
    return dir;
  } catch {
    return undefined;
  }
}

beforeAll(async () => {
  peer = await startHostilePeer(PEER_TOKEN, (queue) => /^(pages|flood)-\d$/.test(queue), (queue, req, res) => answer(queue.split('-')[0] as Queue, queue, req, res));
  // The hostile team's namespace is not the Lease's.
  hostile = await freshNamespace(fx.kubectl, 'hostile');
  fx.controller = await fx.startController(
    [
      '--watch-namespace=',
      '--check-interval', '1s',
      '--acquire-timeout', '60s',
      '--max-leases', '2',
      '--allowed-peer-origins', peer.origin,
      '--peer-budget-retry', '5s',
      '--max-peerfleets-per-namespace', '4',
    ],
    { NODE_OPTIONS: HEAP_FLAG },
  );
  cgroup = memoryCgroup(fx.controller.child.pid!);
  await hostilePeerFleets(fx.kubectl, hostile, peer, PEER_TOKEN, FLEETS.map((f, i) => ({ name: f.name, queue: `${f.queue}-${i}` })));
}, 120_000);

afterAll(async () => {
  await peer?.close();
  // The controller has stopped by now (the suite's afterAll ran first); an empty group can go.
  if (cgroup) {
    try {
      rmdirSync(cgroup);
    } catch {
      // Still holding a process: the next run's group has another name.
    }
  }
});

const alive = () => {
  const { exitCode, signalCode } = fx.controller.child;
  if (exitCode !== null || signalCode !== null) throw new Error(`the controller exited (${exitCode ?? signalCode}); see ${fx.controller.logFile}`);
};
const verdict = async (name: string) => (await getJSON(fx.kubectl, ['-n', hostile, 'peerfleets.leasehold.dev', name]))?.status?.verdict;
const cutOffs = async (name: string) => {
  alive();
  return fx.controller.metric('leasehold_objects_dropped_total', { cluster: `peer:${hostile}/${name}`, reason: 'over_budget' });
};

describe('a peer that sends valid answers without end', () => {
  it('is cut off at its budget each time it is watched, the cap refuses the newest PeerFleets, and a Lease of another namespace is served meanwhile under the memory limit', async () => {
    const t0 = Date.now();
    const offer = await fx.offer('box', { ...sshdCommands(), pricePerHour: 0, idleTimeout: '10m', maxLifetime: '1h' });
    await fx.lease('during', { where: 'cpus>=1', offer });
    // The peers attack from the start (their PeerFleets were made first): the Lease is acquired meanwhile.
    const st = await fx.waitPhase('during', 'Ready', 120_000);
    expect(fx.sshdFor(st.leaseID)).not.toBe('');

    // Each served PeerFleet's peer is cut off, and cut off again after the retry: the attack goes on all along.
    for (const f of FLEETS.slice(0, 4)) {
      await waitFor(`${f.name} cut off twice`, async () => (await cutOffs(f.name)) >= 2, 120_000, 250);
      const v = await verdict(f.name);
      expect(v).toMatchObject({ ready: false, code: 'PeerOverBudget' });
      expect(v.reasons[0]).toMatch(/^the watch of the lendable Jobs in namespace (pages|flood)-\d at https:\/\/127\.0\.0\.1:\d+ was cut off: it would hold \d+ objects in [0-9.]+ MiB, past the budget of 32 MiB \(the budget of one peer: 32 MiB and 5000 Jobs/);
      expect(v.reasons[0]).toMatch(/running mirror Jobs finish; it is watched again at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; keep fewer or smaller lendable Jobs/);
    }
    // Past the cap: no Secret read, no watch, whatever the peer would send.
    for (const f of FLEETS.slice(4)) {
      await waitFor(`${f.name} refused by the cap`, async () => (await verdict(f.name))?.code === 'TooManyPeerFleets', 60_000, 250);
      expect(await cutOffs(f.name)).toBe(0);
    }

    const del = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'during', '--timeout=120s']);
    expect(del.code).toBe(0);
    expect(fx.sshdFor(st.leaseID)).toBe('');

    // Each attack was cut near its budget, not read for as long as the peer kept sending.
    const pageCuts = (await cutOffs('a-pages')) + (await cutOffs('c-pages'));
    const floodCuts = (await cutOffs('b-flood')) + (await cutOffs('d-flood'));
    expect(served.pageBytes).toBeLessThan((pageCuts + 2) * 40 * 1024 * 1024);
    expect(served.pages).toBeGreaterThanOrEqual(pageCuts * 30);
    expect(served.floodJobs).toBeGreaterThanOrEqual(floodCuts * 30);

    const peak = peakRSS(fx.controller.child.pid!);
    expect((await fetch(fx.controller.metricsURL.replace('/metrics', '/healthz'))).status).toBe(200);
    alive();
    expect(peak).toBeLessThan(GiB);
    const log = readFileSync(fx.controller.logFile, 'utf8');
    expect(log).toMatch(/over its budget: stopped reading this source and dropped its cache/);
    expect(log).not.toContain(PEER_TOKEN);
    process.stdout.write(
      `peer memory attack: controller peak RSS ${(peak / 1024 ** 2).toFixed(0)} MiB (limit 1024 MiB, heap ${HEAP_FLAG}, ${cgroup ? 'in a 1 GiB memory cgroup' : 'no memory cgroup on this machine'}); ` +
        `cut-offs: pages ${pageCuts}, flood ${floodCuts}; sent ${served.pages} pages (${(served.pageBytes / 1024 ** 2).toFixed(0)} MiB) and ${served.floodJobs} watched Jobs (${(served.floodBytes / 1024 ** 2).toFixed(0)} MiB) in ${Date.now() - t0} ms\n`,
    );
  }, 600_000);
});
