// The PeerQueue over a real peer API server, with a token whose Role allows
// only get/list/watch/patch on jobs and jobs/status in the queue namespace:
// claims race on the resourceVersion, and a status written back is one the
// peer's own kubectl wait accepts.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ControlPlane } from './cluster/controlplane.js';
import { createPeerCredential, type PeerCredential } from './cluster/peer.js';
import { Metrics } from '../src/kube/metrics.js';
import { KubePeerQueue } from '../src/providers/peerqueue/kube.js';
import { CLAIMED_BY_ANNOTATION, HOST_ANNOTATION, PEER_LENDING_MANAGER, REFUSED_ANNOTATION } from '../src/providers/peerqueue/types.js';

let peer: ControlPlane;
let cred: PeerCredential;
let queue: KubePeerQueue;

async function must(args: string[], input?: string): Promise<string> {
  const r = await peer.kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

async function peerJob(name: string): Promise<void> {
  await must(['create', '-f', '-'], JSON.stringify({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: 'queue', labels: { 'leasehold.dev/lendable': 'true' } },
    spec: {
      managedBy: PEER_LENDING_MANAGER,
      backoffLimit: 0,
      template: { spec: { restartPolicy: 'Never', containers: [{ name: 'work', image: 'registry.invalid/work:1' }] } },
    },
  }));
}

const metrics = new Metrics();
const patches = async () => ((await metrics.kubeRequests.get()).values.find((v) => v.labels.verb === 'PATCH')?.value ?? 0);

beforeAll(async () => {
  peer = await ControlPlane.start({ name: 'peer' });
  cred = await createPeerCredential(peer, { namespace: 'queue' });
  queue = new KubePeerQueue({
    name: 'peer',
    server: peer.info.server,
    token: cred.token,
    caPEM: await readFile(join(peer.info.dir, 'pki', 'ca.crt'), 'utf8'),
    namespace: 'queue',
    metrics,
  });
  await peerJob('a');
  await peerJob('b');
}, 180_000);

afterAll(async () => {
  await peer?.stop();
});

describe('KubePeerQueue on a real peer', () => {
  it('of two claims at the same resourceVersion exactly one wins; the claimed Job leaves the queue', async () => {
    const job = (await queue.listQueued()).find((j) => j.metadata?.name === 'a')!;
    const rv = job.metadata!.resourceVersion!;
    const results = await Promise.all([queue.claim('a', rv, 'ours/fleet/node-1'), queue.claim('a', rv, 'theirs/fleet/node-9')]);
    expect(results.map((r) => r.kind).sort()).toEqual(['claimed', 'conflict']);
    const won = results.find((r) => r.kind === 'claimed')!;
    const stored = await queue.get('a');
    expect(stored.metadata?.annotations?.[CLAIMED_BY_ANNOTATION]).toBe(won.kind === 'claimed' ? won.job.metadata?.annotations?.[CLAIMED_BY_ANNOTATION] : '');
    expect((await queue.listQueued()).map((j) => j.metadata?.name)).toEqual(['b']);
  });

  it('lists our claims by prefix, and releases only our own claim at the current resourceVersion', async () => {
    await queue.release('a', '1', 'nobody/x/y').then((r) => expect(r.kind).toBe('conflict'));
    let job = await queue.get('a');
    const holder = job.metadata!.annotations![CLAIMED_BY_ANNOTATION]!;
    const prefix = `${holder.split('/')[0]}/`;
    expect((await queue.listClaimed(prefix)).map((j) => j.metadata?.name)).toEqual(['a']);
    expect((await queue.release('a', String(Number(job.metadata!.resourceVersion) - 1), holder)).kind).toBe('conflict');
    job = await queue.get('a');
    const released = await queue.release('a', job.metadata!.resourceVersion!, holder);
    expect(released.kind).toBe('claimed');
    expect((await queue.get('a')).metadata?.annotations?.[CLAIMED_BY_ANNOTATION]).toBeUndefined();
    expect((await queue.listQueued()).map((j) => j.metadata?.name).sort()).toEqual(['a', 'b']);
  });

  it('a refused Job carries the reason and is never queued again', async () => {
    const b = await queue.get('b');
    expect((await queue.refuse('b', b.metadata!.resourceVersion!, 'hostPath volume')).kind).toBe('claimed');
    expect((await queue.get('b')).metadata?.annotations?.[REFUSED_ANNOTATION]).toBe('hostPath volume');
    expect((await queue.listQueued()).map((j) => j.metadata?.name)).toEqual(['a']);
  });

  it('writes status back so that the peer sees its Job run and complete', async () => {
    const start = new Date(Math.floor(Date.now() / 1000) * 1000);
    // The status and the annotations that describe it go in one PATCH of the status subresource.
    let before = await patches();
    const running = await queue.writeStatus('a', { status: { startTime: start, active: 1, ready: 1 }, annotations: { [HOST_ANNOTATION]: 'ours/node-1' } });
    expect((await patches()) - before).toBe(1);
    expect(running.status).toMatchObject({ active: 1, ready: 1 });
    expect(running.metadata?.annotations?.[HOST_ANNOTATION]).toBe('ours/node-1');
    expect((await queue.get('a')).metadata?.annotations?.[HOST_ANNOTATION]).toBe('ours/node-1');
    await queue.writeStatus('a', { status: { startTime: start, active: 1, ready: 0 }, annotations: { [HOST_ANNOTATION]: 'ours/node-1' } });
    const end = new Date(start.getTime() + 5000);
    before = await patches();
    await queue.writeStatus('a', {
      status: {
        startTime: start,
        completionTime: end,
        active: 0,
        ready: 0,
        succeeded: 1,
        conditions: [
          { type: 'SuccessCriteriaMet', status: 'True', lastTransitionTime: end, lastProbeTime: end },
          { type: 'Complete', status: 'True', lastTransitionTime: end, lastProbeTime: end },
        ],
      },
      annotations: { 'leasehold.dev/exit-code': '0' },
    });
    expect((await patches()) - before).toBe(1);
    expect((await queue.get('a')).metadata?.annotations).toMatchObject({ [HOST_ANNOTATION]: 'ours/node-1', 'leasehold.dev/exit-code': '0' });
    await must(['wait', '-n', 'queue', '--for=condition=complete', '--timeout=30s', 'job/a']);
    expect((await queue.listQueued()).map((j) => j.metadata?.name)).toEqual([]);
  });

  it('a status the API server refuses is Invalid; a Job that does not exist is NotFound', async () => {
    await expect(queue.writeStatus('a', { status: { startTime: new Date(), succeeded: 1 }, annotations: {} })).rejects.toMatchObject({ kind: 'Invalid' });
    await expect(queue.get('nope')).rejects.toMatchObject({ kind: 'NotFound' });
  });
});
