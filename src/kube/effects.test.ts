import { describe, expect, it } from '@jest/globals';
import { EffectRunner } from './effects.js';

/** An effect the test ends by hand; it ends early, as cancelled, when its signal aborts. */
function gate<R>() {
  let finish!: (r: R) => void;
  const ended = new Promise<R>((r) => (finish = r));
  const run = (cancelled: R) => (signal: AbortSignal) =>
    new Promise<R>((resolve) => {
      signal.addEventListener('abort', () => resolve(cancelled), { once: true });
      void ended.then(resolve);
    });
  return { finish, run };
}

describe('EffectRunner', () => {
  it('runs one effect per owner, keeps its result until taken, and re-enqueues on its end', async () => {
    const counts: [string, number][] = [];
    const runner = new EffectRunner<string>({ onCount: (kind, n) => counts.push([kind, n]) });
    const g = gate<string>();
    const settled: string[] = [];
    expect(runner.start('uid-1', 'acquire/1', g.run('cancelled'), () => settled.push('uid-1'))).toBe(true);
    expect(runner.get('uid-1')).toEqual({ state: 'running', id: 'acquire/1' });
    // Never two at once for one owner, whatever the id.
    expect(runner.start('uid-1', 'release/1', async () => 'r', () => {})).toBe(false);
    expect(runner.inFlight('acquire')).toBe(1);
    g.finish('machine');
    await runner.idle();
    expect(settled).toEqual(['uid-1']);
    expect(runner.get('uid-1')).toEqual({ state: 'done', id: 'acquire/1', result: 'machine' });
    // A result waiting to be taken blocks the next effect: it must be decided on first.
    expect(runner.start('uid-1', 'release/1', async () => 'r', () => {})).toBe(false);
    expect(runner.take('uid-1')).toEqual({ id: 'acquire/1', result: 'machine' });
    expect(runner.get('uid-1')).toBeUndefined();
    expect(runner.start('uid-1', 'release/1', async () => 'released', () => {})).toBe(true);
    await runner.idle();
    expect(runner.take('uid-1')?.result).toBe('released');
    expect(counts).toEqual([['acquire', 1], ['acquire', 0], ['release', 1], ['release', 0]]);
  });

  it('cancel aborts the running effect, whose result still comes back', async () => {
    const runner = new EffectRunner<string>();
    const g = gate<string>();
    let settled = 0;
    runner.start('uid', 'acquire/1', g.run('withdrawn'), () => settled++);
    runner.cancel('uid');
    await runner.idle();
    expect(settled).toBe(1);
    expect(runner.get('uid')).toMatchObject({ state: 'done', result: 'withdrawn' });
  });

  it('forget drops a result and cancels what runs', async () => {
    const runner = new EffectRunner<string>();
    runner.start('a', 'check/1', async () => 'seen', () => {});
    await runner.idle();
    runner.forget('a');
    expect(runner.get('a')).toBeUndefined();
  });

  it('an effect that throws leaves no result and frees the owner', async () => {
    const runner = new EffectRunner<string>();
    let settled = 0;
    runner.start('a', 'check/1', async () => {
      throw new Error('bug');
    }, () => settled++);
    await runner.idle();
    expect(settled).toBe(1);
    expect(runner.get('a')).toBeUndefined();
    expect(runner.start('a', 'check/2', async () => 'ok', () => {})).toBe(true);
  });

  it('drain refuses new effects, lets running ones finish within the grace, then cancels the rest', async () => {
    const runner = new EffectRunner<string>();
    const quick = gate<string>();
    const stuck = gate<string>();
    runner.start('quick', 'acquire/1', quick.run('cancelled'), () => {});
    runner.start('stuck', 'acquire/1', stuck.run('cancelled'), () => {});
    const drained = runner.drain(300);
    expect(runner.start('late', 'acquire/1', async () => 'x', () => {})).toBe(false);
    quick.finish('machine');
    await drained;
    expect(runner.get('quick')).toMatchObject({ result: 'machine' });
    expect(runner.get('stuck')).toMatchObject({ result: 'cancelled' });
    expect(runner.inFlight()).toBe(0);
  });
});
