import { describe, it, expect } from '@jest/globals';
import { lastActivity, nextCheckIn, verdict } from './timing.js';
import { leasesToPrune } from './history.js';

const T = Date.parse('2026-12-01T10:00:00Z');
const min = 60_000;

describe('verdict', () => {
  it('releases at maxLifetime even when busy', () => {
    expect(verdict({ now: T, expiresAt: new Date(T - 1).toISOString(), idleTimeoutMs: 20 * min, lastActivityMs: T, busy: 3 })).toMatchObject({ kind: 'expired', reason: 'MaxLifetime' });
  });
  it('busy keeps it Ready', () => {
    expect(verdict({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 60 * min, busy: 1 })).toEqual({ kind: 'busy' });
  });
  it('an unreachable machine counts as idle and renews nothing', () => {
    expect(verdict({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 21 * min })).toMatchObject({ kind: 'expired', reason: 'IdleTimeout' });
    expect(verdict({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 5 * min })).toEqual({ kind: 'idle', releaseAt: T + 15 * min });
  });
  it('zero jobs is idle, counted from the last activity', () => {
    expect(verdict({ now: T, idleTimeoutMs: 20 * min, lastActivityMs: T - 20 * min, busy: 0 })).toMatchObject({ kind: 'expired' });
  });
});

describe('lastActivity', () => {
  it('takes the latest of ready, probe activity and the annotation, ignoring garbage', () => {
    expect(lastActivity({ readyAt: '2026-12-01T09:00:00Z', lastActivityAt: '2026-12-01T09:30:00Z', annotation: 'soon' })).toBe(T - 30 * min);
    expect(lastActivity({ readyAt: '2026-12-01T09:00:00Z', annotation: '2026-12-01T09:59:00Z' })).toBe(T - min);
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
    const ended = Array.from({ length: 40 }, (_, i) => ({ name: `l${i}`, namespace: 'a', endedAt: T - i * min }));
    ended.push({ name: 'old', namespace: 'b', endedAt: T - 8 * 24 * 60 * min }, { name: 'new', namespace: 'b', endedAt: T });
    const pruned = leasesToPrune(ended, T).map((e) => e.name).sort();
    expect(pruned).toEqual(['l32', 'l33', 'l34', 'l35', 'l36', 'l37', 'l38', 'l39', 'old'].sort());
  });
});
