import { describe, expect, it } from '@jest/globals';
import type { PeerFleet } from '../../src/api/index.js';
import { canonical } from '../../src/kube/canonical.js';
import { StatusWriter } from '../../src/kube/status.js';
import { PeerQueueError } from '../../src/providers/peerqueue/errors.js';
import { EffectRunner } from '../../src/kube/effects.js';
import type { LendEffect } from './policy/lending.js';
import type { PeerAccess } from './peerreading.js';
import { UNREACHABLE_RETRY_MS } from './pollschedule.js';
import { EFFECT_SLOT_RETRY_MS, LENDING_FINALIZER, PeerFleetReconciler, type PeerFleetEffect } from './reconciler.js';

const fleet = (spec: Partial<PeerFleet['spec']> = {}, status?: PeerFleet['status']): PeerFleet =>
  ({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'PeerFleet',
    metadata: { name: 'gpu', namespace: 'lend', generation: 4, resourceVersion: '7' },
    spec: {
      origin: 'https://peer.example:6443',
      namespace: 'queue',
      credentialSecretRef: { name: 'peer', key: 'token' },
      lendableNodes: { matchLabels: { pool: 'gpu' } },
      pricePerGPUHour: 2,
      idleWindow: '10m',
      pollInterval: '30s',
      maxSessionDuration: '0s',
      listed: true,
      ...spec,
    },
    ...(status ? { status } : {}),
  }) as PeerFleet;

function harness(obj: PeerFleet | undefined, opts: { secrets?: Record<string, Record<string, string>>; probe?: () => Promise<void>; forbidden?: string } = {}) {
  const writes: unknown[] = [];
  const events: { type: string; reason: string; message: string }[] = [];
  const accesses: PeerAccess[] = [];
  let current = obj;
  const writer = new StatusWriter({ patchStatus: async (_ref, _ns, _name, body) => void writes.push(body) });
  const reconciler = new PeerFleetReconciler({
    fleets: { get: () => current, list: () => (current ? [current] : []) },
    secrets: async (ns, name) => {
      if (ns === opts.forbidden) throw Object.assign(new Error('forbidden'), { code: 403 });
      return (opts.secrets ?? { 'lend/peer': { token: 'tok' } })[`${ns}/${name}`];
    },
    origins: { allowed: ['https://peer.example:6443'], allowLoopbackHTTP: false },
    peer: (access) => {
      accesses.push(access);
      return { probe: opts.probe ?? (async () => undefined) };
    },
    status: {
      // The real writer (it skips a status equal to the current one) over a client that records each patch.
      write: async (ref, o, status, options) => {
        await writer.write(ref, o, status, options);
        current = { ...(o as PeerFleet), status: status as PeerFleet['status'] };
        return current as never;
      },
    },
    events: { record: async (_o, type, reason, message) => void events.push({ type, reason, message }), recordSeries: async (_o, type, reason, message) => void events.push({ type, reason, message }) },
    now: () => new Date('2026-12-01T00:00:00Z'),
  });
  return { reconciler, writes, events, accesses, get current() { return current; } };
}

