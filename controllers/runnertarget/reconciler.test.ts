import { describe, expect, it } from '@jest/globals';
import type { RunnerTarget } from '../../src/api/index.js';
import { CredentialsError, OWN_IDENTITY_DISABLED, TargetSpecError } from './checkrun/providers.js';
import { EffectRunner } from '../../src/kube/effects.js';
import { CHECK_SLOT_RETRY_MS, REQUESTED_CHECK_GAP_MS, checkEveryMs, RunnerTargetReconciler, type FinishedEffect, type RunnerTargetDeps } from './reconciler.js';
import { host, spec } from './testing/pool.js';
import { WATCH_FIRST_MS } from './checkrun/bootwatch.js';

function world(
  over: Partial<RunnerTarget['spec']> = {},
  refusal: Error = new CredentialsError('Secret ci/gh (spec.github.tokenSecretRef) does not exist; create it with the GitHub token under key token'),
  extra: Partial<RunnerTargetDeps> = {},
) {
  let now = Date.parse('2026-12-03T12:00:00Z');
  const target: RunnerTarget = {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'RunnerTarget',
    metadata: { namespace: 'ci', name: 'pool', uid: 'u-1', generation: 1, resourceVersion: '10' },
    spec: { ...spec, checkInterval: '5m', ...over },
  };
  const events: { type: string; reason: string; message: string }[] = [];
  const writes: RunnerTarget['status'][] = [];
  const acquired: string[] = [];
  let released = 0;
  let holder: string | undefined;
  const deps: RunnerTargetDeps = {
    targets: { get: () => target, list: () => [target] } as never,
    read: async () => structuredClone(target),
    status: {
      write: async (_ref, obj, status) => {
        writes.push(status as RunnerTarget['status']);
        return { ...obj, status } as never;
      },
    },
    events: { record: async (_o, type, reason, message) => void events.push({ type, reason, message }) },
    providers: {
      clients: async () => {
        throw refusal;
      },
      forget: () => {},
    },
    leases: {
      acquire: async (name) => {
        acquired.push(name);
        if (holder) return { held: false, holder, retryAfterMs: 31_000 };
        return { held: true, lease: { signal: new AbortController().signal, release: async () => void released++ } };
      },
    },
    identity: 'me',
    installationID: 'abcd',
    hostAccess: async () => ({ privateKey: '', publicKey: 'ssh-ed25519 AAAA', user: 'leasehold', port: 22 }),
    now: () => now,
    ...extra,
  };
  return {
    target,
    events,
    writes,
    acquired,
    reconciler: new RunnerTargetReconciler(deps),
    advance: (ms: number) => (now += ms),
    holdElsewhere: (h: string | undefined) => (holder = h),
    released: () => released,
  };
}

