// RS256 JSON Web Tokens signed with node:crypto: the assertion of Google's
// OAuth 2.0 JWT-bearer grant and the GitHub App JWT. The private key never
// leaves this function, and no error from here quotes it.
import { createPrivateKey, createSign, type KeyObject } from 'node:crypto';

function base64url(data: string | Buffer): string {
  return Buffer.from(data).toString('base64url');
}

/** Parses a PEM private key (PKCS#1 or PKCS#8); a bad one throws an error that names `what`, never the key. */
export function privateKeyFrom(pem: string, what: string): KeyObject {
  try {
    const key = createPrivateKey(pem);
    if (key.asymmetricKeyType !== 'rsa') throw new Error('not RSA');
    return key;
  } catch {
    throw new Error(`${what} is not a PEM RSA private key`);
  }
}

/** A compact JWS: base64url(header).base64url(claims).base64url(RS256 signature). */
export function signJwt(claims: Record<string, unknown>, key: KeyObject, header: Record<string, unknown> = {}): string {
  const head = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', ...header }));
  const body = base64url(JSON.stringify(claims));
  const signer = createSign('RSA-SHA256');
  signer.update(`${head}.${body}`);
  return `${head}.${body}.${base64url(signer.sign(key))}`;
}
