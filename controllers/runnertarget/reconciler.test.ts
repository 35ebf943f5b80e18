import { describe, expect, it } from '@jest/globals';
import type { RunnerTarget } from '../../src/api/index.js';
import { CredentialsError, OWN_IDENTITY_DISABLED, TargetSpecError } from './operations.js';
import { checkEveryMs, RunnerTargetReconciler, type RunnerTargetDeps } from './reconciler.js';
import { spec } from './testing/pool.js';

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

  it.each([
    ['the default', undefined, 10_000],
    ['a shorter follow-up (a test controller)', 2_000, 2_000],
  ])('an open launch is checked again after the follow-up, %s, not after checkInterval', async (_name, followUpMs, expected) => {
    const w = world({}, undefined, followUpMs ? { followUpMs } : {});
    w.target.status = { receipts: [{ id: 'r1', action: 'Launch', hosts: ['pool-a'], phase: 'Intended', at: '2026-12-03T11:59:00Z' }] };
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: expected });
    w.advance(expected - 1);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 1 });
    w.advance(1);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(2);
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
