// A leader told to stop while a Lease's acquire runs, then a new leader over
// the same API server and records: however the acquire's end falls against
// the manager's stop (before it, while the queue drains, while the effects
// drain, after the grace), the Lease must come out Ready with one acquire,
// or, where the acquire was cancelled, be released; never acquired twice,
// never left with an unreleased machine, never stuck. Each case runs with
// informers in step with the server and with informers behind it; last, a
// controller whose informer has not yet shown its own Launching write when
// a quick acquire ends.
import { afterEach, describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import type { Lease } from '../../src/api/index.js';
import type { ChangeFeed, ObjectCache } from '../../src/kube/cache.js';
import type { EffectRunner } from '../../src/kube/effects.js';
import { Manager } from '../../src/kube/manager.js';
import { FakeAPIServer } from '../../src/kube/testing/fake-api.js';
import { waitFor } from '../../src/kube/testing/wait.js';
import type { WorkQueue } from '../../src/kube/workqueue.js';
import type { LeaseEffectResult } from './decision.js';
import type { AcquireResult, LeaseDriver, MachineCheck } from './driver.js';
import { leaseReconciler, log, seedLease } from './testing/harness.js';
import { MemoryRecordStore } from './testing/records.js';

const UID = '0123abcd-0000-0000-0000-000000000000';
const MACHINE = { ssh: { host: '10.0.0.5', port: 22, user: 'u', hostKey: 'ssh-ed25519 AAAA' } };
const FACTS = { os: 'linux', arch: 'amd64', cpus: 2, memoryGiB: 4, gpus: 0 };
const LONG = 20_000;

// No informer is registered, so nothing here talks to this API server; the manager only needs a config.
function nowhere(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'local', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'local' }],
    contexts: [{ name: 'local', cluster: 'local', user: 'local' }],
    currentContext: 'local',
  });
  return kc;
}

/** Every provider call the controllers made, in order; and the acquire, held until the test ends it. */
function world(opts: { cutOff?: 'nothing' | 'machine'; lagMs?: number } = {}) {
  const api = new FakeAPIServer<Lease>({ finalizer: 'leasehold.dev/release' });
  seedLease(api, { name: 'l', uid: UID });
  const records = new MemoryRecordStore();
  records.marked = true;
  const calls: string[] = [];
  let finish!: (r: AcquireResult) => void;
  const acquireEnds = new Promise<AcquireResult>((r) => (finish = r));
  const driver: LeaseDriver = {
    acquire(_lease, _progress, signal): Promise<AcquireResult> {
      calls.push('acquire');
      return new Promise((resolve) => {
        // Cut off, the provider stops before it made anything, or answers with the machine it made just then.
        const cut: AcquireResult = opts.cutOff === 'machine' ? { kind: 'launched', state: '{"pid":1}', machine: MACHINE } : { kind: 'failed', reason: 'AcquireWithdrawn', message: 'withdrawn' };
        signal.addEventListener('abort', () => resolve(cut), { once: true });
        void acquireEnds.then(resolve);
      });
    },
    async prepare(l): Promise<MachineCheck> {
      calls.push('prepare');
      return { kind: 'ok', facts: FACTS, busy: 0, keysHash: 'k', machine: l.status!.machine! } as MachineCheck;
    },
    async check(l): Promise<MachineCheck> {
      calls.push('check');
      // Nobody uses the machine, as in the installed upgrade test.
      return { kind: 'ok', facts: FACTS, busy: 0, keysHash: 'k', machine: l.status!.machine! } as MachineCheck;
    },
    async release() {
      calls.push('release');
    },
  };
  const launched = () => finish({ kind: 'launched', state: '{"pid":1}', machine: MACHINE });
  return { api, records, calls, driver, launched, lagMs: opts.lagMs ?? 0, lease: () => api.stored('ns', 'l')! };
}

/**
 * One process's Lease informer: what the server held when it was made, then
 * each stored change, delivered `lagMs` later (a watch is never instant, and
 * a write can come back after the pass that made it has moved on).
 */
function informer(w: ReturnType<typeof world>): ObjectCache<Lease> & ChangeFeed<Lease> {
  const keyOf = (l: Lease) => `${l.metadata?.namespace ?? ''}/${l.metadata?.name}`;
  const held = new Map(w.api.cache.list().map((l) => [keyOf(l), l]));
  const handlers: Record<'add' | 'update' | 'delete', ((l: Lease) => void)[]> = { add: [], update: [], delete: [] };
  for (const e of ['add', 'update', 'delete'] as const) {
    w.api.cache.on(e, (l) => {
      setTimeout(() => {
        if (e === 'delete') held.delete(keyOf(l));
        else held.set(keyOf(l), l);
        for (const fn of handlers[e]) fn(l);
      }, w.lagMs);
    });
  }
  return {
    get: (namespace, name) => held.get(`${namespace ?? ''}/${name}`),
    list: () => [...held.values()],
    on: (e, fn) => void handlers[e].push(fn),
  };
}

