// GitHub signs each webhook delivery: X-Hub-Signature-256 is "sha256=" and
// the hex HMAC-SHA256 of the raw body, keyed with the hook's secret. The
// body is checked exactly as it came, before it is parsed.
import { createHmac, timingSafeEqual } from 'node:crypto';

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;

/** The X-Hub-Signature-256 value GitHub sends for `body` signed with `secret`. */
export function signatureOf(body: Buffer, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** The header's digest, or undefined when it is missing or not "sha256=" and 64 lowercase hex digits. */
export function parseSignature(header: string | undefined): Buffer | undefined {
  const m = SIGNATURE.exec(header?.trim() ?? '');
  return m ? Buffer.from(m[1]!, 'hex') : undefined;
}

/** Whether `digest` (from parseSignature) is the body's HMAC with `secret`, compared in constant time. */
export function signedWith(digest: Buffer, body: Buffer, secret: string): boolean {
  const want = createHmac('sha256', secret).update(body).digest();
  return digest.length === want.length && timingSafeEqual(digest, want);
}

/** Whether the header is a valid signature of `body` with `secret`. */
export function verifySignature(header: string | undefined, body: Buffer, secret: string): boolean {
  const digest = parseSignature(header);
  return digest !== undefined && signedWith(digest, body, secret);
}
