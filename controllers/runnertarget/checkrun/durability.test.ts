import { describe, expect, it } from '@jest/globals';
import { DurabilityGuard, NotDurableError, readBackOutcome, type WriteOutcome } from './durability.js';

describe('DurabilityGuard', () => {
  it('permits provider calls while every write succeeded', () => {
    const g = new DurabilityGuard();
    g.record({ kind: 'written', resourceVersion: '5' });
    expect(() => g.permit('compute.instances.insert a')).not.toThrow();
    expect(g.condition()).toMatchObject({ status: 'True', reason: 'StatusWritten' });
  });

  it.each<[WriteOutcome, string, RegExp]>([
    [{ kind: 'failed', message: 'HTTP 500' }, 'StatusWriteFailed', /a status write failed \(HTTP 500\)/],
    [{ kind: 'conflict', message: 'HTTP 409: the object has been modified' }, 'StatusConflict', /a status write conflicted/],
    [{ kind: 'unknown', message: 'timeout; the read-back failed too' }, 'StatusUnknown', /a status write has an unknown outcome/],
  ])('after %j every further call is refused', (outcome, reason, message) => {
    const g = new DurabilityGuard();
    g.record(outcome);
    for (const call of ['compute.instances.insert a', 'github.runners.delete 7', 'ssh a']) {
      expect(() => g.permit(call)).toThrow(NotDurableError);
    }
    expect(g.durable).toBe(false);
    expect(g.refused).toEqual(['compute.instances.insert a', 'github.runners.delete 7', 'ssh a']);
    expect(g.condition()).toMatchObject({ type: 'Durable', status: 'False', reason, message: expect.stringMatching(message) });
    expect(g.condition().message).toMatch(/refused 3 provider calls/);
  });

  it('a later successful write does not restore durability, and the first reason stays', () => {
    const g = new DurabilityGuard();
    g.record({ kind: 'conflict', message: '409' });
    g.record({ kind: 'written', resourceVersion: '9' });
    g.record({ kind: 'failed', message: '500' });
    expect(g.durable).toBe(false);
    expect(g.condition().reason).toBe('StatusConflict');
  });

  it('the refusal names the call and the reason', () => {
    const g = new DurabilityGuard();
    g.record({ kind: 'conflict', message: '409' });
    expect(() => g.permit('compute.instances.delete a')).toThrow('refused compute.instances.delete a: status is not durable (StatusConflict: 409)');
  });
});

describe('readBackOutcome', () => {
  const receipt = { id: 'launch-1', phase: 'Intended' as const };
  const at = '2026-12-03T12:00:00Z';
  it.each<[string, Parameters<typeof readBackOutcome>[0], WriteOutcome['kind']]>([
    ['the receipt landed', { resourceVersion: '8', status: { receipts: [{ id: 'launch-1', phase: 'Intended', action: 'Launch', at, hosts: [] }] } }, 'written'],
    ['the receipt is missing', { resourceVersion: '8', status: { receipts: [] } }, 'unknown'],
    ['the receipt is there in another phase', { resourceVersion: '8', status: { receipts: [{ id: 'launch-1', phase: 'Done', action: 'Launch', at, hosts: [] }] } }, 'unknown'],
    ['the read-back failed', undefined, 'unknown'],
  ])('%s', (_name, read, kind) => {
    expect(readBackOutcome(read, receipt, 'the write timed out').kind).toBe(kind);
  });
});
