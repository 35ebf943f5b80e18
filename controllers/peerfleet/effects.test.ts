import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1Lease, V1Node } from '@kubernetes/client-node';
import type { PeerFleet } from '../../src/api/index.js';
import { FakePeerQueue } from '../../src/providers/peerqueue/fake.js';
import { PeerQueueError } from '../../src/providers/peerqueue/errors.js';
import { LendingEffects, type EffectContext, type LendingApis } from './effects.js';

const fleet = { metadata: { name: 'gpu', namespace: 'lend', uid: '00000000-0000-4000-8000-000000000099' }, spec: {} } as unknown as PeerFleet;
const node: V1Node = { metadata: { name: 'gpu-1' }, status: { allocatable: { 'nvidia.com/gpu': '2' } } };
const httpError = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

function harness(opts: { lease?: V1Lease; leaseConflict?: boolean; jobExists?: boolean } = {}) {
  const calls: string[] = [];
  const created: V1Job[] = [];
  const apis: LendingApis = {
    leaseNamespace: 'system',
    batch: {
      createNamespacedJob: async ({ body }) => {
        calls.push(`createJob:${body.metadata?.name}`);
        if (opts.jobExists) throw httpError(409);
        return body;
      },
      deleteNamespacedJob: async ({ name }) => {
        calls.push(`deleteJob:${name}`);
        throw httpError(404);
      },
    } as LendingApis['batch'],
    core: {
      createNamespacedServiceAccount: async ({ body }) => {
        calls.push(`createSA:${body.metadata?.name}:${body.automountServiceAccountToken}`);
        return body;
      },
    } as LendingApis['core'],
    coordination: {
      createNamespacedLease: async ({ body }) => {
        calls.push(`createLease:${body.metadata?.name}:${body.spec?.holderIdentity}`);
        if (opts.leaseConflict) throw httpError(409);
        return body;
      },
      replaceNamespacedLease: async ({ body }) => {
        calls.push(`replaceLease:${body.metadata?.resourceVersion}:${body.spec?.holderIdentity}`);
        if (opts.leaseConflict) throw httpError(409);
        return body;
      },
      deleteNamespacedLease: async ({ name, body }) => {
        calls.push(`deleteLease:${name}:${body?.preconditions?.resourceVersion}`);
        return {};
      },
    } as LendingApis['coordination'],
  };
  const queue = new FakePeerQueue();
  const ctx: EffectContext = {
    fleet,
    clusterID: 'c1',
    queue,
    nodes: new Map([['gpu-1', node]]),
    holders: new Map(opts.lease ? [['gpu-1', opts.lease]] : []),
    created: (m) => created.push(m),
    now: new Date('2026-12-03T10:00:00Z'),
  };
  return { ops: new LendingEffects(apis, { tolerate: [], allowedRegistries: [] }), ctx, calls, created, queue };
}

const safeJob = (name = 'train') => ({
  metadata: { name },
  spec: { activeDeadlineSeconds: 600, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '1' } } }] } } },
});

