import { deal } from './sequencer.mjs';

describe('deal: e2e files split into shards of about equal recorded time', () => {
  const times = { 'a.test.ts': 300, 'b.test.ts': 250, 'c.test.ts': 100, 'd.test.ts': 60, 'e.test.ts': 40 };

  it.each([
    // Hashing could put a and b together (550 s vs 200 s); dealt longest first they part.
    { count: 2, paths: Object.keys(times), want: [['a.test.ts', 'd.test.ts'], ['b.test.ts', 'c.test.ts', 'e.test.ts']], seconds: [360, 390] },
    { count: 1, paths: ['c.test.ts', 'a.test.ts'], want: [['a.test.ts', 'c.test.ts']], seconds: [400] },
    { count: 3, paths: ['a.test.ts', 'b.test.ts'], want: [['a.test.ts'], ['b.test.ts'], []], seconds: [300, 250, 0] },
  ])('$count shards of $paths', ({ count, paths, want, seconds }) => {
    const shards = deal(paths, count, times);
    expect(shards.map((s) => s.paths)).toEqual(want);
    expect(shards.map((s) => s.seconds)).toEqual(seconds);
  });

  it('counts a file with no recorded time as the median, and puts every file in exactly one shard', () => {
    const paths = [...Object.keys(times), 'new.test.ts'];
    const shards = deal(paths, 2, times);
    expect(shards.flatMap((s) => s.paths).sort()).toEqual([...paths].sort());
    expect(shards.reduce((n, s) => n + s.seconds, 0)).toBe(300 + 250 + 100 + 60 + 40 + 100);
  });

  it('gives the same split for the same files in any order', () => {
    const paths = Object.keys(times);
    expect(deal([...paths].reverse(), 2, times)).toEqual(deal(paths, 2, times));
  });
});
