// A peer API server that sends whatever it likes, run as a tenant could run
// one: malformed Jobs (annotations as a string, wrong types), a watch event
// line that never ends, a list body that never ends, and a list that hands
// out `continue` tokens forever, each behind its own PeerFleet. Meanwhile the
// controller must go on serving everything else: a Lease reaches Ready and is
// released, /healthz answers, the process never exits, and every bad object
// or answer is counted in leasehold_objects_dropped_total.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startHostilePeer, hostilePeerFleets, type HostilePeer } from './support/hostilepeer.js';
import { waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const fx = leaseSuite('peer-input', { startController: false });

const PEER_TOKEN = 'peer-input-token-0f8fad5bd9cb469f';
/** Peer namespaces, one per kind of bad input; each PeerFleet watches one. */
const QUEUES = ['malformed', 'endless-line', 'huge-list', 'endless-pages'] as const;
type Queue = (typeof QUEUES)[number];

const served = { malformedLists: 0, malformedWatches: 0, malformedEvents: 0, endlessLineBytes: 0, hugeListBytes: 0, pages: 0 };
let peer: HostilePeer;

const job = (name: string, patch: (j: any) => void = () => {}) => {
  const j: any = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: 'malformed', uid: `0f8fad5b-d9cb-469f-a165-${String(name.length).padStart(12, '0')}`, resourceVersion: '10', labels: { 'leasehold.dev/lendable': 'true' } },
    spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox' }] } } },
  };
  patch(j);
  return j;
};

const MALFORMED = [
  job('strung', (j) => (j.metadata.annotations = 'leasehold.dev/claimed-by')),
  job('numbered-label', (j) => (j.metadata.labels.size = 5)),
  job('wordy-parallelism', (j) => (j.spec.parallelism = 'two')),
  job('listless', (j) => (j.spec.template.spec.containers = 'busybox')),
  job('rooted', (j) => (j.spec.template.spec.containers[0].securityContext = { runAsUser: '0' })),
  { metadata: { name: 42 } },
];

const list = (items: unknown[], cont?: string) =>
  JSON.stringify({ kind: 'JobList', apiVersion: 'batch/v1', metadata: { resourceVersion: '10', ...(cont ? { continue: cont } : {}) }, items });

/** Writes `chunk` until the client hangs up, counting the bytes. */
function endless(res: ServerResponse, chunk: Buffer, count: (n: number) => void): void {
  const pump = () => {
    while (!res.destroyed) {
      count(chunk.length);
      if (!res.write(chunk)) break;
    }
    if (!res.destroyed) res.once('drain', pump);
  };
  pump();
}

function answer(queue: Queue, req: IncomingMessage, res: ServerResponse): void {
  const q = new URL(req.url!, 'http://peer').searchParams;
  res.setHeader('content-type', 'application/json');
  // The readiness probe (a list with limit=1) gets a clean answer: the bad input reaches the watch of the queue, not the verdict.
  if (q.get('limit') === '1') return void res.end(list([]));
  const watching = q.get('watch') === 'true';
  switch (queue) {
    case 'malformed':
      // The first list is clean, so the informer reaches its watch, where one bad event used to end the process;
      // the first watch then expires, and the relist carries the bad Jobs too.
      if (!watching) return void res.end(list(served.malformedLists++ === 0 ? [job('good')] : [job('good'), ...MALFORMED]));
      res.writeHead(200);
      for (const object of MALFORMED) {
        res.write(JSON.stringify({ type: 'ADDED', object }) + '\n');
        served.malformedEvents++;
      }
      if (served.malformedWatches++ === 0) res.end(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }) + '\n');
      return; // later watches are held open
    case 'endless-line':
      if (!watching) return void res.end(list([]));
      res.writeHead(200);
      res.write('{"type":"ADDED","object":{"metadata":{"name":"long","annotations":{"pad":"');
      return endless(res, Buffer.alloc(256 * 1024, 'x'), (n) => (served.endlessLineBytes += n));
    case 'huge-list': {
      res.writeHead(200);
      res.write('{"kind":"JobList","apiVersion":"batch/v1","metadata":{"resourceVersion":"10"},"items":[');
      const one = Buffer.from(JSON.stringify(job('again', (j) => (j.metadata.annotations = { pad: 'p'.repeat(4000) }))) + ',');
      return endless(res, Buffer.concat(Array(64).fill(one)), (n) => (served.hugeListBytes += n));
    }
    case 'endless-pages':
      served.pages++;
      if (watching) return void res.end();
      return void res.end(list([job(`page-${served.pages}`)], `page-${served.pages}`));
  }
}

