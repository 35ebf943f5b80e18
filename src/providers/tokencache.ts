// An access token kept until shortly before it expires, fetched once however
// many callers wait for it (Google OAuth tokens, GitHub installation tokens).

/** A token is renewed this long before it expires, or at half its life when that is shorter. */
const RENEW_BEFORE_MS = 5 * 60_000;

export class TokenCache {
  private cached: { token: string; renewAt: number } | undefined;
  private pending: Promise<string> | undefined;

  /** `fetchToken` gets a new token and says how long it lives. */
  constructor(private readonly fetchToken: (signal?: AbortSignal) => Promise<{ token: string; ttlMs: number }>) {}

  async token(signal?: AbortSignal): Promise<string> {
    if (this.cached && Date.now() < this.cached.renewAt) return this.cached.token;
    this.pending ??= this.fetchToken(signal)
      .then(({ token, ttlMs }) => {
        this.cached = { token, renewAt: Date.now() + Math.max(ttlMs - RENEW_BEFORE_MS, ttlMs / 2) };
        return token;
      })
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }

  /** Forgets the token (after the API refused it). */
  invalidate(): void {
    this.cached = undefined;
  }
}
