import { describe, it, expect } from '@jest/globals';
import { idleDeadline, idleTimeoutMs, lastActivity } from './activity.js';

const T = Date.parse('2026-12-01T10:00:00Z');
const min = 60_000;

describe('lastActivity', () => {
  it('takes the latest of ready and recorded activity', () => {
    expect(lastActivity({ readyAt: '2026-12-01T09:00:00Z', lastActivityAt: '2026-12-01T09:30:00Z' })).toBe(T - 30 * min);
    expect(lastActivity({ readyAt: '2026-12-01T09:00:00Z' })).toBe(T - 60 * min);
    expect(lastActivity({})).toBe(0);
  });
});

describe('idleDeadline', () => {
  it.each([
    ['the idle timeout after the last activity', { idleTimeout: '30m' }, T + 30 * min],
    ['the default 20m when status records none', {}, T + 20 * min],
    ['the lifetime end when that comes first', { idleTimeout: '30m', expiresAt: '2026-12-01T10:10:00Z' }, T + 10 * min],
    ['the idle deadline when the lifetime ends later', { idleTimeout: '30m', expiresAt: '2026-12-01T12:00:00Z' }, T + 30 * min],
    ['the idle deadline when expiresAt cannot be read', { idleTimeout: '30m', expiresAt: 'soon' }, T + 30 * min],
  ])('%s', (_name, st, want) => {
    expect(idleDeadline(st, T)).toBe(want);
  });

  it('idleTimeoutMs reads status.idleTimeout, or the default', () => {
    expect(idleTimeoutMs({ idleTimeout: '90s' })).toBe(90_000);
    expect(idleTimeoutMs({})).toBe(20 * min);
  });
});