describe('RunnerTargetReconciler', () => {
  it('a check whose credentials are missing fails naming the field and the fix, lets go of its lease, and says so in status', async () => {
    const w = world();
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 300_000 });
    expect(w.acquired).toEqual(['runnertarget-u-1']);
    expect(w.released()).toBe(1);
    expect(w.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'CredentialsInvalid', message: expect.stringContaining('spec.github.tokenSecretRef') })]);
    const conditions = w.writes.at(-1)?.conditions ?? [];
    expect(conditions.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'CredentialsInvalid' });
    expect(conditions.find((c) => c.type === 'Held')).toMatchObject({ status: 'False', reason: 'CheckEnded' });
  });

  it.each([
    ['no Compute Engine credentials while own identity is off', new CredentialsError(OWN_IDENTITY_DISABLED, 'OwnIdentityDisabled'), 'spec.gce.credentialsSecretRef is not set'],
    ['an unknown runner group', new TargetSpecError('spec.github.runnerGroup "gpu" is not a runner group of the GitHub org swack-tools', 'RunnerGroupUnknown'), 'spec.github.runnerGroup "gpu"'],
  ])('a target with %s says so in its condition and an event, with the reason', async (_what, refusal, field) => {
    const w = world({}, refusal);
    await w.reconciler.reconcile('ci/pool');
    expect(w.events).toEqual([expect.objectContaining({ type: 'Warning', reason: refusal.reason, message: expect.stringContaining(field) })]);
    expect(w.writes.at(-1)?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: refusal.reason, message: expect.stringContaining(field) });
  });

  it('checks every checkInterval: a wake-up before it checks nothing, a spec change checks at once', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    w.advance(60_000);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 240_000 });
    expect(w.acquired).toHaveLength(1);
    w.advance(240_000);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(2);
    w.target.metadata!.generation = 2;
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(3);
  });

  it('a lease held elsewhere: no status write, an event, and another try after the lease duration rather than a whole interval', async () => {
    const w = world();
    w.holdElsewhere('other-replica');
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 31_000 });
    expect(w.writes).toEqual([]);
    expect(w.events).toEqual([expect.objectContaining({ type: 'Normal', reason: 'HeldElsewhere', message: expect.stringContaining('other-replica') })]);
    w.holdElsewhere(undefined);
    w.advance(31_000);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(2);
  });

  it.each<[string, number | undefined, number, 'Launch' | 'Register']>([
    ['the default', undefined, 10_000, 'Launch'],
    ['a shorter follow-up (a test controller)', 2_000, 2_000, 'Launch'],
    ['a register (a reused host waits for its runner)', undefined, 10_000, 'Register'],
  ])('an open launch or register is checked again after the follow-up, %s, not after checkInterval', async (_name, followUpMs, expected, action) => {
    const w = world({}, undefined, followUpMs ? { followUpMs } : {});
    w.target.status = { receipts: [{ id: 'r1', action, hosts: ['pool-a'], phase: 'Intended', at: '2026-12-03T11:59:00Z' }] };
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: expected });
    w.advance(expected - 1);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 1 });
    w.advance(1);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(2);
  });

  it('an open launch is watched between checks: first 1 s on, then on a gap that grows, never past the follow-up check; a look that finds nothing to deliver takes no lease', async () => {
    const w = world({}, undefined, { followUpMs: 3_000 });
    w.target.status = { lastCheckAt: '2026-12-03T12:00:00Z', observedGeneration: 1, receipts: [{ id: 'r1', action: 'Launch', hosts: ['pool-a'], zone: 'us-central1-a', phase: 'Intended', at: '2026-12-03T11:59:59Z' }] };
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: WATCH_FIRST_MS });
    w.advance(WATCH_FIRST_MS);
    // The look (its clients refused here, so it finds nothing); the next gap is 1.2 s, before the check due in 2 s.
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 1_200 });
    w.advance(1_200);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 800 });
    expect(w.acquired).toEqual([]);
    w.advance(800);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toEqual(['runnertarget-u-1']);
  });

  it('a dry run\'s open launch is not watched: it is only followed up by its check', async () => {
    const w = world({ dryRun: true }, undefined, { followUpMs: 3_000 });
    w.target.status = { lastCheckAt: '2026-12-03T12:00:00Z', observedGeneration: 1, receipts: [{ id: 'r1', action: 'Launch', hosts: ['pool-a'], zone: 'us-central1-a', phase: 'Intended', at: '2026-12-03T11:59:59Z' }] };
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 3_000 });
  });

  it('a requested check runs before its interval; a burst of requests starts one check per 5 s, and the deliveries that came after its check read the jobs get one at the end of the gap', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    w.advance(60_000);
    expect(w.reconciler.requestCheck('ci/pool')).toBe(true);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(2);
    // More deliveries of the burst after that check: coalesced into one check when the gap ends, not left to the interval.
    w.advance(1_000);
    expect(w.reconciler.requestCheck('ci/pool')).toBe(false);
    w.advance(1_000);
    expect(w.reconciler.requestCheck('ci/pool')).toBe(false);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: REQUESTED_CHECK_GAP_MS - 2_000 });
    expect(w.acquired).toHaveLength(2);
    w.advance(REQUESTED_CHECK_GAP_MS - 2_000);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 300_000 });
    expect(w.acquired).toHaveLength(3);
    // That check opens the next gap: a delivery right after it is coalesced again, one gap on.
    w.advance(1);
    expect(w.reconciler.requestCheck('ci/pool')).toBe(false);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: REQUESTED_CHECK_GAP_MS - 1 });
    w.advance(REQUESTED_CHECK_GAP_MS);
    expect(w.reconciler.requestCheck('ci/pool')).toBe(true);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(4);
    // Another target's requests are its own.
    expect(w.reconciler.requestCheck('ci/other')).toBe(true);
  });

  it('a delivery coalesced while the requested check has not started yet adds no check: that check reads its job', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    w.advance(60_000);
    expect(w.reconciler.requestCheck('ci/pool')).toBe(true);
    w.advance(100);
    expect(w.reconciler.requestCheck('ci/pool')).toBe(false);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(2);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 300_000 });
  });

  it('a request does not pass a GitHub rate limit', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    (w.reconciler as unknown as { limitedUntil: Map<string, number> }).limitedUntil.set('ci/pool', Date.parse('2026-12-03T12:10:00Z'));
    expect(w.reconciler.requestCheck('ci/pool')).toBe(true);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 600_000 });
    expect(w.acquired).toHaveLength(1);
  });

  it('a dry run takes no lease', async () => {
    const w = world({ dryRun: true });
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toEqual([]);
    expect(w.events.map((e) => e.reason)).toEqual(['CredentialsInvalid']);
  });
});