interface Controller {
  mgr: Manager;
  queue: WorkQueue;
  effects: EffectRunner<LeaseEffectResult>;
  /** Set once the manager's stop has reached the effect runner's drain. */
  draining: () => boolean;
}

const started: Manager[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((m) => m.stop()));
});

/**
 * One controller process: a manager (no leader election: it leads at once)
 * with the Lease reconciler on its queue and effect runner. `hold` keeps one
 * reconcile of the key 'hold/x' running until it resolves.
 */
async function controller(w: ReturnType<typeof world>, opts: { graceMs?: number; hold?: { until: Promise<void>; entered: () => void }; settled?: () => void } = {}): Promise<Controller> {
  const mgr = new Manager({ kubeConfig: nowhere(), log, identity: 'test', metricsAddr: '127.0.0.1:0', shutdownGraceMs: opts.graceMs ?? LONG });
  started.push(mgr);
  const effects = mgr.effects<LeaseEffectResult>('lease');
  let draining = false;
  const drain = effects.drain.bind(effects);
  effects.drain = (ms: number) => {
    draining = true;
    return drain(ms);
  };
  let queue: WorkQueue | undefined;
  const leases = informer(w);
  const { reconciler } = leaseReconciler(w.api, { driver: w.driver, records: w.records, effects, leases,
    enqueue: (key) => {
      queue?.add(key);
      opts.settled?.();
    },
  });
  queue = mgr.add({
    name: 'lease',
    concurrency: 2,
    reconcile: async (key) => {
      if (key === 'hold/x') {
        opts.hold?.entered();
        return void (await opts.hold?.until);
      }
      return reconciler.reconcile(key);
    },
  });
  // As the Lease informer would: every stored change puts the Lease on the queue (a stopped queue takes nothing).
  for (const e of ['add', 'update'] as const) leases.on(e, () => queue!.add('ns/l'));
  // As the informer's first list does for a new process.
  queue.add('ns/l');
  await mgr.start();
  return { mgr, queue, effects, draining: () => draining };
}

const until = <T>(what: string, probe: () => T | undefined | false) => waitFor(what, async () => probe(), 20_000, 5);

/** The acquire is running on `c`, its intent written. */
async function acquiring(w: ReturnType<typeof world>, c: Controller): Promise<void> {
  await until('the acquire running', () => c.effects.get(UID)?.state === 'running' && w.lease().status?.phase === 'Launching');
}

/** The Lease handed over by `c` itself (Ready or Idle), its effects idle. */
async function handedOverBy(w: ReturnType<typeof world>, c: Controller): Promise<void> {
  await until('the Lease handed over', () => {
    const st = w.lease().status;
    if (st?.phase === 'Failed' || st?.phase === 'Releasing') throw new Error(`Lease ${st.phase}: ${st.reason}: ${st.message}`);
    return (st?.phase === 'Ready' || st?.phase === 'Idle') && c.effects.inFlight() === 0;
  });
}

/**
 * A new leader over the same API server and records takes the Lease to
 * `phase`. Ready means handed over: Ready, or Idle, where a machine nobody
 * uses goes at its first check (one check interval, here 1 s, after Ready).
 */
async function newLeader(w: ReturnType<typeof world>, phase: 'Ready' | 'Failed'): Promise<Controller> {
  const next = await controller(w);
  await until(`the Lease ${phase} under the new leader`, () => {
    const st = w.lease().status;
    if (st?.phase === 'Failed' && phase !== 'Failed') throw new Error(`Lease Failed: ${st.reason}: ${st.message}`);
    return (st?.phase === phase || (phase === 'Ready' && st?.phase === 'Idle')) && next.effects.inFlight() === 0;
  });
  return next;
}

