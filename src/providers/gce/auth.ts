// Google OAuth 2.0 access tokens, kept until shortly before they expire:
// from a service-account key (the JWT-bearer grant, RFC 7523, as
// google-auth-library does it: a JWT signed with the key's RSA private key is
// traded at the token endpoint for an access token), or from the metadata
// server (the identity the controller runs as). The key and the tokens never
// appear in an error message.
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

export class GoogleTokenSource implements AccessTokens {
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

/** Where access tokens come from: a service-account key, or the metadata server. */
export interface AccessTokens {
  token(signal?: AbortSignal): Promise<string>;
  /** Forgets the token (after the API refused it). */
  invalidate(): void;
}

export const METADATA_HOST = 'metadata.google.internal';
const METADATA_TOKEN_PATH = '/instance/service-accounts/default/token';

/**
 * The metadata server's base URL, read as Google's client libraries read it:
 * GCE_METADATA_HOST (host[:port], or a URL), else metadata.google.internal.
 */
export function metadataBaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  const host = env.GCE_METADATA_HOST?.trim() || METADATA_HOST;
  return `${(/^https?:\/\//.test(host) ? host : `http://${host}`).replace(/\/+$/, '')}/computeMetadata/v1`;
}

export interface MetadataTokenOptions {
  /** Default metadataBaseUrl(). */
  baseUrl?: string;
  /** Default 10000. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

const USE_A_KEY = 'set spec.gce.credentialsSecretRef or run the controller with a GCE identity (GKE Workload Identity, or the service account of its VM)';

/**
 * Access tokens of the identity the process runs as on Compute Engine or GKE
 * (Workload Identity): the metadata server's token of the default service
 * account, as google-auth-library gets it. Only an answer that carries
 * `Metadata-Flavor: Google` is believed, so that whatever else answers at
 * that name cannot hand the controller a token of its choosing.
 */
export class MetadataTokenSource implements AccessTokens {
  private readonly cache = new TokenCache((signal) => this.fetchToken(signal));
  readonly baseUrl: string;

  constructor(private readonly opts: MetadataTokenOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? metadataBaseUrl()).replace(/\/+$/, '');
  }

  token(signal?: AbortSignal): Promise<string> {
    return this.cache.token(signal);
  }

  invalidate(): void {
    this.cache.invalidate();
  }

  private async fetchToken(signal?: AbortSignal): Promise<{ token: string; ttlMs: number }> {
    const at = `${this.baseUrl}${METADATA_TOKEN_PATH}`;
    let answer;
    try {
      answer = await sendRest({ method: 'GET', url: at, headers: { 'metadata-flavor': 'Google' }, what: `metadata server ${this.baseUrl}`, timeoutMs: this.opts.timeoutMs ?? 10_000, signal, fetch: this.opts.fetch });
    } catch (err) {
      throw new ProviderError('Unauthorized', `no credentialsSecretRef and no metadata server reachable at ${this.baseUrl} (${sanitize((err as Error).message)}): ${USE_A_KEY}`, { retryable: true, cause: err });
    }
    if (answer.headers.get('metadata-flavor') !== 'Google') {
      throw new ProviderError('Unauthorized', `no credentialsSecretRef, and what answered at ${this.baseUrl} (HTTP ${answer.status}) is not a metadata server (no Metadata-Flavor: Google): ${USE_A_KEY}`, { retryable: false });
    }
    const body = (answer.json ?? {}) as { access_token?: unknown; expires_in?: unknown };
    if (answer.status === 404) {
      throw new ProviderError('Unauthorized', `no credentialsSecretRef, and the metadata server at ${this.baseUrl} has no service account for the controller: ${USE_A_KEY}`, { retryable: false });
    }
    if (answer.status !== 200 || typeof body.access_token !== 'string') {
      throw new ProviderError('Unauthorized', `no credentialsSecretRef, and the metadata server at ${this.baseUrl} gave no token (HTTP ${answer.status}): ${USE_A_KEY}`, { retryable: answer.status >= 500 });
    }
    return { token: body.access_token, ttlMs: (typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 3600) * 1000 };
  }
}
