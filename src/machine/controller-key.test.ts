import { describe, expect, it } from '@jest/globals';
import { KeptKeys } from './controller-key.js';

describe('KeptKeys', () => {
  it('reads a key once per id and hands every later ask the same one', async () => {
    const reads: string[] = [];
    const keys = new KeptKeys(async (id) => {
      reads.push(id);
      return { privateKey: `priv-${id}`, publicKey: `pub-${id}` };
    });
    const [a, b] = await Promise.all([keys.get('a'), keys.get('a')]);
    expect(a).toBe(b);
    expect((await keys.get()).publicKey).toBe('pub-');
    expect(reads).toEqual(['a', '']);
  });

  it('forgets a failed read, so the next ask reads again', async () => {
    let calls = 0;
    const keys = new KeptKeys(async () => {
      if (++calls === 1) throw new Error('apiserver down');
      return { privateKey: 'p', publicKey: 'q' };
    });
    await expect(keys.get()).rejects.toThrow('apiserver down');
    await expect(keys.get()).resolves.toEqual({ privateKey: 'p', publicKey: 'q' });
    expect(calls).toBe(2);
  });

  it('reads again after forget', async () => {
    let calls = 0;
    const keys = new KeptKeys(async () => ({ privateKey: String(++calls), publicKey: '' }));
    expect((await keys.get('t')).privateKey).toBe('1');
    keys.forget('t');
    expect((await keys.get('t')).privateKey).toBe('2');
  });
});
