// Splits the e2e files into shards of about equal length, so that `make test` can
// run its shards side by side, each against its own control plane (most e2e files
// spend their time waiting on timers, not on the CPU). Jest's own split hashes the
// paths and can put the three longest files on one side; this one deals the files
// out longest first to the shard with the least work so far, using the per-file
// times recorded in durations.json (a file not listed there counts as the median).
import Sequencer from '@jest/test-sequencer';
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const recorded = JSON.parse(readFileSync(new URL('./durations.json', import.meta.url), 'utf8'));

export function weigh(paths, seconds = recorded) {
  const known = Object.values(seconds).sort((a, b) => a - b);
  const median = known.length ? known[Math.floor(known.length / 2)] : 60;
  return paths.map((path) => ({ path, seconds: seconds[path] ?? median }));
}

export function deal(paths, count, seconds = recorded) {
  const shards = Array.from({ length: count }, () => ({ seconds: 0, paths: [] }));
  const files = weigh(paths, seconds).sort((a, b) => b.seconds - a.seconds || (a.path < b.path ? -1 : 1));
  for (const file of files) {
    const lightest = shards.reduce((best, s) => (s.seconds < best.seconds ? s : best));
    lightest.seconds += file.seconds;
    lightest.paths.push(file.path);
  }
  return shards;
}

export default class BalancedSequencer extends (Sequencer.default ?? Sequencer) {
  shard(tests, { shardIndex, shardCount }) {
    if (!tests.every((t) => t.context.config.displayName?.name === 'e2e')) return super.shard(tests, { shardIndex, shardCount });
    const rel = (t) => relative(t.context.config.rootDir, t.path);
    const mine = new Set(deal(tests.map(rel), shardCount)[shardIndex - 1].paths);
    return tests.filter((t) => mine.has(rel(t)));
  }

  // Longest first inside a shard too, so a shard never ends on a long file started late.
  sort(tests) {
    if (!tests.every((t) => t.context.config.displayName?.name === 'e2e')) return super.sort(tests);
    const rel = (t) => relative(t.context.config.rootDir, t.path);
    const time = new Map(weigh(tests.map(rel)).map((w) => [w.path, w.seconds]));
    return [...tests].sort((a, b) => time.get(rel(b)) - time.get(rel(a)));
  }
}
