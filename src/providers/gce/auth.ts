// Google OAuth 2.0 access tokens from a service-account key (the JWT-bearer
// grant, RFC 7523, as google-auth-library does it): a JWT signed with the
// key's RSA private key is traded at the token endpoint for an access token,
// kept until shortly before it expires. The key and the tokens never appear
// in an error message.
import type { KeyObject } from 'node:crypto';
import { z } from 'zod';
import { ProviderError } from '../errors.js';
import { privateKeyFrom, signJwt } from '../jwt.js';
import { sanitize, sendRest } from '../rest.js';
import { TokenCache } from '../tokencache.js';

export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
export const COMPUTE_SCOPE = 'https://www.googleapis.com/auth/compute';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

const KeyFile = z.object({
  type: z.literal('service_account'),
  project_id: z.string().min(1),
  private_key_id: z.string().min(1),
  private_key: z.string().min(1),
  client_email: z.string().min(1),
});

export interface ServiceAccountKey {
  projectId: string;
  clientEmail: string;
  privateKeyId: string;
  privateKey: KeyObject;
}

/** Parses the key JSON Google issues; errors name the field that is wrong, never a value. */
export function parseServiceAccountKey(json: string): ServiceAccountKey {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error('the service-account key is not JSON; use the key file `gcloud iam service-accounts keys create` writes');
  }
  const parsed = KeyFile.safeParse(raw);
  if (!parsed.success) {
    const fields = [...new Set(parsed.error.issues.map((i) => i.path.join('.') || '(root)'))].join(', ');
    throw new Error(`the service-account key lacks or has a wrong ${fields}; use the key file \`gcloud iam service-accounts keys create\` writes`);
  }
  const k = parsed.data;
  return { projectId: k.project_id, clientEmail: k.client_email, privateKeyId: k.private_key_id, privateKey: privateKeyFrom(k.private_key, 'the service-account key private_key') };
}

export interface TokenSourceOptions {
  key: ServiceAccountKey;
  scopes: readonly string[];
  /** Default Google's token endpoint. */
  tokenUrl?: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export class GoogleTokenSource {
  private readonly cache = new TokenCache((signal) => this.fetchToken(signal));
  private readonly tokenUrl: string;

  constructor(private readonly opts: TokenSourceOptions) {
    this.tokenUrl = opts.tokenUrl ?? GOOGLE_TOKEN_URL;
  }

  /** A valid access token; one token request at a time however many callers wait. */
  token(signal?: AbortSignal): Promise<string> {
    return this.cache.token(signal);
  }

  /** Forgets the token (after the API refused it). */
  invalidate(): void {
    this.cache.invalidate();
  }

  private async fetchToken(signal?: AbortSignal): Promise<{ token: string; ttlMs: number }> {
    const { key } = this.opts;
    const now = Math.floor(Date.now() / 1000);
    const assertion = signJwt({ iss: key.clientEmail, scope: this.opts.scopes.join(' '), aud: this.tokenUrl, iat: now, exp: now + 3600 }, key.privateKey, { kid: key.privateKeyId });
    const what = `Google token for ${key.clientEmail}`;
    const answer = await sendRest({
      method: 'POST',
      url: this.tokenUrl,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: JWT_BEARER, assertion }).toString(),
      what,
      timeoutMs: this.opts.timeoutMs ?? 30_000,
      signal,
      fetch: this.opts.fetch,
    });
    const body = (answer.json ?? {}) as { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown };
    if (answer.status !== 200 || typeof body.access_token !== 'string') {
      const why = [body.error, body.error_description].filter((x) => typeof x === 'string').join(': ') || `HTTP ${answer.status}`;
      const kind = answer.status === 400 || answer.status === 401 || answer.status === 403 ? 'Unauthorized' : 'Unknown';
      throw new ProviderError(kind, `${what}: refused (${sanitize(why)}); check the service-account key Secret and that the key is not disabled`, kind === 'Unknown' ? {} : { retryable: false });
    }
    return { token: body.access_token, ttlMs: (typeof body.expires_in === 'number' ? body.expires_in : 3600) * 1000 };
  }
}
