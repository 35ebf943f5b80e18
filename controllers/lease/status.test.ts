import { describe, expect, it } from '@jest/globals';
import { restore, step } from './machine.js';
import { LeaseStatusSchema } from '../../src/api/index.js';
import { conditionsFor, contextOf, failedCheckOf, fitLeaseStatus } from './status.js';
import { leaseWith, NOW } from './testing/phase-input.js';

const now = new Date(NOW);

describe('the failure a releasing Lease carries', () => {
  const failed = step(restore('Launching', { reason: 'Launching', message: '', attempt: 1 }), { type: 'LAUNCH_FAILED', reason: 'AcquireTimeout', message: 'took too long' });
  const withdrawn = step(restore('Ready', { reason: 'MachineReady', message: '', attempt: 1 }), { type: 'EXPIRED', reason: 'IdleTimeout', message: 'idle' });

  it('is the Ready condition reason in CamelCase, not prefixed', () => {
    const ready = conditionsFor(undefined, failed, 1, now)?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'AcquireTimeout', message: 'took too long' });
  });

  it.each([
    ['a failed launch', conditionsFor(undefined, failed, 1, now), { reason: 'AcquireTimeout', message: 'took too long' }],
    ['an idle timeout (no failure)', conditionsFor(undefined, withdrawn, 1, now), undefined],
    ['a condition an older controller wrote', [{ type: 'Ready', status: 'False' as const, reason: 'Failed:NoCapacity', message: 'none', lastTransitionTime: '2026-12-03T10:00:00Z' }], { reason: 'NoCapacity', message: 'none' }],
  ])('is read back from status after %s', (_name, conditions, want) => {
    const ctx = contextOf(leaseWith({ phase: 'Releasing', conditions }));
    expect(ctx.failure).toEqual(want);
  });

  it('is read back only while Releasing', () => {
    expect(contextOf(leaseWith({ phase: 'Failed', conditions: conditionsFor(undefined, failed, 1, now) })).failure).toBeUndefined();
  });
});

describe('fitLeaseStatus', () => {
  it('cuts every free-form text to its schema limit, so the API server accepts the write', () => {
    const long = 'no Offer matches gpu: '.padEnd(100_000, 'x');
    const fitted = fitLeaseStatus({
      phase: 'Pending',
      message: long,
      lastReleaseError: long,
      conditions: [{ type: 'Scheduled', status: 'False', reason: 'NoMatchingOffer', message: long, lastTransitionTime: '2026-12-03T10:00:00Z' }],
    });
    expect(fitted.message).toHaveLength(32768);
    expect(fitted.message!.endsWith('…')).toBe(true);
    expect(fitted.lastReleaseError).toHaveLength(4096);
    expect(fitted.conditions![0]!.message).toHaveLength(32768);
    expect(LeaseStatusSchema.safeParse(fitted).success).toBe(true);
    expect(LeaseStatusSchema.safeParse({ phase: 'Pending', message: long }).success).toBe(false);
  });

  it('leaves short texts as they are', () => {
    expect(fitLeaseStatus({ phase: 'Ready', message: 'ready' })).toEqual({ phase: 'Ready', message: 'ready' });
  });
});

describe('a failed idle check in status', () => {
  const failing = step(restore('Ready', { reason: 'MachineReady', message: '', attempt: 1 }), { type: 'CHECK_FAILED', reason: 'MachineUnreachable', message: 'the machine could not be reached: timeout' });
  const failed = conditionsFor(undefined, failing, 1, now);

  it('is Ready=False with the reason and message', () => {
    expect(failed?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'MachineUnreachable', message: 'the machine could not be reached: timeout' });
  });

  it('is read back for the CLI while the Lease holds its machine', () => {
    expect(failedCheckOf(leaseWith({ phase: 'Idle', conditions: failed }))).toEqual({ reason: 'MachineUnreachable', message: 'the machine could not be reached: timeout' });
    expect(failedCheckOf(leaseWith({ phase: 'Releasing', conditions: failed }))).toBeUndefined();
  });

  it('goes once a check succeeds again: Ready=True', () => {
    const restored = step(restore('Idle', failing.context), { type: 'IDLE', message: 'idle' });
    const conditions = conditionsFor(failed, restored, 1, now);
    expect(conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'MachineIdle' });
    expect(failedCheckOf(leaseWith({ phase: 'Idle', conditions }))).toBeUndefined();
  });
});