describe.each([
  ['an informer in step with the server', 0],
  ['informers 25 ms behind the server', 25],
])('LeaseReconciler across a leader stop (%s)', (_, lagMs) => {
  it('an acquire that ends just before stop, its result not yet taken: the new leader takes the Lease to Ready, acquired once', async () => {
    const w = world({ lagMs });
    let stopped: Promise<void> | undefined;
    // The effect has ended and put the Lease back on the queue; stop comes before a worker takes it.
    const old: Controller = await controller(w, { settled: () => (stopped ??= old.mgr.stop()) });
    await acquiring(w, old);
    w.launched();
    await until('the manager stopping', () => stopped !== undefined);
    await stopped;
    expect(old.effects.get(UID)).toMatchObject({ state: 'done', result: { kind: 'acquire', recorded: true } });
    await newLeader(w, 'Ready');
    expect(w.calls.filter((c) => c === 'acquire')).toHaveLength(1);
    expect(w.calls).not.toContain('release');
    expect(w.records.records.get(UID)?.providerState).toBe('{"pid":1}');
    // Nothing runs on the machine: its first check makes it Idle, still handed
    // over (condition Ready True). A waiter that looks only after the
    // hand-over (as after a helm upgrade returns) must accept Idle.
    await until('the Lease Idle after its first check', () => w.lease().status?.phase === 'Idle');
    expect(w.lease().status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'MachineIdle' });
    expect(w.calls.filter((c) => c === 'acquire')).toHaveLength(1);
    expect(w.calls).not.toContain('release');
  });

  it('an acquire whose result a pass took just before stop (the prepare started): the new leader takes the Lease to Ready', async () => {
    const w = world({ lagMs });
    const old = await controller(w);
    await acquiring(w, old);
    w.launched();
    await until('the prepare started', () => w.calls.includes('prepare'));
    await old.mgr.stop();
    await newLeader(w, 'Ready');
    expect(w.calls.filter((c) => c === 'acquire')).toHaveLength(1);
    expect(w.calls).not.toContain('release');
    expect(w.records.records.get(UID)?.providerState).toBe('{"pid":1}');
  });

  it('an acquire that ends while the stopping queue finishes a reconcile in flight', async () => {
    const w = world({ lagMs });
    let letGo!: () => void;
    let held = false;
    const old = await controller(w, { hold: { until: new Promise<void>((r) => (letGo = r)), entered: () => (held = true) } });
    await acquiring(w, old);
    old.queue.add('hold/x');
    await until('a reconcile in flight', () => held);
    const stopped = old.mgr.stop();
    await until('the queue shut down', () => old.queue.isShuttingDown);
    w.launched();
    await until('the acquire ended', () => old.effects.get(UID)?.state === 'done');
    expect(old.draining()).toBe(false);
    letGo();
    await stopped;
    await newLeader(w, 'Ready');
    expect(w.calls.filter((c) => c === 'acquire')).toHaveLength(1);
    expect(w.calls).not.toContain('release');
  });

  it('an acquire that ends while the stopping manager drains the effects, within the grace', async () => {
    const w = world({ lagMs });
    const old = await controller(w);
    await acquiring(w, old);
    const stopped = old.mgr.stop();
    await until('the effects draining', () => old.draining());
    w.launched();
    await stopped;
    expect(old.effects.get(UID)).toMatchObject({ state: 'done', result: { kind: 'acquire', recorded: true } });
    await newLeader(w, 'Ready');
    expect(w.calls.filter((c) => c === 'acquire')).toHaveLength(1);
    expect(w.calls).not.toContain('release');
  });

  it('an acquire cut off at the end of the grace: the new leader releases whatever it may have made, acquires nothing', async () => {
    const w = world({ lagMs });
    const old = await controller(w, { graceMs: 50 });
    await acquiring(w, old);
    await old.mgr.stop();
    expect(old.effects.get(UID)).toMatchObject({ state: 'done', result: { kind: 'acquire', result: { kind: 'failed', reason: 'AcquireWithdrawn' } } });
    await newLeader(w, 'Failed');
    expect(w.lease().status?.endReason).toBe('LaunchInterrupted');
    expect(w.calls.filter((c) => c === 'acquire')).toHaveLength(1);
    expect(w.calls.filter((c) => c === 'release')).toHaveLength(1);
    expect(w.records.records.get(UID)).toBeUndefined();
  });

  it('an acquire whose machine comes back just as the grace cuts it off: recorded before the leader lease goes, the new leader takes it to Ready', async () => {
    const w = world({ cutOff: 'machine', lagMs });
    const old = await controller(w, { graceMs: 50 });
    await acquiring(w, old);
    await old.mgr.stop();
    // Written by the stopping leader itself: the result it holds dies with it.
    expect(w.records.records.get(UID)?.providerState).toBe('{"pid":1}');
    expect(w.lease().status?.providerState).toBe('{"pid":1}');
    await newLeader(w, 'Ready');
    expect(w.lease().status?.reason).not.toBe('LaunchInterrupted');
    expect(w.calls.filter((c) => c === 'acquire')).toHaveLength(1);
    expect(w.calls).not.toContain('release');
  });
});

describe('LeaseReconciler on an informer behind its own writes', () => {
  it('an acquire that ends before the informer shows the Launching write: the Pending it still shows is not taken for tampering; no release, Ready', async () => {
    // Far behind: the whole acquire fits in the lag.
    const w = world({ lagMs: 400 });
    const c = await controller(w);
    await acquiring(w, c);
    w.launched();
    await handedOverBy(w, c);
    expect(w.calls.filter((x) => x === 'acquire')).toHaveLength(1);
    expect(w.calls).not.toContain('release');
    expect(w.records.records.get(UID)?.providerState).toBe('{"pid":1}');
  });
});
