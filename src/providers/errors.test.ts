import { describe, it, expect } from '@jest/globals';
import { ignoreNotFound, isProviderError, isRetryable, ProviderError } from './errors.js';

describe('provider errors', () => {
  it('tells a provider error and its kind from other errors', () => {
    const err = new ProviderError('NotFound', 'gone');
    expect(isProviderError(err)).toBe(true);
    expect(isProviderError(err, 'NotFound')).toBe(true);
    expect(isProviderError(err, 'Timeout')).toBe(false);
    expect(isProviderError(new Error('gone'))).toBe(false);
  });

  it.each([
    ['InsufficientCapacity', true],
    ['RateLimited', true],
    ['Timeout', true],
    ['Unknown', true],
    ['NotFound', false],
    ['Unauthorized', false],
    ['InvalidTarget', false],
    ['InvalidRequest', false],
    ['OverPriceCap', false],
  ] as const)('counts %s as retryable: %s, unless the provider says otherwise', (kind, retryable) => {
    expect(isRetryable(new ProviderError(kind, 'x'))).toBe(retryable);
    expect(isRetryable(new ProviderError(kind, 'x', { retryable: !retryable }))).toBe(!retryable);
  });

  it('counts an error from outside a provider as transient', () => {
    expect(isRetryable(new Error('socket hang up'))).toBe(true);
  });

  it('turns NotFound into undefined and passes every other result and error on', async () => {
    expect(await ignoreNotFound(Promise.reject(new ProviderError('NotFound', 'gone')))).toBeUndefined();
    expect(await ignoreNotFound(Promise.resolve(3))).toBe(3);
    const other = new ProviderError('Unauthorized', 'bad key');
    await expect(ignoreNotFound(Promise.reject(other))).rejects.toBe(other);
  });
});
