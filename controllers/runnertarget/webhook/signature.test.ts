import { describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { parseSignature, signatureOf, verifySignature } from './signature.js';

// GitHub's own example (docs: "Validating webhook deliveries").
const DOC_SECRET = "It's a Secret to Everybody";
const DOC_BODY = Buffer.from('Hello, World!');
const DOC_SIGNATURE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

describe('X-Hub-Signature-256', () => {
  it("matches GitHub's documented example", () => {
    expect(signatureOf(DOC_BODY, DOC_SECRET)).toBe(DOC_SIGNATURE);
    expect(verifySignature(DOC_SIGNATURE, DOC_BODY, DOC_SECRET)).toBe(true);
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['without the sha256= prefix', DOC_SIGNATURE.slice(7)],
    ['sha1', `sha1=${createHmac('sha1', DOC_SECRET).update(DOC_BODY).digest('hex')}`],
    ['too short', DOC_SIGNATURE.slice(0, -2)],
    ['not hex', `sha256=${'z'.repeat(64)}`],
  ])('%s is refused', (_what, header) => {
    expect(parseSignature(header)).toBeUndefined();
    expect(verifySignature(header, DOC_BODY, DOC_SECRET)).toBe(false);
  });

  it('another secret, or one changed byte of the body, is refused', () => {
    expect(verifySignature(DOC_SIGNATURE, DOC_BODY, 'another secret')).toBe(false);
    expect(verifySignature(DOC_SIGNATURE, Buffer.from('Hello, World?'), DOC_SECRET)).toBe(false);
  });
});
