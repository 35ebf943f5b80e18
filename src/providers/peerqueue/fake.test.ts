import { describe, expect, it } from '@jest/globals';
import { PeerQueueError } from './errors.js';
import { FakePeerQueue } from './fake.js';
import { CLAIMED_BY_ANNOTATION, claimant, parseClaimant, REFUSED_ANNOTATION } from './types.js';

const A = claimant('ours', 'peer', 'gpu-1');
const B = claimant('theirs', 'peer', 'gpu-9');
const START = new Date('2026-12-03T09:00:00Z');
const END = new Date('2026-12-03T09:10:00Z');

describe('FakePeerQueue', () => {
  it('two lenders race for one Job: exactly one claim wins', async () => {
    const queue = new FakePeerQueue();
    const job = queue.add({ metadata: { name: 'train' } });
    const rv = job.metadata!.resourceVersion!;
    const results = await Promise.all([queue.claim('train', rv, A), queue.claim('train', rv, B)]);
    expect(results.map((r) => r.kind).sort()).toEqual(['claimed', 'conflict']);
    const winner = results.findIndex((r) => r.kind === 'claimed') === 0 ? A : B;
    expect(queue.peek('train')!.metadata!.annotations![CLAIMED_BY_ANNOTATION]).toBe(winner);
    expect(await queue.listQueued()).toEqual([]);
  });

  it('a claim at the current resourceVersion of a Job someone holds is still a conflict', async () => {
    const queue = new FakePeerQueue();
    const job = queue.add({ metadata: { name: 'train' } });
    const claimed = await queue.claim('train', job.metadata!.resourceVersion!, A);
    if (claimed.kind !== 'claimed') throw new Error('expected a claim');
    expect(await queue.claim('train', claimed.job.metadata!.resourceVersion!, B)).toMatchObject({ kind: 'conflict', message: expect.stringContaining(A) });
  });

  it('releases only its own claim, with the resourceVersion, and the Job is queued again', async () => {
    const queue = new FakePeerQueue();
    const job = queue.add({ metadata: { name: 'train' } });
    const claimed = await queue.claim('train', job.metadata!.resourceVersion!, A);
    if (claimed.kind !== 'claimed') throw new Error('expected a claim');
    const rv = claimed.job.metadata!.resourceVersion!;
    expect(await queue.release('train', rv, B)).toMatchObject({ kind: 'conflict' });
    expect(await queue.release('train', '1', A)).toMatchObject({ kind: 'conflict' });
    expect(await queue.release('train', rv, A)).toMatchObject({ kind: 'claimed' });
    expect((await queue.listQueued()).map((j) => j.metadata!.name)).toEqual(['train']);
  });

  it('a refused Job is never queued again', async () => {
    const queue = new FakePeerQueue();
    const job = queue.add({ metadata: { name: 'unsafe' } });
    await queue.refuse('unsafe', job.metadata!.resourceVersion!, 'hostPath volume');
    expect(queue.peek('unsafe')!.metadata!.annotations![REFUSED_ANNOTATION]).toBe('hostPath volume');
    expect(await queue.listQueued()).toEqual([]);
  });

  it('lists only lendable Jobs that it manages and that have not finished', async () => {
    const queue = new FakePeerQueue();
    queue.add({ metadata: { name: 'queued' } });
    queue.add({ metadata: { name: 'not-lendable', labels: { 'leasehold.dev/lendable': 'false' } } });
    queue.add({ metadata: { name: 'home' }, spec: { managedBy: 'kubernetes.io/job-controller', template: {} } });
    queue.add({ metadata: { name: 'done' }, status: { conditions: [{ type: 'Complete', status: 'True' }] } });
    expect((await queue.listQueued()).map((j) => j.metadata!.name)).toEqual(['queued']);
  });

  it('lists the Jobs a claimant prefix holds', async () => {
    const queue = new FakePeerQueue();
    for (const [name, by] of [['a', A], ['b', B]] as const) {
      const job = queue.add({ metadata: { name } });
      await queue.claim(name, job.metadata!.resourceVersion!, by);
    }
    expect((await queue.listClaimed('ours/')).map((j) => j.metadata!.name)).toEqual(['a']);
  });

  it('writes status and annotations, and refuses a write the API server would refuse', async () => {
    const queue = new FakePeerQueue();
    queue.add({ metadata: { name: 'train' } });
    await expect(queue.writeStatus('train', { status: { startTime: START, completionTime: END }, annotations: {} })).rejects.toMatchObject({
      kind: 'Invalid',
      message: expect.stringContaining('cannot set completionTime when there is no Complete=True condition'),
    });
    const written = await queue.writeStatus('train', {
      status: { startTime: START, completionTime: END, succeeded: 1, conditions: [{ type: 'SuccessCriteriaMet', status: 'True' }, { type: 'Complete', status: 'True' }] },
      annotations: { 'leasehold.dev/exit-code': '0' },
    });
    expect(written.status?.succeeded).toBe(1);
    expect(written.metadata?.annotations?.['leasehold.dev/exit-code']).toBe('0');
  });

  it('fails the next calls with the error a test sets, then recovers', async () => {
    const queue = new FakePeerQueue();
    queue.failNext('listQueued', new PeerQueueError('Unreachable', 'connect ECONNREFUSED', 'infra_down'), 2);
    await expect(queue.listQueued()).rejects.toMatchObject({ kind: 'Unreachable', failureClass: 'infra_down' });
    await expect(queue.listQueued()).rejects.toMatchObject({ kind: 'Unreachable' });
    await expect(queue.listQueued()).resolves.toEqual([]);
    await expect(queue.get('absent')).rejects.toMatchObject({ kind: 'NotFound' });
    expect(queue.writes).toBe(0);
  });
});

describe('claimant', () => {
  it('round-trips through the annotation', () => {
    expect(parseClaimant(A)).toEqual({ clusterID: 'ours', peerFleet: 'peer', node: 'gpu-1' });
  });
  it.each([[''], ['a/b'], ['a//c'], ['a/b/c/d'], [undefined]])('%s is not a claimant', (v) => {
    expect(parseClaimant(v)).toBeUndefined();
  });
});
