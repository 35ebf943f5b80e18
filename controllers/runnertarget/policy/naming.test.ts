import { describe, expect, it } from '@jest/globals';
import { hostNames, isPoolRunner, namePrefix } from './naming.js';

describe('namePrefix', () => {
  it.each<[string, string | undefined, string]>([
    ['pool', undefined, 'pool'],
    ['oxidex.runners', undefined, 'oxidex-runners'],
    ['9pool', undefined, 'pool'],
    ['123', undefined, 'runner'],
    ['a'.repeat(60), undefined, 'a'.repeat(40)],
    ['pool', 'oxidex-runners', 'oxidex-runners'],
  ])('%s (namePrefix %s) -> %s', (name, configured, want) => expect(namePrefix(name, configured)).toBe(want));
});

describe('hostNames', () => {
  it('valid, distinct, stable for a seed, and never taken', () => {
    const names = hostNames('pool', 'check-1', 5, new Set());
    expect(new Set(names).size).toBe(5);
    for (const n of names) expect(n).toMatch(/^pool-[0-9a-f]{8}$/);
    expect(hostNames('pool', 'check-1', 5, new Set())).toEqual(names);
    expect(hostNames('pool', 'check-1', 2, new Set([names[0]!]))).toEqual([names[1], names[2]]);
    expect(hostNames('pool', 'check-2', 1, new Set())[0]).not.toBe(names[0]);
  });
});

describe('isPoolRunner', () => {
  it.each<[string, string, boolean]>([
    ['pool-0a1b2c3d', 'pool', true],
    ['pool-0A1B2C3D', 'pool', false],
    ['pool-0a1b2c3', 'pool', false],
    ['pool-big-0a1b2c3d', 'pool', false],
    ['pool-big-0a1b2c3d', 'pool-big', true],
    ['other-0a1b2c3d', 'pool', false],
    ['laptop-runner', 'pool', false],
  ])('%s of %s: %s', (name, prefix, want) => expect(isPoolRunner(name, prefix)).toBe(want));

  it('every name hostNames makes is a pool runner', () => {
    for (const n of hostNames('pool', 'seed', 20, new Set())) expect(isPoolRunner(n, 'pool')).toBe(true);
  });
});