describe('a target stored with a checkInterval under the minimum', () => {
  it('is checked every 30 s, not in a hot loop', async () => {
    const w = world({ checkInterval: '0s' });
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 30_000 });
    w.advance(1_000);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 29_000 });
    expect(w.acquired).toHaveLength(1);
  });
});

describe('checkEveryMs', () => {
  it.each([
    ['0s', 1, 30_000],
    ['1s', 1, 30_000],
    ['30s', 1, 30_000],
    ['5m', 1, 300_000],
    ['0s', 0.1, 3_000],
    ['50s', 0.1, 5_000],
  ])('checkInterval %s at scale %d is %d ms', (interval, scale, ms) => {
    expect(checkEveryMs(interval, scale)).toBe(ms);
  });
});

describe('RunnerTargetReconciler with checks on the effect runner', () => {
  function pool(concurrency: number) {
    let now = Date.parse('2026-12-03T12:00:00Z');
    const make = (name: string, status: RunnerTarget['status'] = {}): RunnerTarget => ({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'RunnerTarget',
      metadata: { namespace: 'ci', name, uid: `u-${name}`, generation: 1, resourceVersion: '10' },
      spec: { ...spec, checkInterval: '5m' },
      status,
    });
    const targets = new Map(['slow', 'a', 'b'].map((n) => [n, make(n)]));
    let letGo!: () => void;
    const slowLease = new Promise<void>((r) => (letGo = r));
    const started: string[] = [];
    const requeued: string[] = [];
    const effects = new EffectRunner<FinishedEffect>();
    const deps: RunnerTargetDeps = {
      targets: { get: (_ns: string, name: string) => targets.get(name), list: () => [...targets.values()] } as never,
      read: async (_ns, name) => structuredClone(targets.get(name)),
      status: { write: async (_ref, obj, status) => ({ ...obj, status }) as never },
      events: { record: async () => {} },
      providers: { clients: async () => Promise.reject(new CredentialsError('Secret ci/gh (spec.github.tokenSecretRef) does not exist')), forget: () => {} },
      leases: {
        acquire: async (name) => {
          started.push(name);
          // The slow target's check holds here as a long check would (SSH probes, a boot).
          if (name === 'runnertarget-u-slow') await slowLease;
          return { held: true, lease: { signal: new AbortController().signal, release: async () => {} } };
        },
      },
      identity: 'me',
      installationID: 'abcd',
      hostAccess: async () => ({ privateKey: '', publicKey: 'ssh-ed25519 AAAA', user: 'leasehold', port: 22 }),
      now: () => now,
      checks: { effects, concurrency, requeue: (key) => void requeued.push(key) },
    };
    return { reconciler: new RunnerTargetReconciler(deps), effects, started, requeued, letGo, targets, make, advance: (ms: number) => (now += ms) };
  }

  it('a long check of one target does not hold the worker: the pass returns and the next target is checked', async () => {
    const p = pool(4);
    expect(await p.reconciler.reconcile('ci/slow')).toBeUndefined();
    expect(await p.reconciler.reconcile('ci/a')).toBeUndefined();
    await waitUntil(() => p.requeued.includes('ci/a'));
    // a's check ended while slow's still runs; a's result is taken by its next pass.
    expect(p.effects.get('u-slow')).toEqual({ state: 'running', id: 'check/ci/slow' });
    expect(await p.reconciler.reconcile('ci/a')).toEqual({ requeueAfter: 300_000 });
    // A pass of the slow target while its check runs starts nothing.
    expect(await p.reconciler.reconcile('ci/slow')).toBeUndefined();
    expect(p.started.filter((n) => n === 'runnertarget-u-slow')).toHaveLength(1);
    p.letGo();
    await waitUntil(() => p.requeued.includes('ci/slow'));
    expect(await p.reconciler.reconcile('ci/slow')).toEqual({ requeueAfter: 300_000 });
  });

  it('at most the configured number of checks run at once; a target past them is looked at again a second later', async () => {
    const p = pool(1);
    await p.reconciler.reconcile('ci/slow');
    expect(await p.reconciler.reconcile('ci/a')).toEqual({ requeueAfter: CHECK_SLOT_RETRY_MS });
    expect(p.started).toEqual(['runnertarget-u-slow']);
    p.letGo();
    await p.effects.idle();
    expect(await p.reconciler.reconcile('ci/a')).toBeUndefined();
    expect(p.started).toEqual(['runnertarget-u-slow', 'runnertarget-u-a']);
  });

  it('a check due just before its sample window is started when the window opens, not started to wait inside', async () => {
    const p = pool(4);
    // The last counted sample 4 min ago: the window opens in 1 min.
    p.targets.set('b', p.make('b', { lastSample: { at: '2026-12-03T11:56:00Z', queued: 0, running: 0, idleRunners: 0, busyRunners: 0 } }));
    expect(await p.reconciler.reconcile('ci/b')).toEqual({ requeueAfter: 60_000 });
    expect(p.started).toEqual([]);
  });

  it('a requested check is started at once, not at the sample window, and enqueues the target', async () => {
    const p = pool(4);
    p.targets.set('b', p.make('b', { lastSample: { at: '2026-12-03T11:56:00Z', queued: 0, running: 0, idleRunners: 0, busyRunners: 0 } }));
    expect(p.reconciler.requestCheck('ci/b')).toBe(true);
    expect(p.requeued).toEqual(['ci/b']);
    expect(await p.reconciler.reconcile('ci/b')).toBeUndefined();
    expect(p.started).toEqual(['runnertarget-u-b']);
  });

  it('a request while a check runs is followed by one more check once it ends', async () => {
    const p = pool(4);
    await p.reconciler.reconcile('ci/slow');
    expect(p.reconciler.requestCheck('ci/slow')).toBe(true);
    // Its pass while the check runs starts nothing.
    expect(await p.reconciler.reconcile('ci/slow')).toBeUndefined();
    p.letGo();
    await waitUntil(() => p.requeued.filter((k) => k === 'ci/slow').length === 2);
    expect(await p.reconciler.reconcile('ci/slow')).toEqual({ requeueAfter: 1 });
    await p.reconciler.reconcile('ci/slow');
    expect(p.started.filter((n) => n === 'runnertarget-u-slow')).toHaveLength(2);
    await p.effects.idle();
    expect(await p.reconciler.reconcile('ci/slow')).toEqual({ requeueAfter: 300_000 });
  });

  it('a boot watch is the target\'s effect like a check: a check requested while it runs starts once it ends, not after its gap', async () => {
    const p = pool(4);
    p.targets.set('b', p.make('b', { lastCheckAt: '2026-12-03T12:00:00Z', observedGeneration: 1, receipts: [{ id: 'r1', action: 'Launch', hosts: ['b-1'], zone: 'us-central1-a', phase: 'Intended', at: '2026-12-03T12:00:00Z' }] }));
    expect(await p.reconciler.reconcile('ci/b')).toEqual({ requeueAfter: WATCH_FIRST_MS });
    p.advance(WATCH_FIRST_MS);
    expect(await p.reconciler.reconcile('ci/b')).toBeUndefined();
    expect(p.effects.get('u-b')).toEqual({ state: 'running', id: 'watch/ci/b' });
    expect(p.reconciler.requestCheck('ci/b')).toBe(true);
    expect(await p.reconciler.reconcile('ci/b')).toBeUndefined();
    expect(p.started).toEqual([]);
    await p.effects.idle();
    expect(await p.reconciler.reconcile('ci/b')).toEqual({ requeueAfter: 1 });
    await p.reconciler.reconcile('ci/b');
    expect(p.started).toEqual(['runnertarget-u-b']);
  });

  it('a deleted target\'s running check is cancelled and its result dropped', async () => {
    const p = pool(4);
    await p.reconciler.reconcile('ci/slow');
    p.targets.delete('slow');
    await p.reconciler.reconcile('ci/slow');
    p.letGo();
    await p.effects.idle();
    expect(p.requeued).toEqual(['ci/slow']);
    await p.reconciler.reconcile('ci/slow');
    expect(p.effects.get('u-slow')).toBeUndefined();
  });
});

