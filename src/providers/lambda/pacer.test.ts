import { describe, it, expect } from '@jest/globals';
import { LaunchPacer, RequestSpacer } from './pacer.js';

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
    await Promise.all(['a', 'b', 'c', 'd', 'e'].map((n) => p.turn().then((t) => {
      t.sent();
      times.push([n, c.now()]);
      t.done();
    })));
    expect(times.map((x) => x[0])).toEqual(['a', 'b', 'c', 'd', 'e']);
    const gaps = times.slice(1).map((x, i) => x[1] - times[i]![1]);
    expect(gaps).toEqual([12_000, 12_000, 12_000, 12_000]);
  });

  it('lets the first caller go at once', async () => {
    const c = clock();
    const p = new LaunchPacer({ intervalMs: 12_000, now: c.now, sleep: c.sleep });
    const start = c.now();
    (await p.turn()).done();
    expect(c.now()).toBe(start);
  });

  it('puts a caller the API turned away at the head of the queue, and backs off', async () => {
    const c = clock();
    const p = new LaunchPacer({ intervalMs: 12_000, now: c.now, sleep: c.sleep });
    const first = await p.turn();
    first.sent();
    first.done();
    const t0 = c.now();
    p.backOff(30_000);
    const order: string[] = [];
    const take = (name: string) => (t: { sent(): void; done(): void }) => {
      t.sent();
      order.push(name);
      t.done();
    };
    await Promise.all([p.turn().then(take('waiting')), p.turn(undefined, true).then(take('retry'))]);
    expect(order).toEqual(['retry', 'waiting']);
    expect(c.now() - t0).toBe(30_000 + 12_000);
  });

  it('counts the interval from when the request was sent, not from when the turn was granted', async () => {
    const c = clock();
    const p = new LaunchPacer({ intervalMs: 12_000, now: c.now, sleep: c.sleep });
    const sentAt: number[] = [];
    const holder = async (listMs: number) => {
      const t = await p.turn();
      await c.sleep(listMs); // a fresh listing before the request goes out
      t.sent();
      sentAt.push(c.now());
      t.done();
    };
    await Promise.all([holder(900), holder(10)]);
    expect(sentAt[1]! - sentAt[0]!).toBeGreaterThanOrEqual(12_000);
  });

  it('drops a caller whose signal aborts while it waits', async () => {
    const p = new LaunchPacer({ intervalMs: 60_000 });
    const t = await p.turn();
    t.sent();
    t.done();
    const ac = new AbortController();
    const waiting = p.turn(ac.signal);
    expect(p.waiting).toBe(1);
    ac.abort(new Error('lease deleted'));
    await expect(waiting).rejects.toThrow('lease deleted');
    expect(p.waiting).toBe(0);
  });
});

describe('RequestSpacer', () => {
  it('starts the requests of one account at least the interval apart, in the order they asked', async () => {
    const spacer = new RequestSpacer(60);
    const started: number[] = [];
    const t0 = Date.now();
    await Promise.all([0, 1, 2, 3].map(async () => {
      await spacer.turn();
      started.push(Date.now() - t0);
    }));
    // A timer never fires early, so the n-th request starts no sooner than n intervals in (a busy machine may start it later).
    started.sort((a, b) => a - b);
    for (let i = 1; i < started.length; i++) expect(started[i]!).toBeGreaterThanOrEqual(i * 60 - 2);
  });

  it('gives up a wait when the caller cancels', async () => {
    const spacer = new RequestSpacer(10_000);
    await spacer.turn();
    const gone = new AbortController();
    const waiting = spacer.turn(gone.signal);
    gone.abort(new Error('withdrawn'));
    await expect(waiting).rejects.toThrow('withdrawn');
  });
});
