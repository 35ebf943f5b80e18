import { describe, it, expect, jest, afterEach } from '@jest/globals';
import { ProgressThrottle, progressLine } from './progress.js';

afterEach(() => {
  jest.useRealTimers();
});

describe('progressLine', () => {
  it('keeps a plain line', () => {
    expect(progressLine('booting instance i-123 in us-east-1')).toBe('booting instance i-123 in us-east-1');
  });

  it('turns control characters and runs of spaces into one space', () => {
    expect(progressLine('\x1b[32mok\x1b[0m\t\tdone\r')).toBe('[32mok [0m done');
    expect(progressLine('a\u2028b\u0085c')).toBe('a b c');
    expect(progressLine('   ')).toBe('');
  });

  it('caps a long line', () => {
    const out = progressLine('x'.repeat(1000));
    expect(out).toHaveLength(256);
    expect(out.endsWith('…')).toBe(true);
  });
});

describe('ProgressThrottle', () => {
  const setup = (writeMs = 0) => {
    jest.useFakeTimers({ now: 0 });
    const written: Array<{ line: string; at: number }> = [];
    const t = new ProgressThrottle(2000, async (line) => {
      written.push({ line, at: Date.now() });
      if (writeMs) await new Promise((r) => setTimeout(r, writeMs));
    });
    return { t, written };
  };

  it('writes nothing for an acquire that ends within the first interval', async () => {
    const { t, written } = setup();
    t.push('one');
    await jest.advanceTimersByTimeAsync(1500);
    t.push('two');
    await t.stop();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(written).toEqual([]);
  });

  it('writes the latest line at most once per interval', async () => {
    const { t, written } = setup();
    for (let i = 0; i < 100; i++) {
      t.push(`line ${i}`);
      await jest.advanceTimersByTimeAsync(50);
    }
    // 100 lines over 5 s: writes at 2 s and 4 s, each with the newest line then.
    expect(written.map((w) => w.at)).toEqual([2000, 4000]);
    expect(written.map((w) => w.line)).toEqual(['line 39', 'line 79']);
    await jest.advanceTimersByTimeAsync(2000);
    expect(written.map((w) => w.line)).toEqual(['line 39', 'line 79', 'line 99']);
    await t.stop();
  });

  it('never pushes a second write while one is in flight, and stop waits for it', async () => {
    const { t, written } = setup(5000);
    t.push('a');
    await jest.advanceTimersByTimeAsync(2000);
    expect(written.map((w) => w.line)).toEqual(['a']);
    t.push('b');
    await jest.advanceTimersByTimeAsync(3000);
    expect(written).toHaveLength(1);
    let stopped = false;
    const done = t.stop().then(() => (stopped = true));
    await jest.advanceTimersByTimeAsync(1000);
    expect(stopped).toBe(false);
    await jest.advanceTimersByTimeAsync(1000);
    await done;
    expect(written.map((w) => w.line)).toEqual(['a']);
  });

  it('does not throw when a write fails, and keeps writing later lines', async () => {
    jest.useFakeTimers({ now: 0 });
    const lines: string[] = [];
    const t = new ProgressThrottle(2000, async (line) => {
      lines.push(line);
      throw new Error('409');
    });
    t.push('a');
    await jest.advanceTimersByTimeAsync(2000);
    t.push('b');
    await jest.advanceTimersByTimeAsync(2000);
    expect(lines).toEqual(['a', 'b']);
    await t.stop();
  });
});
