import { describe, it, expect } from '@jest/globals';
import { annotatedActivity, judgeUsage, nextCheckIn } from './timing.js';
import type { Lease } from '../../../src/api/index.js';
import { EndedLeases, endedNow, leasesToPrune, pruneHistory } from '../history.js';

const T = Date.parse('2026-12-01T10:00:00Z');
const min = 60_000;

describe('judgeUsage', () => {
  it('releases at maxLifetime even when busy', () => {
    expect(judgeUsage({ now: T, expiresAt: new Date(T - 1).toISOString(), idleTimeoutMs: 20 * min, lastActivityMs: T, busy: 3 })).toMatchObject({ kind: 'expired', reason: 'MaxLifetime' });
  });
  it('busy keeps it Ready', () => {
    expect(judgeUsage({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 60 * min, busy: 1 })).toEqual({ kind: 'busy' });
  });
  it('an unreachable machine counts as idle and renews nothing', () => {
    expect(judgeUsage({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 21 * min })).toMatchObject({ kind: 'expired', reason: 'IdleTimeout' });
    expect(judgeUsage({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 5 * min })).toEqual({ kind: 'idle', releaseAt: T + 15 * min });
  });
  it('zero jobs is idle, counted from the last activity', () => {
    expect(judgeUsage({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 20 * min, busy: 0 })).toMatchObject({ kind: 'expired' });
  });
});

describe('annotatedActivity', () => {
  it.each<[string, string | undefined, boolean, ReturnType<typeof annotatedActivity>]>([
    ['unset', undefined, false, undefined],
    ['garbage', 'soon', false, undefined],
    ['a past time, in whole seconds', '2026-12-01T09:59:00.750Z', false, { at: T - min, future: false }],
    ['a past time seen before still counts', '2026-12-01T09:59:00Z', true, { at: T - min, future: false }],
    ['a future time counts as now', '2099-01-01T00:00:00Z', false, { at: T, future: true }],
    ['a future time seen before counts no more', '2099-01-01T00:00:00Z', true, undefined],
  ])('%s', (_name, annotation, seen, want) => {
    expect(annotatedActivity(annotation, T + 400, seen)).toEqual(want);
  });
});

describe('nextCheckIn', () => {
  it('is the check interval unless a deadline comes first', () => {
    expect(nextCheckIn(T, min, [T + 10 * min])).toBe(min);
    expect(nextCheckIn(T, min, [T + 5000])).toBe(5000);
    expect(nextCheckIn(T, min, [T - 5000])).toBe(min);
  });
});

describe('leasesToPrune', () => {
  it('keeps the 32 most recent per namespace and nothing older than 7 days', () => {
    const ended = Array.from({ length: 40 }, (_, i) => ({ name: `l${i}`, uid: `u${i}`, namespace: 'a', endedAt: T - i * min }));
    ended.push({ name: 'old', uid: 'u-old', namespace: 'b', endedAt: T - 8 * 24 * 60 * min }, { name: 'new', uid: 'u-new', namespace: 'b', endedAt: T });
    const pruned = leasesToPrune(ended, T).map((e) => e.name).sort();
    expect(pruned).toEqual(['l32', 'l33', 'l34', 'l35', 'l36', 'l37', 'l38', 'l39', 'old'].sort());
  });

  it('deletes each pruned Lease by name and UID, so a new Lease of the same name is never the one deleted', async () => {
    const ended = (name: string, uid: string, at: number) =>
      ({ metadata: { name, namespace: 'a', uid }, status: { phase: 'Released', releasedAt: new Date(at).toISOString() } }) as unknown as Lease;
    const removed: string[][] = [];
    await pruneHistory(ended('new', 'u2', T), [{ name: 'old', uid: 'u1', namespace: 'a', endedAt: T - 2 * min }, { name: 'new', uid: 'u2', namespace: 'a', endedAt: T }], T, 1, 3600_000, async (ns, name, uid) => {
      removed.push([ns, name, uid]);
    });
    expect(removed).toEqual([['a', 'old', 'u1']]);
  });
});

describe('EndedLeases', () => {
  const lease = (name: string, namespace: string, phase: string, stamp = 'inst0001') =>
    ({ metadata: { name, namespace, uid: `u-${name}`, annotations: { 'leasehold.dev/installation': stamp } }, status: { phase, releasedAt: new Date(T).toISOString() } }) as unknown as Lease;
  const names = (index: EndedLeases, ns: string) => index.in(ns).map((e) => e.name).sort();

  it("keeps this installation's ended Leases per namespace as the cache changes", () => {
    const index = new EndedLeases('inst0001');
    index.observe(lease('a', 'x', 'Released'));
    index.observe(lease('b', 'x', 'Failed'));
    index.observe(lease('c', 'x', 'Ready'));
    index.observe(lease('d', 'y', 'Released'));
    index.observe(lease('e', 'x', 'Released', 'other001'));
    expect(names(index, 'x')).toEqual(['a', 'b']);
    expect(names(index, 'y')).toEqual(['d']);
    expect(index.in('x')[0]).toMatchObject({ namespace: 'x', endedAt: T });
    index.gone(lease('a', 'x', 'Released'));
    index.observe(lease('c', 'x', 'Released'));
    expect(names(index, 'x')).toEqual(['b', 'c']);
    // Stamped by another installation since: no longer this one's history.
    index.observe(lease('b', 'x', 'Failed', 'other001'));
    index.gone(lease('d', 'y', 'Released'));
    expect(names(index, 'x')).toEqual(['c']);
    expect(names(index, 'y')).toEqual([]);
  });
});

describe('endedNow', () => {
  const at = (phase?: string) => ({ metadata: { name: 'l' }, ...(phase ? { status: { phase } } : {}) }) as unknown as Lease;
  it('is the update that ends the Lease, not a later update or a resync of an ended one', () => {
    expect(endedNow(at('Released'), at('Releasing'))).toBe(true);
    expect(endedNow(at('Failed'), at())).toBe(true);
    expect(endedNow(at('Released'), at('Released'))).toBe(false);
    expect(endedNow(at('Ready'), at('Launching'))).toBe(false);
  });
});