describe('LendingEffects', () => {
  it('claims in order: hold the node, claim on the peer, then the mirror with its token-less ServiceAccount', async () => {
    const h = harness();
    const job = h.queue.add(safeJob());
    const r = await h.ops.run({ kind: 'claim', node: 'gpu-1', job }, h.ctx);
    expect(r.outcome).toBe('claimed');
    expect(h.calls).toEqual(['createLease:leasehold-peer-gpu-1:lend/gpu', 'createSA:leasehold-peer-job:false', `createJob:lh-peer-${job.metadata!.uid}`]);
    expect(h.queue.peek('train')!.metadata!.annotations!['leasehold.dev/claimed-by']).toBe('c1/lend.gpu/gpu-1');
    expect(h.created).toHaveLength(1);
  });

  it('a lost race on the peer is a conflict and starts no mirror', async () => {
    const h = harness();
    const job = h.queue.add(safeJob());
    await h.queue.claim('train', job.metadata!.resourceVersion!, 'other/x/n');
    const r = await h.ops.run({ kind: 'claim', node: 'gpu-1', job }, h.ctx);
    expect(r.outcome).toBe('conflict');
    expect(h.calls.some((c) => c.startsWith('createJob'))).toBe(false);
  });

  it('another PeerFleet took the node first: no claim on the peer', async () => {
    const h = harness({ leaseConflict: true });
    const job = h.queue.add(safeJob());
    expect((await h.ops.run({ kind: 'claim', node: 'gpu-1', job }, h.ctx)).outcome).toBe('conflict');
    expect(h.queue.calls.filter((c) => c.op === 'claim')).toHaveLength(0);
  });

  it('renews a holder Lease it has with its resourceVersion', async () => {
    const lease: V1Lease = { metadata: { name: 'leasehold-peer-gpu-1', resourceVersion: '41' }, spec: { holderIdentity: 'lend/gpu' } };
    const h = harness({ lease });
    const job = h.queue.add(safeJob());
    await h.ops.run({ kind: 'claim', node: 'gpu-1', job }, h.ctx);
    expect(h.calls[0]).toBe('replaceLease:41:lend/gpu');
  });

  it.each<[string, V1Lease['spec'], boolean]>([
    ['ours, renewed 30 s ago (more than half its term left): kept as it is', { holderIdentity: 'lend/gpu', renewTime: new Date('2026-12-03T09:59:30Z') as never, leaseDurationSeconds: 120 }, false],
    ['ours, renewed 61 s ago (under half its term left): renewed', { holderIdentity: 'lend/gpu', renewTime: new Date('2026-12-03T09:58:59Z') as never, leaseDurationSeconds: 120 }, true],
    ['ours, renewed in the future (a clock moved back): kept', { holderIdentity: 'lend/gpu', renewTime: new Date('2026-12-03T10:00:30Z') as never, leaseDurationSeconds: 120 }, false],
    ['another PeerFleet\'s, expired: taken with its resourceVersion', { holderIdentity: 'other/x', renewTime: new Date('2026-12-03T09:50:00Z') as never, leaseDurationSeconds: 120 }, true],
  ])('a session\'s next claim and the holder Lease %s', async (_name, spec, written) => {
    const h = harness({ lease: { metadata: { name: 'leasehold-peer-gpu-1', resourceVersion: '41' }, spec } });
    const job = h.queue.add(safeJob());
    expect((await h.ops.run({ kind: 'claim', node: 'gpu-1', job }, h.ctx)).outcome).toBe('claimed');
    expect(h.calls.some((c) => c.startsWith('replaceLease:41:lend/gpu'))).toBe(written);
  });

  it('refuses an unsafe Job on the peer with the reason, and never holds the node or claims', async () => {
    const h = harness();
    const job = h.queue.add({ ...safeJob(), spec: { template: { spec: { restartPolicy: 'Never', hostNetwork: true, containers: [{ name: 'c', image: 'i' }] } } } });
    const r = await h.ops.run({ kind: 'claim', node: 'gpu-1', job }, h.ctx);
    expect(r.outcome).toBe('refused');
    expect(r.note).toMatchObject({ type: 'Warning', reason: 'Refused' });
    expect(h.queue.peek('train')!.metadata!.annotations!['leasehold.dev/refused']).toMatch(/hostNetwork/);
    expect(h.calls).toEqual([]);
  });

  it('starting a mirror that exists already is the same mirror (idempotent by name)', async () => {
    const h = harness({ jobExists: true });
    const job = h.queue.add(safeJob());
    expect((await h.ops.run({ kind: 'start', node: 'gpu-1', job }, h.ctx)).outcome).toBe('started');
    expect(h.created).toHaveLength(1);
  });

  it('releases with the claim the Job carries; a peer error is reported, not thrown', async () => {
    const h = harness();
    const job = h.queue.add(safeJob());
    const claimed = await h.queue.claim('train', job.metadata!.resourceVersion!, 'c1/lend.gpu/gpu-1');
    const ours = claimed.kind === 'claimed' ? claimed.job : job;
    expect((await h.ops.run({ kind: 'release', job: ours, message: 'm' }, h.ctx)).outcome).toBe('released');
    expect(h.queue.peek('train')!.metadata!.annotations?.['leasehold.dev/claimed-by']).toBeUndefined();
    h.queue.failNext('writeStatus', new PeerQueueError('Unreachable', 'down', 'infra_down'));
    const r = await h.ops.run({ kind: 'writeBack', job: ours, write: { status: {}, annotations: {} } }, h.ctx);
    expect(r).toMatchObject({ outcome: 'error', error: expect.stringMatching(/down/) });
  });

  it('frees only a holder Lease this PeerFleet holds, with its resourceVersion; a finished mirror that is gone is deleted', async () => {
    const mine = harness({ lease: { metadata: { name: 'leasehold-peer-gpu-1', resourceVersion: '9' }, spec: { holderIdentity: 'lend/gpu' } } });
    await mine.ops.run({ kind: 'freeNode', node: 'gpu-1' }, mine.ctx);
    expect(mine.calls).toEqual(['deleteLease:leasehold-peer-gpu-1:9']);
    const theirs = harness({ lease: { metadata: { name: 'leasehold-peer-gpu-1', resourceVersion: '9' }, spec: { holderIdentity: 'other/x' } } });
    await theirs.ops.run({ kind: 'freeNode', node: 'gpu-1' }, theirs.ctx);
    expect(theirs.calls).toEqual([]);
    expect((await mine.ops.run({ kind: 'deleteMirror', mirror: { metadata: { name: 'm', namespace: 'lend' } } }, mine.ctx)).outcome).toBe('deleted');
  });
});