describe('RunnerTargetReconciler: a deleted target refused for its credentials or endpoint', () => {
  const MISSING_SECRET = 'Secret ci/gh (spec.github.tokenSecretRef) does not exist; create it with the GitHub token under key token';

  function deleted(status: RunnerTarget['status'], refusal: Error = new CredentialsError(MISSING_SECRET), read?: (t: RunnerTarget) => RunnerTarget) {
    const removed: RunnerTarget[] = [];
    const keysRemoved: string[] = [];
    let clientsAsked = 0;
    let target: RunnerTarget | undefined;
    const w = world({}, refusal, {
      finalizers: { add: async (t) => t, remove: async (t) => void removed.push(t) },
      removeHostKey: async (t) => void keysRemoved.push(t.metadata!.uid!),
      providers: {
        clients: async () => {
          clientsAsked++;
          throw refusal;
        },
        forget: () => {},
      },
      read: async () => (read ? read(structuredClone(target!)) : structuredClone(target!)),
    });
    target = w.target;
    Object.assign(w.target.metadata!, { deletionTimestamp: '2026-12-03T11:59:00Z', finalizers: ['leasehold.dev/runner-hosts'] });
    w.target.status = status;
    return { ...w, removed, keysRemoved, clientsAsked: () => clientsAsked };
  }

  it.each<[string, RunnerTarget['status'], Error]>([
    ['with no status at all, its Secret missing', undefined, new CredentialsError(MISSING_SECRET)],
    ['with conditions only, its endpoint not allow-listed', { conditions: [] }, new TargetSpecError('spec.github.apiURL https://gh.example is not an endpoint the admin allowed', 'EndpointNotAllowed')],
    ['whose only receipts are settled re-runs', { receipts: [{ id: 'rerun-1', action: 'Rerun', hosts: [], phase: 'Done', at: '2026-12-03T11:00:00Z', repository: 'swack-tools/oxidex', runId: 7 }] }, new CredentialsError(MISSING_SECRET)],
  ])('that never launched anything (%s) loses its finalizer at once, with no check, lease or provider call', async (_what, status, refusal) => {
    const d = deleted(status, refusal);
    expect(await d.reconciler.reconcile('ci/pool')).toBeUndefined();
    expect(d.removed).toHaveLength(1);
    expect(d.removed[0]!.metadata!.finalizers).toEqual(['leasehold.dev/runner-hosts']);
    expect(d.keysRemoved).toEqual(['u-1']);
    expect(d.acquired).toEqual([]);
    expect(d.clientsAsked()).toBe(0);
    expect(d.writes).toEqual([]);
  });

  it.each<[string, RunnerTarget['status'], string[]]>([
    ['a host', { hosts: [host('pool-a', 'Idle')] }, ['1 host (pool-a)']],
    ['many hosts', { hosts: ['a', 'b', 'c', 'd', 'e'].map((n) => host(`pool-${n}`, 'Busy')) }, ['5 hosts (pool-a, pool-b, pool-c and 2 more)']],
    ['a settled launch receipt and no host', { receipts: [{ id: 'launch-1', action: 'Launch', hosts: ['pool-a'], phase: 'Failed', at: '2026-12-03T11:00:00Z' }] }, ['1 launch receipt']],
    ['an open delete receipt and no host', { receipts: [{ id: 'delete-1', action: 'Delete', hosts: ['pool-a'], phase: 'Intended', at: '2026-12-03T11:00:00Z' }] }, ['1 open receipt']],
  ])('that holds %s keeps its finalizer, and its condition and event say what holds the teardown and the fix', async (_what, status, holds) => {
    const d = deleted(status);
    await d.reconciler.reconcile('ci/pool');
    expect(d.removed).toEqual([]);
    expect(d.keysRemoved).toEqual([]);
    const ready = d.writes.at(-1)?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'CredentialsInvalid' });
    for (const text of ['teardown blocked', 'is being deleted and keeps its finalizer leasehold.dev/runner-hosts', ...holds, MISSING_SECRET]) expect(ready?.message).toContain(text);
    expect(d.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'CredentialsInvalid', message: ready?.message })]);
  });

  it('keeps its finalizer when a fresh read shows a launch the cache had not seen yet, and runs its check instead', async () => {
    const d = deleted(undefined, undefined, (t) => ({ ...t, metadata: { ...t.metadata, resourceVersion: '11' }, status: { receipts: [{ id: 'launch-2', action: 'Launch', hosts: ['pool-b'], phase: 'Intended', at: '2026-12-03T11:59:30Z' }] } }));
    await d.reconciler.reconcile('ci/pool');
    expect(d.removed).toEqual([]);
    expect(d.acquired).toEqual(['runnertarget-u-1']);
    expect(d.writes.at(-1)?.conditions?.find((c) => c.type === 'Ready')?.message).toContain('1 open receipt');
  });

  it('a target not being deleted keeps its finalizer and its plain message', async () => {
    const d = deleted(undefined);
    delete d.target.metadata!.deletionTimestamp;
    await d.reconciler.reconcile('ci/pool');
    expect(d.removed).toEqual([]);
    const ready = d.writes.at(-1)?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.message).toBe(`observe: ${MISSING_SECRET}`);
  });
});

async function waitUntil(probe: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setImmediate(r));
  }
}
