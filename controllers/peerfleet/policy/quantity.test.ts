import { describe, expect, it } from '@jest/globals';
import { formatMilli, formatQuantity, parseQuantity } from './quantity.js';

describe('parseQuantity', () => {
  it.each([
    ['2', 2000n],
    ['500m', 500n],
    ['0.5', 500n],
    ['.25', 250n],
    ['1.5Gi', 1610612736000n],
    ['16Gi', 17179869184000n],
    ['128Mi', 134217728000n],
    ['1Ki', 1024000n],
    ['1k', 1000000n],
    ['1M', 1000000000n],
    ['1e3', 1000000n],
    ['1E-3', 1n],
    ['100n', 1n],
    ['1u', 1n],
    ['0', 0n],
    [' 4 ', 4000n],
  ])('%s -> %s milli', (s, want) => {
    expect(parseQuantity(s)).toBe(want);
  });

  it.each([[''], [undefined], ['-1'], ['1.5.2'], ['1Gb'], ['G'], ['abc'], ['1e999'], ['1 Gi']])('%s is not a quantity', (s) => {
    expect(parseQuantity(s)).toBeUndefined();
  });

  it('rounds a fraction of a milli-unit up, as the API server does', () => {
    expect(parseQuantity('1.0001')).toBe(1001n);
  });
});

describe('formatting', () => {
  it.each([
    [1500n, '1.5'],
    [2000n, '2'],
    [1n, '0.001'],
  ])('%s milli reads %s', (m, want) => expect(formatMilli(m)).toBe(want));

  it('shows memory in Gi and GPUs as a count', () => {
    expect(formatQuantity('memory', parseQuantity('24Gi')!)).toBe('24Gi');
    expect(formatQuantity('nvidia.com/gpu', 2000n)).toBe('2');
  });
});
