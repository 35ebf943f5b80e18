// GitHub's rate limits: the primary limit per caller per hour, reported in
// x-ratelimit-* headers on every answer and refused with 403 and
// x-ratelimit-remaining: 0; and secondary limits on demand (403 or 429 with
// retry-after), as GitHub hands them out without warning.
import type { Reply } from '../kit/http.js';

const DOCS = 'https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api';

export class RateLimits {
  private readonly windows = new Map<string, { resetAt: number; used: number }>();
  private secondary: { status: 403 | 429; retryAfterSeconds: number; times: number } | undefined;

  constructor(private readonly limit: () => number) {}

  private window(caller: string, now: number) {
    let w = this.windows.get(caller);
    if (!w || w.resetAt <= now) {
      w = { resetAt: now + 3_600_000, used: 0 };
      this.windows.set(caller, w);
    }
    return w;
  }

  /** Uses up the hour's limit of one caller, or of every caller. */
  exhaust(caller?: string, now = Date.now()): void {
    if (caller === undefined) this.allExhaustedUntil = now + 3_600_000;
    else this.window(caller, now).used = Math.max(this.limit(), this.window(caller, now).used);
  }

  /** Every caller starts a fresh hour; no secondary limit is armed. */
  reset(): void {
    this.windows.clear();
    this.allExhaustedUntil = 0;
    this.secondary = undefined;
  }

  private allExhaustedUntil = 0;

  armSecondary(status: 403 | 429, retryAfterSeconds: number, times: number): void {
    this.secondary = { status, retryAfterSeconds, times };
  }

  /** Counts the request; a refusal instead of the answer when a limit says so. The headers go on every answer. */
  take(caller: string, now = Date.now()): { refusal?: Reply; headers: Record<string, string> } {
    const w = this.window(caller, now);
    if (now < this.allExhaustedUntil) w.used = Math.max(w.used, this.limit());
    const headers = (used: number) => ({
      'x-ratelimit-limit': String(this.limit()),
      'x-ratelimit-remaining': String(Math.max(0, this.limit() - used)),
      'x-ratelimit-reset': String(Math.ceil(w.resetAt / 1000)),
      'x-ratelimit-used': String(used),
      'x-ratelimit-resource': 'core',
    });
    if (this.secondary && this.secondary.times > 0) {
      this.secondary.times--;
      const { status, retryAfterSeconds } = this.secondary;
      return {
        headers: headers(w.used),
        refusal: { status, body: { message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.', documentation_url: DOCS, status: String(status) }, headers: { ...headers(w.used), 'retry-after': String(retryAfterSeconds) } },
      };
    }
    if (w.used >= this.limit()) {
      return { headers: headers(w.used), refusal: { status: 403, body: { message: `API rate limit exceeded for ${caller}.`, documentation_url: DOCS, status: '403' }, headers: headers(w.used) } };
    }
    w.used++;
    return { headers: headers(w.used) };
  }
}
