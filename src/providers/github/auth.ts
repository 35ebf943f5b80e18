// The token GitHub calls carry: a token from a Secret as is, or a GitHub App
// installation token, made from an App JWT (RS256 with the App's private
// key) and kept until shortly before it expires. No token or key
// reaches an error message.
import type { KeyObject } from 'node:crypto';
import { ProviderError } from '../errors.js';
import { privateKeyFrom, signJwt } from '../jwt.js';
import { sanitize, sendRest } from '../rest.js';
import { TokenCache } from '../tokencache.js';

export type GitHubCredentials = { token: string } | { appId: string | number; installationId: string | number; privateKey: string };

export interface TokenSource {
  token(signal?: AbortSignal): Promise<string>;
  /** Forgets a token GitHub refused; false when there is no other to get. */
  invalidate(): boolean;
}

export function tokenSource(creds: GitHubCredentials, api: string, headers: Record<string, string>, timeoutMs: number, fetchImpl?: typeof fetch): TokenSource {
  if ('token' in creds) return { token: async () => creds.token, invalidate: () => false };
  return new InstallationTokens(creds.appId, creds.installationId, privateKeyFrom(creds.privateKey, 'the GitHub App private key'), api, headers, timeoutMs, fetchImpl);
}

class InstallationTokens implements TokenSource {
  private readonly cache = new TokenCache((signal) => this.fetchToken(signal));

  constructor(
    private readonly appId: string | number,
    private readonly installationId: string | number,
    private readonly key: KeyObject,
    private readonly api: string,
    private readonly headers: Record<string, string>,
    private readonly timeoutMs: number,
    private readonly fetchImpl?: typeof fetch,
  ) {}

  token(signal?: AbortSignal): Promise<string> {
    return this.cache.token(signal);
  }

  invalidate(): boolean {
    this.cache.invalidate();
    return true;
  }

  private async fetchToken(signal?: AbortSignal): Promise<{ token: string; ttlMs: number }> {
    const now = Math.floor(Date.now() / 1000);
    // iat a minute back against clock drift; GitHub refuses exp more than 10 minutes after iat.
    const jwt = signJwt({ iat: now - 60, exp: now + 540, iss: String(this.appId) }, this.key);
    const what = `GitHub App ${this.appId} installation ${this.installationId} token`;
    const answer = await sendRest({
      method: 'POST',
      url: `${this.api}/app/installations/${encodeURIComponent(String(this.installationId))}/access_tokens`,
      headers: { ...this.headers, authorization: `Bearer ${jwt}` },
      what,
      timeoutMs: this.timeoutMs,
      signal,
      fetch: this.fetchImpl,
    });
    const body = (answer.json ?? {}) as { token?: unknown; expires_at?: unknown; message?: unknown };
    if (answer.status !== 201 || typeof body.token !== 'string') {
      const why = typeof body.message === 'string' ? body.message : `HTTP ${answer.status}`;
      const auth = answer.status === 401 || answer.status === 403 || answer.status === 404;
      throw new ProviderError(auth ? 'Unauthorized' : 'Unknown', `${what}: refused (HTTP ${answer.status}: ${sanitize(why)}); check the App ID, installation ID and private key Secret`, auth ? { retryable: false } : {});
    }
    const expires = typeof body.expires_at === 'string' ? Date.parse(body.expires_at) : NaN;
    return { token: body.token, ttlMs: Number.isNaN(expires) ? 3_600_000 : expires - Date.now() };
  }
}
