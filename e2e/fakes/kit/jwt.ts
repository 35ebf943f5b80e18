// Checks an RS256 JWT the way Google's token endpoint and GitHub's App auth
// do before they look at the claims: well formed, RS256, signature valid for
// the key the emulator issued.
import { createVerify, type KeyObject } from 'node:crypto';

export interface VerifiedJwt {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
}

function decodePart(part: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The header and claims, when `jwt` is an RS256 JWS whose signature one of `keys` verifies; else why not. */
export function verifyJwt(jwt: string, keys: readonly KeyObject[]): VerifiedJwt | { error: string } {
  const parts = jwt.split('.');
  if (parts.length !== 3) return { error: 'not a JWT' };
  const [h, c, s] = parts as [string, string, string];
  const header = decodePart(h);
  const claims = decodePart(c);
  if (!header || !claims) return { error: 'not a JWT' };
  if (header.alg !== 'RS256') return { error: `alg ${String(header.alg)} is not RS256` };
  const signature = Buffer.from(s, 'base64url');
  for (const key of keys) {
    const v = createVerify('RSA-SHA256');
    v.update(`${h}.${c}`);
    if (v.verify(key, signature)) return { header, claims };
  }
  return { error: 'invalid signature' };
}

/** Seconds since the epoch. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000);
