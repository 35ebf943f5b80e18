import { describe, expect, it } from '@jest/globals';
import { SAMPLE_WINDOW, sampleTiming, sampleWindow, type SampleTiming } from './sample.js';

const PREV = '2026-12-03T10:00:00Z';
const at = (s: number) => Date.parse(PREV) + s * 1000;

describe('sampleTiming', () => {
  it.each<[string, string | undefined, number, Partial<SampleTiming>]>([
    ['no previous sample', undefined, 0, { kind: 'restart' }],
    ['an unreadable previous sample', 'yesterday', 0, { kind: 'restart' }],
    ['exactly 300 s', PREV, 300, { kind: 'count', elapsedMs: 300_000 }],
    ['375 s', PREV, 375, { kind: 'count' }],
    ['exactly 450 s', PREV, 450, { kind: 'count' }],
    ['451 s: the series breaks', PREV, 451, { kind: 'restart' }],
    ['299 s: wait 1 s for the boundary', PREV, 299, { kind: 'wait', waitMs: 1000, at: at(300) }],
    ['180 s: wait exactly 2 min', PREV, 180, { kind: 'wait', waitMs: 120_000 }],
    ['179 s: too early to wait', PREV, 179, { kind: 'early', elapsedMs: 179_000 }],
    ['0 s: a retry right after a sample', PREV, 0, { kind: 'early' }],
    ['a previous sample in the future', PREV, -10, { kind: 'restart' }],
  ])('%s', (_name, previous, s, want) => {
    expect(sampleTiming(previous, at(s))).toMatchObject(want);
  });

  it('says why a sample does not count', () => {
    expect(sampleTiming(PREV, at(60))).toMatchObject({ reason: expect.stringMatching(/60 s since the last sample, less than 300 s/) });
    expect(sampleTiming(PREV, at(600))).toMatchObject({ reason: expect.stringMatching(/600 s since the last sample, more than 450 s/) });
  });

  it.each<[number, number, SampleTiming['kind']]>([
    [0.01, 3, 'count'],
    [0.01, 2.9, 'wait'],
    [0.01, 1.7, 'early'],
    [0.01, 4.6, 'restart'],
    [2, 700, 'count'],
  ])('a window scaled by %s at %s s: %s', (scale, s, kind) => {
    expect(sampleTiming(PREV, at(s), sampleWindow(scale)).kind).toBe(kind);
  });

  it('scale 1 is the documented window', () => expect(sampleWindow(1)).toEqual(SAMPLE_WINDOW));

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('refuses scale %s', (scale) => {
    expect(() => sampleWindow(scale)).toThrow(/positive number/);
  });
});
