import { describe, it, expect } from '@jest/globals';
import { LaunchPacer } from './pacer.js';

// A virtual clock: sleeping advances it, so the test measures spacing exactly.
function clock() {
  let now = 1_000_000;
  return {
    now: () => now,
    // Time moves only after everything already resolved has run.
    sleep: async (ms: number) => {
      await new Promise((r) => setImmediate(r));
      now += ms;
    },
  };
}

describe('LaunchPacer', () => {
  it('spaces turns by the interval, in arrival order', async () => {
    const c = clock();
    const p = new LaunchPacer({ intervalMs: 12_000, now: c.now, sleep: c.sleep });
    const times: [string, number][] = [];
    await Promise.all(['a', 'b', 'c', 'd', 'e'].map((n) => p.turn().then(() => times.push([n, c.now()]))));
    expect(times.map((x) => x[0])).toEqual(['a', 'b', 'c', 'd', 'e']);
    const gaps = times.slice(1).map((x, i) => x[1] - times[i]![1]);
    expect(gaps).toEqual([12_000, 12_000, 12_000, 12_000]);
  });

  it('lets the first caller go at once', async () => {
    const c = clock();
    const p = new LaunchPacer({ intervalMs: 12_000, now: c.now, sleep: c.sleep });
    const start = c.now();
    await p.turn();
    expect(c.now()).toBe(start);
  });

  it('puts a caller the API turned away at the head of the queue, and backs off', async () => {
    const c = clock();
    const p = new LaunchPacer({ intervalMs: 12_000, now: c.now, sleep: c.sleep });
    await p.turn();
    const t0 = c.now();
    p.backOff(30_000);
    const order: string[] = [];
    await Promise.all([p.turn().then(() => order.push('waiting')), p.turn(undefined, true).then(() => order.push('retry'))]);
    expect(order).toEqual(['retry', 'waiting']);
    expect(c.now() - t0).toBe(30_000 + 12_000);
  });

  it('drops a caller whose signal aborts while it waits', async () => {
    const p = new LaunchPacer({ intervalMs: 60_000 });
    await p.turn();
    const ac = new AbortController();
    const waiting = p.turn(ac.signal);
    expect(p.waiting).toBe(1);
    ac.abort(new Error('lease deleted'));
    await expect(waiting).rejects.toThrow('lease deleted');
    expect(p.waiting).toBe(0);
  });
});
