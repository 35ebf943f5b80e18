import { describe, it, expect } from '@jest/globals';
import { DURATION_PATTERN, formatDuration, isDuration, parseDuration } from './duration.js';

const pattern = new RegExp(DURATION_PATTERN);

describe('parseDuration', () => {
  const table: Array<[string, number]> = [
    ['0', 0],
    ['0s', 0],
    ['20m', 20 * 60_000],
    ['12h', 12 * 3_600_000],
    ['1h30m', 90 * 60_000],
    ['90s', 90_000],
    ['500ms', 500],
    ['1.5h', 90 * 60_000],
    ['.5s', 500],
    ['1.s', 1000],
    ['2h45m30.5s', 2 * 3_600_000 + 45 * 60_000 + 30_500],
    ['1m1m', 120_000],
    ['250us', 0.25],
    ['250µs', 0.25],
    ['250μs', 0.25],
    ['1000000ns', 1],
  ];
  it.each(table)('%s', (s, ms) => {
    expect(parseDuration(s)).toBeCloseTo(ms, 9);
    expect(pattern.test(s)).toBe(true);
    expect(isDuration(s)).toBe(true);
  });

  const bad: Array<[string, RegExp]> = [
    ['', /empty/],
    ['-5m', /negative/],
    ['5', /add a unit/],
    ['1.5', /add a unit/],
    ['20 minutes', /not valid.*"20m"/],
    ['1d', /not valid/],
    ['h', /not valid/],
    ['+5s', /not valid/],
    ['1H', /not valid/],
    ['5m ', /not valid/],
    ['.s', /not valid/],
    ['9999999999h', /too long/],
  ];
  it.each(bad)('refuses %j', (s, message) => {
    expect(() => parseDuration(s)).toThrow(message);
    if (s !== '9999999999h') expect(pattern.test(s)).toBe(false);
  });
});

describe('formatDuration', () => {
  const table: Array<[number, string]> = [
    [0, '0s'],
    [500, '500ms'],
    [1500, '1.5s'],
    [90_000, '1m30s'],
    [20 * 60_000, '20m'],
    [90 * 60_000, '1h30m'],
    [12 * 3_600_000, '12h'],
    [25 * 3_600_000 + 61_000, '25h1m1s'],
    [0.25, '250us'],
    [0.000001, '1ns'],
    [-90_000, '-1m30s'],
  ];
  it.each(table)('%d ms is %s', (ms, s) => {
    expect(formatDuration(ms)).toBe(s);
  });

  it('round-trips through parseDuration', () => {
    for (const ms of [0, 1, 999, 1000, 61_000, 3_599_999, 3_600_000, 86_400_000 + 1, 0.5]) {
      expect(parseDuration(formatDuration(ms))).toBeCloseTo(ms, 6);
    }
  });

  it('refuses non-finite input', () => {
    expect(() => formatDuration(Number.NaN)).toThrow(/cannot format/);
  });
});