describe('PeerFleetReconciler', () => {
  it('probes with the Secret token and CA and writes Ready with observedGeneration, once', async () => {
    const h = harness(fleet({ caSecretRef: { name: 'ca', namespace: undefined, key: 'ca.crt' } }), { secrets: { 'lend/peer': { token: ' tok\n' }, 'lend/ca': { 'ca.crt': 'PEM' } } });
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 30_000 });
    expect(h.accesses[0]).toEqual({ fleetKey: 'lend/gpu', origin: 'https://peer.example:6443', namespace: 'queue', token: 'tok', caPEM: 'PEM' });
    expect(h.current!.status).toMatchObject({ observedGeneration: 4, verdict: { ready: true, code: 'Ready', reasons: [] } });
    expect(h.current!.status!.conditions![0]).toMatchObject({ type: 'Ready', status: 'True', reason: 'Ready', observedGeneration: 4 });
    expect(h.events).toEqual([expect.objectContaining({ type: 'Normal', reason: 'Ready' })]);
    await h.reconciler.reconcile('lend/gpu');
    expect(h.writes).toHaveLength(1);
    expect(h.writes[0]).toMatchObject({ metadata: { resourceVersion: '7' } });
    expect(h.events).toHaveLength(1);
  });

  it('stamps checkedAt when the verdict changes, and keeps it while the verdict stays', async () => {
    let down = true;
    const h = harness(fleet(), { probe: async () => { if (down) throw new PeerQueueError('Unauthorized', 'HTTP 401'); } });
    await h.reconciler.reconcile('lend/gpu');
    expect(h.current!.status!.verdict!.checkedAt).toBe('2026-12-01T00:00:00Z');
    const deps = (h.reconciler as unknown as { deps: { now: () => Date } }).deps;
    deps.now = () => new Date('2026-12-01T00:01:00Z');
    await h.reconciler.reconcile('lend/gpu');
    expect(h.current!.status!.verdict!.checkedAt).toBe('2026-12-01T00:00:00Z');
    down = false;
    await h.reconciler.reconcile('lend/gpu');
    expect(h.current!.status!.verdict).toMatchObject({ code: 'Ready', checkedAt: '2026-12-01T00:01:00Z' });
  });

  it('reads the Secret in the fleet namespace even when a stored reference names another', async () => {
    const h = harness(fleet({ credentialSecretRef: { name: 'peer', namespace: 'vault', key: 'token' } }), {
      secrets: { 'lend/peer': { token: 'own' }, 'vault/peer': { token: 'theirs' } },
    });
    await h.reconciler.reconcile('lend/gpu');
    expect(h.accesses).toHaveLength(1);
    expect(h.accesses[0]).toMatchObject({ token: 'own' });
  });

  it.each([
    [{}, 'SecretAbsent'],
    [{ 'lend/peer': { other: 'x' } }, 'KeyAbsent'],
  ])('a credential Secret %j is %s, and the peer is not asked', async (secrets, code) => {
    const h = harness(fleet(), { secrets });
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 30_000 });
    expect(h.accesses).toHaveLength(0);
    expect(h.current!.status!.verdict!.code).toBe(code);
  });

  it('a missing CA Secret is SecretAbsent naming spec.caSecretRef', async () => {
    const h = harness(fleet({ caSecretRef: { name: 'ca', namespace: undefined, key: 'ca.crt' } }));
    await h.reconciler.reconcile('lend/gpu');
    expect(h.current!.status!.verdict!.code).toBe('SecretAbsent');
    expect(h.current!.status!.verdict!.reasons[0]).toMatch(/spec.caSecretRef/);
  });

  it('a refused token is PeerRefused, polled at the interval', async () => {
    const h = harness(fleet(), { probe: async () => { throw new PeerQueueError('Unauthorized', 'HTTP 401'); } });
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 30_000 });
    expect(h.current!.status!.verdict).toMatchObject({ code: 'PeerRefused' });
  });

  it('a peer that is down is retried sooner, backing off to the poll interval, and the streak ends when it answers', async () => {
    let down = true;
    const h = harness(fleet({ pollInterval: '5s' }), {
      probe: async () => {
        if (down) throw new PeerQueueError('Unreachable', 'connect ECONNREFUSED', 'infra_down');
      },
    });
    const waits = [];
    for (let i = 0; i < 5; i++) waits.push((await h.reconciler.reconcile('lend/gpu'))!.requeueAfter);
    expect(waits).toEqual([UNREACHABLE_RETRY_MS, 2000, 4000, 5000, 5000]);
    expect(h.current!.status!.verdict).toMatchObject({ code: 'PeerUnreachable', failureClass: 'infra_down' });
    expect(h.events.filter((e) => e.reason === 'PeerUnreachable')).toHaveLength(1);
    down = false;
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 5000 });
    expect(h.current!.status!.verdict).toEqual({ ready: true, code: 'Ready', reasons: [], checkedAt: '2026-12-01T00:00:00Z' });
    down = true;
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: UNREACHABLE_RETRY_MS });
  });

  it('a config failure waits the whole interval: retrying sooner would not fix the spec', async () => {
    const h = harness(fleet(), { probe: async () => { throw new PeerQueueError('Unreachable', 'unable to verify', 'config'); } });
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 30_000 });
  });

  it('a conflict on the status write waits for the informer instead of failing', async () => {
    const h = harness(fleet());
    (h.reconciler as unknown as { deps: { status: { write: () => Promise<never> } } }).deps.status.write = async () => {
      throw Object.assign(new Error('conflict'), { code: 409 });
    };
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 30_000 });
    expect(h.events).toHaveLength(0);
  });

  it.each([
    ['an origin the admin did not list', 'https://evil.example:6443', /spec.origin https:\/\/evil.example:6443 is not an endpoint the admin allowed.*peerFleet.allowedOrigins/],
    ['plain http to loopback without the test flag', 'http://127.0.0.1:8080', /is not https/],
    ['a listed host on another port', 'https://peer.example:7443', /not an endpoint the admin allowed/],
  ])('EndpointNotAllowed for %s: no Secret is read and the peer is never asked', async (_what, origin, why) => {
    const reads: string[] = [];
    const h = harness(fleet({ origin }));
    const deps = (h.reconciler as unknown as { deps: { secrets: (ns: string, name: string) => Promise<unknown> } }).deps;
    const inner = deps.secrets;
    deps.secrets = async (ns, name) => {
      reads.push(`${ns}/${name}`);
      return inner(ns, name);
    };
    await h.reconciler.reconcile('lend/gpu');
    expect(reads).toEqual([]);
    expect(h.accesses).toEqual([]);
    expect(h.current!.status!.verdict).toMatchObject({ ready: false, code: 'EndpointNotAllowed', failureClass: 'config' });
    expect(h.current!.status!.verdict!.reasons.join('')).toMatch(why);
    expect(h.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'EndpointNotAllowed' })]);
  });

  it('never polls more often than every 5s, whatever a stored pollInterval says', async () => {
    const h = harness(fleet({ pollInterval: '0s' }));
    expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 5_000 });
  });

  it('a PeerFleet past the cap of its namespace reads no Secret, asks no peer, is forgotten and says TooManyPeerFleets', async () => {
    let secretReads = 0;
    const h = harness(fleet());
    const deps = (h.reconciler as unknown as { deps: Record<string, unknown> }).deps;
    const forgotten: string[] = [];
    const secrets = deps.secrets as (...a: unknown[]) => Promise<unknown>;
    deps.secrets = async (...a: unknown[]) => (secretReads++, secrets(...a));
    deps.forget = (key: string) => forgotten.push(key);
    deps.overCap = () => 'namespace lend has 5 PeerFleets and at most 4 are served';
    await h.reconciler.reconcile('lend/gpu');
    expect(h.current!.status!.verdict).toMatchObject({ ready: false, code: 'TooManyPeerFleets', failureClass: 'config', reasons: ['namespace lend has 5 PeerFleets and at most 4 are served'] });
    expect(secretReads).toBe(0);
    expect(h.accesses).toHaveLength(0);
    expect(forgotten).toEqual(['lend/gpu']);
  });

  it('forgets a fleet that is gone', async () => {
    const forgotten: string[] = [];
    const r = new PeerFleetReconciler({
      fleets: { get: () => undefined, list: () => [] },
      secrets: async () => undefined,
      origins: { allowed: [], allowLoopbackHTTP: false },
      peer: () => ({ probe: async () => undefined }),
      forget: (key) => forgotten.push(key),
      status: { write: async () => { throw new Error('no write'); } },
      events: { record: async () => undefined, recordSeries: async () => undefined },
    });
    expect(await r.reconcile('lend/gone')).toBeUndefined();
    expect(forgotten).toEqual(['lend/gone']);
  });

  describe('with lending', () => {
    const node = { metadata: { name: 'gpu-1', labels: { pool: 'gpu' } }, status: { allocatable: { 'nvidia.com/gpu': '2', pods: '10', cpu: '8', memory: '8Gi' } } };
    const queued = { metadata: { name: 'train', uid: '00000000-0000-4000-8000-000000000001', resourceVersion: '3', creationTimestamp: new Date('2026-12-01T00:00:00Z') }, spec: { template: { spec: { containers: [{ name: 'c', image: 'i' }] } } } };

    function lendingHarness(obj: PeerFleet, opts: { conflict?: boolean; podSecurity?: string | null; egress?: string; cutOff?: () => string | undefined } = {}) {
      const order: string[] = [];
      const h = harness(obj);
      const deps = (h.reconciler as unknown as { deps: Record<string, unknown> }).deps;
      const write = deps.status as { write: (...a: unknown[]) => Promise<unknown> };
      const inner = write.write;
      write.write = async (...a: unknown[]) => {
        order.push('status');
        if (opts.conflict) throw Object.assign(new Error('conflict'), { code: 409 });
        return inner(...a);
      };
      deps.lending = {
        world: () => ({ clusterID: 'c1', nodes: [node], pods: [], mirrors: [], holders: new Map(), shared: new Set() }),
        podSecurity: () => ('podSecurity' in opts ? opts.podSecurity : 'restricted'),
        egress: () => opts.egress,
        queue: () => ({}),
        peerJobs: () => [queued],
        peerCutOff: () => opts.cutOff?.(),
        operations: { run: async (effect: { kind: string }) => (order.push(effect.kind), { effect, outcome: 'claimed' }) },
        finalizers: {
          add: async (f: PeerFleet) => (order.push('finalizer+'), { ...f, metadata: { ...f.metadata, finalizers: ['leasehold.dev/peer-lending'] } }),
          remove: async () => void order.push('finalizer-'),
        },
      };
      return Object.assign(h, { order });
    }
    const available = { hosts: [{ node: 'gpu-1', state: 'Available' as const, since: '2026-11-30T00:00:00Z', idleSince: '2026-11-30T00:00:00Z' }] };

    it('adds its finalizer, writes the session, then claims, and runs the next pass at once', async () => {
      const h = lendingHarness(fleet({}, available));
      expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 0 });
      expect(h.order).toEqual(['finalizer+', 'status', 'claim']);
      expect(h.current!.status!.hosts![0]).toMatchObject({ state: 'Lending', session: { job: 'train' } });
      expect(h.events.map((e) => e.reason)).toContain('Claimed');
    });

    it('a peer cut off past its budget is PeerOverBudget: no claim, its running mirror is left to finish and nothing more is claimed; watched again, it lends again', async () => {
      let cut: string | undefined = 'the watch of peer Jobs held 40 objects in 33.0 MiB, past the budget of 32 MiB';
      const h = lendingHarness(fleet({}, available), { cutOff: () => cut });
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[] | undefined; world: () => Record<string, unknown> }; now: () => Date } }).deps;
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.verdict).toMatchObject({ ready: false, code: 'PeerOverBudget', reasons: [cut] });
      expect(h.current!.status!.conditions![0]).toMatchObject({ type: 'Ready', status: 'False', reason: 'PeerOverBudget' });
      expect(h.order).toEqual(['finalizer+', 'status']);
      expect(h.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'PeerOverBudget', message: cut }));
      // A session that was running when the peer was cut off: the cache is gone, the mirror runs on.
      const running = {
        metadata: { name: `lh-peer-${queued.metadata.uid}`, namespace: 'lend', labels: { 'leasehold.dev/peerfleet': 'gpu', 'leasehold.dev/node': 'gpu-1', 'leasehold.dev/peer-job-uid': queued.metadata.uid } },
        spec: queued.spec,
        status: { active: 1, startTime: new Date('2026-12-01T00:00:00Z') },
      };
      const lending = fleet({}, { hosts: [{ node: 'gpu-1', state: 'Lending', since: '2026-12-01T00:00:00Z', session: { job: 'train', startedAt: '2026-12-01T00:00:00Z', claims: [queued.metadata.uid] } }] } as PeerFleet['status']);
      const h2 = lendingHarness(lending, { cutOff: () => cut });
      const deps2 = (h2.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[] | undefined; world: () => Record<string, unknown> } } }).deps;
      const world = deps2.lending.world();
      deps2.lending.world = () => ({ ...world, mirrors: [running] });
      deps2.lending.peerJobs = () => undefined;
      await h2.reconciler.reconcile('lend/gpu');
      expect(h2.current!.status!.verdict!.code).toBe('PeerOverBudget');
      expect(h2.order.filter((o) => o !== 'finalizer+' && o !== 'status')).toEqual([]);
      // The session stands until its mirror ends; nothing more is claimed for the node.
      expect(h2.current!.status!.hosts![0]).toMatchObject({ state: 'Lending', session: { job: 'train' } });
      deps2.lending.world = () => ({ ...world, mirrors: [{ ...running, status: { succeeded: 1, startTime: new Date('2026-12-01T00:00:00Z'), completionTime: new Date('2026-12-01T00:00:00Z'), conditions: [{ type: 'Complete', status: 'True' }] } }] });
      await h2.reconciler.reconcile('lend/gpu');
      expect(h2.order).not.toContain('claim');
      // The budget's retry time came and the watch holds the queue again.
      cut = undefined;
      deps.now = () => new Date('2026-12-01T00:01:00Z');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.verdict!.code).toBe('Ready');
      expect(h.current!.status!.hosts![0]).toMatchObject({ state: 'Available' });
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toContain('claim');
    });

    it('holds a change of the lending status within a second of the last one for the batch, then writes it with its claims', async () => {
      const h = lendingHarness(fleet({}, available));
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[] }; now: () => Date } }).deps;
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toEqual(['finalizer+', 'status', 'claim']);
      const next = { ...queued, metadata: { ...queued.metadata, name: 'train-2', uid: '00000000-0000-4000-8000-000000000002' } };
      deps.lending.peerJobs = () => [next];
      const writes = h.writes.length;
      deps.now = () => new Date('2026-12-01T00:00:00.400Z');
      expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 600 });
      // A wake inside the batch is held too.
      deps.now = () => new Date('2026-12-01T00:00:00.700Z');
      expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 300 });
      expect(h.writes).toHaveLength(writes);
      expect(h.order).toEqual(['finalizer+', 'status', 'claim']);
      deps.now = () => new Date('2026-12-01T00:00:01Z');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toEqual(['finalizer+', 'status', 'claim', 'status', 'claim']);
      expect(h.current!.status!.hosts![0]!.session!.job).toBe('train-2');
    });

    it('writes a first claim, which starts the session, at once inside the batch', async () => {
      const h = lendingHarness(fleet({}, available));
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[] }; now: () => Date } }).deps;
      deps.lending.peerJobs = () => [];
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toEqual(['finalizer+', 'status']);
      // A Job comes 0.3 s after that write: the node's first claim is not held for the batch.
      deps.lending.peerJobs = () => [queued];
      deps.now = () => new Date('2026-12-01T00:00:00.300Z');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toEqual(['finalizer+', 'status', 'status', 'claim']);
      expect(h.current!.status!.hosts![0]).toMatchObject({ state: 'Lending', session: { job: 'train' } });
    });

    it('claims the Job its node set aside at once inside the batch, with no status write; a Job not set aside waits for the batch', async () => {
      const h = lendingHarness(fleet({}, available));
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[]; world: () => Record<string, unknown> }; now: () => Date } }).deps;
      const job = (n: number, extra: Record<string, unknown> = {}) => ({ ...queued, metadata: { ...queued.metadata, name: `train-${n}`, uid: `00000000-0000-4000-8000-00000000000${n}`, ...extra } });
      const oneGPU = { template: { spec: { containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '2' } } }] } } };
      const [first, second, third] = [1, 2, 3].map((n) => ({ ...job(n), spec: oneGPU }));
      deps.lending.peerJobs = () => [first, second];
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toEqual(['finalizer+', 'status', 'claim']);
      // The first pass claimed train-1 and set train-2 aside for when the node frees, in the same write.
      expect(h.current!.status!.hosts![0]!.session).toMatchObject({ job: 'train-1', claims: [first!.metadata.uid, second!.metadata.uid] });
      const writes = h.writes.length;
      // train-1 ran and finished on the node; train-2 is still queued; train-3 came.
      const mirror = (j: typeof first, done: boolean) => ({
        metadata: { name: `lh-peer-${j!.metadata.uid}`, namespace: 'lend', labels: { 'leasehold.dev/peerfleet': 'gpu', 'leasehold.dev/node': 'gpu-1', 'leasehold.dev/peer-job-uid': j!.metadata.uid } },
        spec: oneGPU,
        status: done ? { succeeded: 1, startTime: new Date('2026-12-01T00:00:00Z'), completionTime: new Date('2026-12-01T00:00:00Z'), conditions: [{ type: 'Complete', status: 'True' }] } : { active: 1 },
      });
      const world = deps.lending.world();
      deps.lending.world = () => ({ ...world, mirrors: [mirror(first, true)] });
      deps.lending.peerJobs = () => [{ ...first, metadata: { ...first!.metadata, annotations: { 'leasehold.dev/claimed-by': 'c1/lend.gpu/gpu-1' } } }, second, third];
      deps.now = () => new Date('2026-12-01T00:00:00.400Z');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order.filter((o) => o === 'claim' || o === 'status')).toEqual(['status', 'claim', 'claim']);
      expect(h.writes).toHaveLength(writes);
      expect(h.events.filter((e) => e.reason === 'Claimed')).toHaveLength(2);
      // Now the node runs train-2 and has set nothing aside: train-3 on a freed node is a new intent, held for the batch.
      deps.lending.world = () => ({ ...world, mirrors: [mirror(first, true), mirror(second, true)] });
      deps.lending.peerJobs = () => [...[first, second].map((j) => ({ ...j, metadata: { ...j!.metadata, annotations: { 'leasehold.dev/claimed-by': 'c1/lend.gpu/gpu-1' } } })), third];
      deps.now = () => new Date('2026-12-01T00:00:00.600Z');
      // Only the write-backs of the finished mirrors, which need no intent, run now; the held rest comes back when the batch ends.
      const ops = (deps as unknown as { lending: { operations: { run: (e: { kind: string }) => Promise<unknown> } } }).lending.operations;
      ops.run = async (effect) => (h.order.push(effect.kind), { effect, outcome: effect.kind === 'writeBack' ? 'written' : 'claimed' });
      expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 400 });
      expect(h.order.filter((o) => o === 'claim' || o === 'status')).toEqual(['status', 'claim', 'claim']);
      expect(h.order.slice(-2)).toEqual(['writeBack', 'writeBack']);
      deps.now = () => new Date('2026-12-01T00:00:01Z');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order.filter((o) => o === 'claim' || o === 'status')).toEqual(['status', 'claim', 'claim', 'status', 'claim']);
      expect(h.current!.status!.hosts![0]!.session).toMatchObject({ job: 'train-3' });
    });

    it('writes a drain at once, inside the batch of the last change', async () => {
      const h = lendingHarness(fleet({}, available));
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[]; world: () => Record<string, unknown> }; now: () => Date } }).deps;
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.hosts![0]).toMatchObject({ state: 'Lending' });
      // Our own Job comes to the node: it stops taking peer Jobs at once.
      const ours = { metadata: { name: 'ours', namespace: 'team' }, spec: { nodeName: 'gpu-1', containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '1' } } }] }, status: { phase: 'Running' } };
      const uid = queued.metadata.uid;
      const running = {
        metadata: { name: `lh-peer-${uid}`, namespace: 'lend', labels: { 'leasehold.dev/peerfleet': 'gpu', 'leasehold.dev/node': 'gpu-1', 'leasehold.dev/peer-job-uid': uid } },
        spec: { template: { spec: { containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '1' } } }] } } },
        status: { active: 1, startTime: new Date('2026-12-01T00:00:00Z') },
      };
      const world = deps.lending.world();
      deps.lending.world = () => ({ ...world, pods: [ours], mirrors: [running] });
      deps.lending.peerJobs = () => [{ ...queued, metadata: { ...queued.metadata, annotations: { 'leasehold.dev/claimed-by': 'c1/lend.gpu/gpu-1' } } }];
      deps.now = () => new Date('2026-12-01T00:00:00.300Z');
      expect(await h.reconciler.reconcile('lend/gpu')).not.toEqual({ requeueAfter: 700 });
      expect(h.current!.status!.hosts![0]).toMatchObject({ state: 'Draining' });
    });

    it('a quiet pass writes nothing, though the server hands the accounting back with its keys sorted and time moved on', async () => {
      const h = lendingHarness(fleet({}, { hosts: [{ node: 'gpu-1', state: 'Available', since: '2026-11-30T00:00:00Z', idleSince: '2026-11-30T00:00:00Z', reason: 'Available', message: 'node gpu-1 may lend: the peer queue has no Job to run' }] }));
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[] }; now: () => Date } }).deps;
      deps.lending.peerJobs = () => [];
      await h.reconciler.reconcile('lend/gpu');
      const written = h.writes.length;
      const sorted = JSON.parse(canonical(h.current!.status));
      Object.assign(h.current!, { status: sorted });
      deps.now = () => new Date('2026-12-01T00:05:00Z');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.writes).toHaveLength(written);
    });

    it('passes brought by our cluster between polls reuse the last reading of the Secrets and the peer', async () => {
      const h = lendingHarness(fleet({}, { hosts: [] }));
      const deps = (h.reconciler as unknown as { deps: { now: () => Date } }).deps;
      await h.reconciler.reconcile('lend/gpu');
      deps.now = () => new Date('2026-12-01T00:00:10Z');
      expect(await h.reconciler.reconcile('lend/gpu')).toEqual({ requeueAfter: 20_000 });
      expect(h.accesses).toHaveLength(1);
      deps.now = () => new Date('2026-12-01T00:00:30Z');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.accesses).toHaveLength(2);
    });

    it('a status write that conflicts runs no effect', async () => {
      const h = lendingHarness(fleet({}, available), { conflict: true });
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toEqual(['finalizer+', 'status']);
    });

    it('a namespace without the restricted Pod Security label lends nothing', async () => {
      const h = lendingHarness(fleet({}, available), { podSecurity: null });
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.verdict!.code).toBe('NamespaceNotRestricted');
      expect(h.order).not.toContain('claim');
    });

    it('records a claim forged in our name once while it stands, not at every pass, and never runs it', async () => {
      const forged = { ...queued, metadata: { ...queued.metadata, annotations: { 'leasehold.dev/claimed-by': 'c1/lend.gpu/gpu-1' } } };
      const h = lendingHarness(fleet({}, available));
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[] } } }).deps;
      deps.lending.peerJobs = () => [forged];
      await h.reconciler.reconcile('lend/gpu');
      await h.reconciler.reconcile('lend/gpu');
      expect(h.events.filter((e) => e.reason === 'ForgedClaim')).toHaveLength(1);
      expect(h.order.filter((o) => o === 'start' || o === 'claim')).toEqual([]);
    });

    it('writes a completed mirror into status.ledger, and raises LedgerMismatch once while the peer record stays gone', async () => {
      const uid = '00000000-0000-4000-8000-000000000007';
      const mirror = {
        metadata: { name: `lh-peer-${uid}`, namespace: 'lend', labels: { 'leasehold.dev/peerfleet': 'gpu', 'leasehold.dev/node': 'gpu-1', 'leasehold.dev/peer-job-uid': uid }, annotations: { 'leasehold.dev/peer-job': 'queue/paid' } },
        spec: { template: { spec: { containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '1' } } }] } } },
        status: { startTime: new Date('2026-11-30T10:00:00Z'), completionTime: new Date('2026-11-30T10:01:00Z'), conditions: [{ type: 'Complete', status: 'True' }] },
      };
      const h = lendingHarness(fleet({}, { hosts: [] }));
      const deps = (h.reconciler as unknown as { deps: { lending: { peerJobs: () => unknown[]; world: () => Record<string, unknown> } } }).deps;
      const world = deps.lending.world();
      deps.lending.world = () => ({ ...world, mirrors: [mirror] });
      deps.lending.peerJobs = () => [];
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.ledger!.entries).toEqual([{ uid, job: 'paid', node: 'gpu-1', gpus: 1, startedAt: '2026-11-30T10:00:00Z', completedAt: '2026-11-30T10:01:00Z' }]);
      deps.lending.world = () => world;
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.ledger!.entries).toHaveLength(1);
      expect(h.current!.status!.accounting).toMatchObject({ gpuSeconds: 0, ledger: { gpuSeconds: 60, jobs: 1 }, mismatched: 1 });
      expect(h.events.filter((e) => e.reason === 'LedgerMismatch')).toHaveLength(1);
    });

    it('a namespace not read yet lends nothing: the check fails closed', async () => {
      const h = lendingHarness(fleet({}, available), { podSecurity: undefined });
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.verdict).toMatchObject({ code: 'NamespaceNotRestricted', failureClass: 'infra_down' });
      expect(h.current!.status!.verdict!.reasons.join('')).toMatch(/have not been read yet/);
      expect(h.order).not.toContain('claim');
    });

    it('a namespace whose NetworkPolicies do not deny egress by default lends nothing', async () => {
      const h = lendingHarness(fleet({}, available), { egress: 'namespace lend has no NetworkPolicy that denies the egress of mirror Jobs by default' });
      await h.reconciler.reconcile('lend/gpu');
      expect(h.current!.status!.verdict).toMatchObject({ code: 'EgressNotDenied', ready: false, failureClass: 'config' });
      expect(h.order).not.toContain('claim');
    });

    it('a PeerFleet being deleted with nothing running lets its finalizer go', async () => {
      const deleting = fleet({}, { hosts: [] });
      deleting.metadata = { ...deleting.metadata, deletionTimestamp: new Date(), finalizers: ['leasehold.dev/peer-lending'] };
      const h = lendingHarness(deleting);
      await h.reconciler.reconcile('lend/gpu');
      expect(h.order).toEqual(['status', 'finalizer-']);
    });
  });

  describe('on the effect runner', () => {
    const node = { status: { allocatable: { 'nvidia.com/gpu': '2', pods: '10', cpu: '8', memory: '8Gi' } } };
    const queued = { metadata: { resourceVersion: '3', creationTimestamp: new Date('2026-12-01T00:00:00Z') }, spec: { template: { spec: { containers: [{ name: 'c', image: 'i' }] } } } };
    /** A call that waits until the test lets it go, or until the runner aborts it. */
    class Gates {
      private readonly open = new Map<string, () => void>();
      readonly started: string[] = [];
      readonly aborted: string[] = [];
      running = 0;
      most = 0;
      constructor(private readonly held: Set<string>) {}
      async pass(name: string, signal?: AbortSignal): Promise<'done' | 'aborted'> {
        this.started.push(name);
        this.most = Math.max(this.most, ++this.running);
        try {
          if (!this.held.has(name)) return 'done';
          return await new Promise((resolve) => {
            this.open.set(name, () => resolve('done'));
            signal?.addEventListener('abort', () => (this.aborted.push(name), resolve('aborted')));
          });
        } finally {
          this.running--;
        }
      }
      release(name: string): void {
        this.held.delete(name);
        this.open.get(name)?.();
        this.open.delete(name);
      }
      waiting(name: string): boolean {
        return this.open.has(name);
      }
    }

    /** PeerFleets named `names` in namespace lend, each with an idle node of its own and a Job in its peer queue; `held` names the calls that wait (`probe:a`, `claim:a`). */
    function world(names: string[], opts: { concurrency?: number; held?: string[]; outcome?: 'claimed' | 'conflict' } = {}) {
      const fleets = new Map<string, PeerFleet>();
      for (const n of names) {
        const f = fleet({}, { hosts: [{ node: `node-${n}`, state: 'Available', since: '2026-11-30T00:00:00Z', idleSince: '2026-11-30T00:00:00Z' }] });
        f.metadata = { ...f.metadata, name: n, uid: `uid-${n}`, finalizers: [LENDING_FINALIZER] };
        fleets.set(`lend/${n}`, f);
      }
      const gates = new Gates(new Set(opts.held ?? []));
      const runner = new EffectRunner<PeerFleetEffect>();
      const requeued: string[] = [];
      const writes: string[] = [];
      const events: string[] = [];
      const nameOf = (key: string) => key.split('/')[1]!;
      const reconciler = new PeerFleetReconciler({
        fleets: { get: (ns, n) => fleets.get(`${ns}/${n}`), list: () => [...fleets.values()] },
        secrets: async () => ({ token: 'tok' }),
        origins: { allowed: ['https://peer.example:6443'], allowLoopbackHTTP: false },
        peer: (access) => ({
          probe: async (signal) => {
            if ((await gates.pass(`probe:${nameOf(access.fleetKey)}`, signal)) === 'aborted') throw new PeerQueueError('Unreachable', 'aborted', 'infra_down');
          },
        }),
        status: {
          write: async (_ref, o, status) => {
            const f = { ...(o as PeerFleet), status: status as PeerFleet['status'] };
            writes.push(f.metadata!.name!);
            fleets.set(`lend/${f.metadata!.name}`, f);
            return f as never;
          },
        },
        events: { record: async (o, _type, reason) => void events.push(`${o.metadata?.name}:${reason}`), recordSeries: async (o, _type, reason) => void events.push(`${o.metadata?.name}:${reason}`) },
        now: () => new Date('2026-12-01T00:00:00Z'),
        lending: {
          world: (f) => ({ clusterID: 'c1', nodes: [{ ...node, metadata: { name: `node-${f.metadata!.name}`, labels: { pool: 'gpu' } } }], pods: [], mirrors: [], holders: new Map(), shared: new Set() }),
          podSecurity: () => 'restricted',
          egress: () => undefined,
          queue: () => ({}) as never,
          peerCutOff: () => undefined,
          peerJobs: (access) => [{ ...queued, metadata: { ...queued.metadata, name: `train-${nameOf(access.fleetKey)}`, uid: `00000000-0000-4000-8000-00000000000${names.indexOf(nameOf(access.fleetKey))}` } }],
          operations: {
            run: async (effect: LendEffect, ctx) => {
              const r = await gates.pass(`${effect.kind}:${ctx.fleet.metadata!.name}`, ctx.signal);
              return r === 'aborted' ? { effect, outcome: 'error', error: 'aborted' } : { effect, outcome: opts.outcome ?? 'claimed' };
            },
          },
          finalizers: { add: async (f: PeerFleet) => f, remove: async () => undefined },
        },
        effects: { runner, concurrency: opts.concurrency ?? 4, requeue: (key) => requeued.push(key) },
      });
      const get = (n: string) => fleets.get(`lend/${n}`)!;
      return { reconciler, runner, gates, requeued, writes, events, get, pass: (n: string) => reconciler.reconcile(`lend/${n}`) };
    }
    type World = ReturnType<typeof world>;
    /** Lets the effects' own awaits (Secret reads before the probe) run. */
    const tick = () => new Promise((r) => setImmediate(r));
    /** The probe's pass and the pass that takes its reading: what the work queue runs when the probe ends. */
    async function probed(w: World, n: string) {
      expect(await w.pass(n)).toBeUndefined();
      await w.runner.idle();
      return w.pass(n);
    }

    it('a pass starts the claim and returns while it runs; its end enqueues the PeerFleet and the next pass takes its result', async () => {
      const w = world(['a'], { held: ['claim:a'] });
      expect(await w.pass('a')).toBeUndefined();
      await tick();
      expect(w.gates.started).toEqual(['probe:a']);
      await w.runner.idle();
      expect(w.requeued).toEqual(['lend/a']);
      // The pass returns with the claim still running, the session written before it.
      expect(await w.pass('a')).toBeUndefined();
      expect(w.gates.waiting('claim:a')).toBe(true);
      expect(w.runner.get('uid-a')).toEqual({ state: 'running', id: 'lend/lend/a' });
      expect(w.get('a').status!.hosts![0]).toMatchObject({ state: 'Lending', session: { job: 'train-a', claims: ['00000000-0000-4000-8000-000000000000'] } });
      // While it runs, a pass brought by anything else decides and writes nothing.
      const written = w.writes.length;
      expect(await w.pass('a')).toBeUndefined();
      expect(w.writes).toHaveLength(written);
      expect(w.gates.started).toEqual(['probe:a', 'claim:a']);
      w.gates.release('claim:a');
      await w.runner.idle();
      expect(w.requeued).toEqual(['lend/a', 'lend/a']);
      // The claim's result: the next pass at once, as after a claim on the worker.
      expect(await w.pass('a')).toEqual({ requeueAfter: 0 });
      expect(w.runner.get('uid-a')).toBeUndefined();
      expect(w.events).toContain('a:Claimed');
    });

    it.each<[string, boolean, number]>([
      ['nothing changed while its effects ran: the next pass at the poll', false, 30_000],
      ['a change came while its effects ran (a pass that decided nothing): the next pass at once', true, 0],
    ])('after effects that claimed nothing, %s', async (_name, changed, wait) => {
      const w = world(['a'], { held: ['claim:a'], outcome: 'conflict' });
      await probed(w, 'a');
      expect(w.gates.waiting('claim:a')).toBe(true);
      if (changed) expect(await w.pass('a')).toBeUndefined();
      w.gates.release('claim:a');
      await w.runner.idle();
      expect(await w.pass('a')).toEqual({ requeueAfter: wait });
    });

    it('a slow peer of one PeerFleet holds no pass of another: its probe runs while the other lends', async () => {
      const w = world(['slow', 'quick'], { held: ['probe:slow'] });
      expect(await w.pass('slow')).toBeUndefined();
      await tick();
      expect(w.gates.waiting('probe:slow')).toBe(true);
      // The quick PeerFleet's probe ends; the slow one's still runs.
      expect(await w.pass('quick')).toBeUndefined();
      await tick();
      expect(await w.pass('quick')).toBeUndefined();
      await tick();
      expect(w.gates.started).toEqual(['probe:slow', 'probe:quick', 'claim:quick']);
      expect(w.runner.get('uid-quick')).toMatchObject({ state: 'done', result: { kind: 'lend', results: [{ outcome: 'claimed' }] } });
      expect(w.gates.waiting('probe:slow')).toBe(true);
      w.gates.release('probe:slow');
      await w.runner.idle();
    });

    it('runs at most `concurrency` probes and lending effects at once; a pass without a slot writes nothing and looks again shortly', async () => {
      const w = world(['a', 'b'], { concurrency: 1, held: ['claim:a'] });
      // b's reading waits to be taken; a claims and its claim holds the one slot.
      expect(await w.pass('b')).toBeUndefined();
      await w.runner.idle();
      expect(await probed(w, 'a')).toBeUndefined();
      expect(w.gates.waiting('claim:a')).toBe(true);
      const hostBefore = w.get('b').status!.hosts![0];
      // b takes its reading and has a claim to make, but no slot: its session is not written.
      expect(await w.pass('b')).toEqual({ requeueAfter: EFFECT_SLOT_RETRY_MS });
      expect(w.writes).not.toContain('b');
      expect(w.get('b').status!.hosts![0]).toEqual(hostBefore);
      expect(w.gates.started).not.toContain('claim:b');
      w.gates.release('claim:a');
      await w.runner.idle();
      expect(await w.pass('a')).toEqual({ requeueAfter: 0 });
      // The slot is free: b writes its session and claims.
      expect(await w.pass('b')).toBeUndefined();
      expect(w.get('b').status!.hosts![0]).toMatchObject({ state: 'Lending', session: { job: 'train-b' } });
      await w.runner.idle();
      expect(w.gates.started).toContain('claim:b');
      expect(w.gates.most).toBe(1);
    });

    it('on shutdown a running effect gets the grace: one that ends within it finishes its work', async () => {
      const w = world(['a'], { held: ['claim:a'] });
      expect(await probed(w, 'a')).toBeUndefined();
      const drained = w.runner.drain(5_000);
      w.gates.release('claim:a');
      await drained;
      expect(w.gates.aborted).toEqual([]);
      expect(w.runner.get('uid-a')).toMatchObject({ state: 'done', result: { kind: 'lend', results: [{ outcome: 'claimed' }] } });
    });

    it('on shutdown an effect still running after the grace is aborted, and no pass starts another', async () => {
      const w = world(['a', 'b'], { held: ['claim:a'] });
      expect(await probed(w, 'a')).toBeUndefined();
      await w.runner.drain(20);
      expect(w.gates.aborted).toEqual(['claim:a']);
      expect(w.runner.get('uid-a')).toMatchObject({ state: 'done', result: { kind: 'lend', results: [{ outcome: 'error' }] } });
      expect(await w.pass('b')).toBeUndefined();
      expect(w.runner.inFlight()).toBe(0);
      expect(w.gates.started).toEqual(['probe:a', 'claim:a']);
    });

    it('a PeerFleet deleted while its effect runs has it cancelled, and its result is dropped', async () => {
      const w = world(['a'], { held: ['claim:a'] });
      expect(await probed(w, 'a')).toBeUndefined();
      const r = w.reconciler as unknown as { deps: { fleets: { get: () => undefined } } };
      r.deps.fleets.get = () => undefined;
      expect(await w.pass('a')).toBeUndefined();
      await w.runner.idle();
      expect(w.gates.aborted).toEqual(['claim:a']);
      expect(await w.pass('a')).toBeUndefined();
      expect(w.runner.get('uid-a')).toBeUndefined();
    });
  });
});