beforeAll(async () => {
  peer = await startHostilePeer(PEER_TOKEN, (queue) => QUEUES.includes(queue as Queue), (queue, req, res) => answer(queue as Queue, req, res));
  fx.controller = await fx.startController([
    '--check-interval', '1s',
    '--acquire-timeout', '60s',
    '--max-leases', '2',
    '--allowed-peer-origins', peer.origin,
  ]);
  await hostilePeerFleets(fx.kubectl, fx.ns, peer, PEER_TOKEN, QUEUES.map((queue) => ({ name: queue, queue })));
}, 60_000);

afterAll(async () => {
  await peer?.close();
});

const dropped = async (queue: Queue, reason: string) => {
  const { exitCode, signalCode } = fx.controller.child;
  if (exitCode !== null || signalCode !== null) throw new Error(`the controller exited (${exitCode ?? signalCode}); see ${fx.controller.logFile}`);
  return fx.controller.metric('leasehold_objects_dropped_total', { cluster: `peer:${fx.ns}/${queue}`, reason });
};

describe('a peer API server that sends bad input', () => {
  it('drops every bad object and answer, counts it, and the controller keeps serving: a Lease goes Ready and is released meanwhile', async () => {
    const t0 = Date.now();
    // The peers misbehave from the start: the Lease is made while they do.
    await waitFor('malformed peer Jobs dropped from the list and the watch', async () => served.malformedLists > 1 && (await dropped('malformed', 'invalid_object')) >= 2 * MALFORMED.length, 60_000, 500);
    const offer = await fx.offer('box', { ...sshdCommands(), pricePerHour: 0, idleTimeout: '10m', maxLifetime: '1h' });
    await fx.lease('during', { where: 'cpus>=1', offer });
    const st = await fx.waitPhase('during', 'Ready', 60_000);
    expect(fx.sshdFor(st.leaseID)).not.toBe('');

    // Each kind of bad input reached the controller and was refused by the limit it meets.
    await waitFor('an endless watch line cut at the limit', async () => (await dropped('endless-line', 'watch_line_too_large')) >= 1, 60_000, 500);
    await waitFor('a huge list refused at the limit', async () => (await dropped('huge-list', 'list_body_too_large')) >= 1, 60_000, 500);
    await waitFor('a never-ending continue refused at the page limit', async () => (await dropped('endless-pages', 'too_many_pages')) >= 1, 60_000, 500);

    const del = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'during', '--timeout=60s']);
    expect(del.code).toBe(0);
    expect(fx.sshdFor(st.leaseID)).toBe('');

    // The limits held: each stream was cut near its limit, not read for as long as the peer kept sending.
    const attempts = await fx.controller.metric('leasehold_objects_dropped_total', { cluster: `peer:${fx.ns}/huge-list` });
    expect(served.hugeListBytes).toBeLessThan((attempts + 1) * 72 * 1024 * 1024);
    expect(served.pages).toBeGreaterThanOrEqual(1000);
    // PeerFleets carry the lending finalizer: the controller takes it off while their peers still misbehave.
    const gone = await fx.kubectl(['-n', fx.ns, 'delete', 'peerfleets.leasehold.dev', '--all', '--timeout=60s']);
    expect(gone.code).toBe(0);

    expect((await fetch(fx.controller.metricsURL.replace('/metrics', '/healthz'))).status).toBe(200);
    expect(fx.controller.child.exitCode).toBeNull();
    expect(fx.controller.child.signalCode).toBeNull();
    const log = readFileSync(fx.controller.logFile, 'utf8');
    expect(log).toMatch(/dropped an object that failed the schema check/);
    expect(log).not.toContain(PEER_TOKEN);
    expect(log).not.toMatch(/unhandled promise rejection|Uncaught|TypeError: Cannot use 'in' operator/);
    for (const line of log.split('\n').filter((l) => l.includes('schema check'))) expect(line.length).toBeLessThan(2048);
    process.stdout.write(`bad peer input refused and a Lease served meanwhile in ${Date.now() - t0} ms; huge-list bytes sent ${served.hugeListBytes}, pages ${served.pages}\n`);
  });
});
