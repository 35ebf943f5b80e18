import { describe, expect, it } from '@jest/globals';
import { errorForStatus, errorForTransport, isPeerQueueError } from './errors.js';

describe('peer queue errors', () => {
  it.each([
    [401, 'Unauthorized', undefined],
    [403, 'Forbidden', undefined],
    [404, 'NotFound', undefined],
    [409, 'Conflict', undefined],
    [422, 'Invalid', undefined],
    [429, 'Unreachable', 'infra_down'],
    [503, 'Unreachable', 'infra_down'],
    [400, 'Unknown', undefined],
  ])('HTTP %s is %s', (code, kind, failureClass) => {
    const err = errorForStatus(code, 'm');
    expect(isPeerQueueError(err, kind as never)).toBe(true);
    expect(err.failureClass).toBe(failureClass);
  });

  it.each([
    ['ECONNREFUSED', 'infra_down'],
    ['ETIMEDOUT', 'infra_down'],
    ['ECONNRESET', 'infra_down'],
    [undefined, 'infra_down'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'config'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'config'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'config'],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'config'],
    ['ENOTFOUND', 'config'],
    ['ERR_INVALID_URL', 'config'],
  ])('transport %s is %s', (code, failureClass) => {
    const err = errorForTransport(code, 'm');
    expect(err.kind).toBe('Unreachable');
    expect(err.failureClass).toBe(failureClass);
  });

  it('isPeerQueueError refuses other errors', () => {
    expect(isPeerQueueError(new Error('x'))).toBe(false);
  });
});
