import { describe, it, expect } from '@jest/globals';
import { lastActivity } from './activity.js';

const T = Date.parse('2026-12-01T10:00:00Z');
const min = 60_000;

describe('lastActivity', () => {
  it('takes the latest of ready and recorded activity', () => {
    expect(lastActivity({ readyAt: '2026-12-01T09:00:00Z', lastActivityAt: '2026-12-01T09:30:00Z' })).toBe(T - 30 * min);
    expect(lastActivity({ readyAt: '2026-12-01T09:00:00Z' })).toBe(T - 60 * min);
    expect(lastActivity({})).toBe(0);
  });
});
