import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { WorkQueue, runWorkers } from './workqueue.js';

beforeEach(() => {
  jest.useFakeTimers({ now: 0 });
});
afterEach(() => {
  jest.useRealTimers();
});

const settle = () => jest.advanceTimersByTimeAsync(0);

describe('WorkQueue', () => {
  it('reports unfinished work and the longest-running key like client-go', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    expect(await q.get()).toBe('a');
    jest.advanceTimersByTime(3000);
    expect(await q.get()).toBe('b');
    jest.advanceTimersByTime(1000);
    expect(q.unfinishedWorkSeconds()).toBe(5);
    expect(q.longestRunningProcessorSeconds()).toBe(4);
    q.done('a');
    expect(q.unfinishedWorkSeconds()).toBe(1);
    expect(q.longestRunningProcessorSeconds()).toBe(1);
    q.done('b');
    expect(q.unfinishedWorkSeconds()).toBe(0);
    expect(q.longestRunningProcessorSeconds()).toBe(0);
  });

  it('queues a key once however often it is added', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    q.add('a');
    q.add('a');
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(q.len()).toBe(0);
  });

  it('never hands a key in process to a second worker; an add meanwhile brings it back after done', async () => {
    const q = new WorkQueue();
    q.add('a');
    expect(await q.get()).toBe('a');

    q.add('a');
    q.add('a');
    expect(q.len()).toBe(0);
    let second: string | undefined;
    void q.get().then((k) => (second = k));
    await settle();
    expect(second).toBeUndefined();

    q.done('a');
    await settle();
    expect(second).toBe('a');
    q.done('a');
    expect(q.len()).toBe(0);
  });

  it('hands a key added to an idle queue straight to a waiting worker', async () => {
    const q = new WorkQueue();
    const next = q.get();
    q.add('x');
    expect(await next).toBe('x');
    q.add('x');
    expect(q.len()).toBe(0);
    q.done('x');
    expect(q.len()).toBe(1);
  });

  it('backs off 5 ms doubling to a 1000 s cap, and forget starts over', async () => {
    const q = new WorkQueue();
    const expected = [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10_240, 20_480, 40_960, 81_920, 163_840, 327_680, 655_360, 1_000_000, 1_000_000];
    for (const [i, delay] of expected.entries()) {
      q.addRateLimited('k');
      expect(q.numRequeues('k')).toBe(i + 1);
      await jest.advanceTimersByTimeAsync(delay - 1);
      expect(q.len()).toBe(0);
      await jest.advanceTimersByTimeAsync(1);
      expect(q.len()).toBe(1);
      expect(await q.get()).toBe('k');
      q.done('k');
    }

    q.forget('k');
    expect(q.numRequeues('k')).toBe(0);
    q.addRateLimited('k');
    await jest.advanceTimersByTimeAsync(4);
    expect(q.len()).toBe(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(q.len()).toBe(1);
  });

  it('keeps only the earliest requeue-after timer for a key', async () => {
    const q = new WorkQueue();
    q.addAfter('k', 100);
    q.addAfter('k', 50);
    q.addAfter('k', 80);
    expect(jest.getTimerCount()).toBe(1);
    await jest.advanceTimersByTimeAsync(49);
    expect(q.len()).toBe(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('k');
    q.done('k');
    await jest.advanceTimersByTimeAsync(100);
    expect(q.len()).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('adds at once for a non-positive delay', () => {
    const q = new WorkQueue();
    q.addAfter('k', 0);
    expect(q.len()).toBe(1);
  });

  it('shutDown stops handing out keys, wakes waiters and cancels timers', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.shutDown();
    expect(await waiting).toBeUndefined();
    q.add('a');
    q.addAfter('b', 10);
    expect(q.len()).toBe(0);
    expect(await q.get()).toBeUndefined();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('shutDownWithDrain waits for keys in flight', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    expect(await q.get()).toBe('a');
    let drained = false;
    void q.shutDownWithDrain().then(() => (drained = true));
    await settle();
    expect(drained).toBe(false);
    expect(await q.get()).toBeUndefined();
    q.done('a');
    await settle();
    expect(drained).toBe(true);
  });
});

describe('runWorkers', () => {
  it('never runs more than N reconciles at once, and one key never twice at once', async () => {
    const q = new WorkQueue();
    const inFlight = new Set<string>();
    let max = 0;
    let runs = 0;
    let overlapped = false;
    const workers = runWorkers(q, 3, async (key) => {
      if (inFlight.has(key)) overlapped = true;
      inFlight.add(key);
      max = Math.max(max, inFlight.size);
      runs++;
      await new Promise((r) => setTimeout(r, 10));
      inFlight.delete(key);
    });
    for (let i = 0; i < 10; i++) q.add(`k${i}`);
    await jest.advanceTimersByTimeAsync(1);
    expect(inFlight.size).toBe(3);
    q.add('k0'); // in flight: comes back once after it finishes
    await jest.advanceTimersByTimeAsync(100);
    expect(max).toBe(3);
    expect(runs).toBe(11);
    expect(overlapped).toBe(false);
    q.shutDown();
    await workers;
  });

  it('backs a failing key off, forgets it on success and honours requeueAfter', async () => {
    const q = new WorkQueue();
    const calls: number[] = [];
    let failuresLeft = 2;
    const workers = runWorkers(q, 1, async () => {
      calls.push(Date.now());
      if (failuresLeft-- > 0) throw new Error('provider said no');
      return calls.length === 3 ? { requeueAfter: 1000 } : undefined;
    });
    q.add('k');
    await jest.advanceTimersByTimeAsync(0);
    expect(q.numRequeues('k')).toBe(1);
    await jest.advanceTimersByTimeAsync(15);
    expect(calls).toEqual([0, 5, 15]);
    expect(q.numRequeues('k')).toBe(0);
    await jest.advanceTimersByTimeAsync(1000);
    expect(calls).toEqual([0, 5, 15, 1015]);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(4);
    q.shutDown();
    await workers;
  });

  it('resolves after a drained shutdown once the reconcile in flight ends', async () => {
    const q = new WorkQueue();
    let finished = false;
    let stopped = false;
    const workers = runWorkers(q, 2, async () => {
      await new Promise((r) => setTimeout(r, 50));
      finished = true;
    }).then(() => (stopped = true));
    q.add('a');
    await jest.advanceTimersByTimeAsync(10);
    const drain = q.shutDownWithDrain();
    await jest.advanceTimersByTimeAsync(10);
    expect(stopped).toBe(false);
    await jest.advanceTimersByTimeAsync(40);
    await drain;
    await workers;
    expect(finished).toBe(true);
    expect(stopped).toBe(true);
  });
});

describe('runWorkers and the event loop', () => {
  it('answers a health request while a long queue of synchronous reconciles drains', async () => {
    jest.useRealTimers();
    const { serveHealth, boundPort } = await import('./health.js');
    const { Registry } = await import('prom-client');
    const { get } = await import('node:http');
    const server = await serveHealth('127.0.0.1:0', { healthy: () => true, ready: () => true }, new Registry());
    try {
      const q = new WorkQueue();
      const total = 2000;
      for (let i = 0; i < total; i++) q.add(`k${i}`);
      let done = 0;
      let answeredWithLeft: number | undefined;
      let asked = false;
      const drained = runWorkers(q, 4, async () => {
        // About a millisecond of work with no I/O in it: it settles in microtasks.
        const until = performance.now() + 1;
        while (performance.now() < until);
        if (++done === 10 && !asked) {
          asked = true;
          get(`http://127.0.0.1:${boundPort(server)}/healthz`, (res) => {
            res.resume();
            res.on('end', () => {
              answeredWithLeft = total - done;
            });
          });
        }
        if (done === total) q.shutDown();
      });
      await drained;
      expect(asked).toBe(true);
      // Answered while keys were still waiting, not once the queue had drained.
      expect(answeredWithLeft).toBeGreaterThan(0);
    } finally {
      await new Promise((r) => server.close(r));
    }
  }, 60_000);
});
