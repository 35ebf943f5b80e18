// GitHub's rate limits: the primary limit per caller per window (an hour),
// reported in x-ratelimit-* headers on every answer and refused with 403
// (or 429) and x-ratelimit-remaining: 0 until x-ratelimit-reset; and
// secondary limits on demand (403 or 429 with retry-after), as GitHub hands
// them out without warning. A request is counted only once its answer is
// known: a 304 to a conditional request is not counted.
import type { Reply } from '../kit/http.js';

const DOCS = 'https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api';

export interface LimitSettings {
  /** Requests per caller per window. */
  rateLimit: number;
  /** How long a primary window lasts (GitHub: an hour). */
  rateLimitWindowMs: number;
  /** The status of a primary limit refusal: GitHub documents 403 or 429. */
  primaryLimitStatus: 403 | 429;
}

export class RateLimits {
  private readonly windows = new Map<string, { resetAt: number; used: number }>();
  private secondary: { status: 403 | 429; retryAfterSeconds: number; times: number } | undefined;
  private allExhaustedUntil = 0;

  constructor(private readonly settings: () => LimitSettings) {}

  private window(caller: string, now: number) {
    let w = this.windows.get(caller);
    if (!w || w.resetAt <= now) {
      w = { resetAt: now + this.settings().rateLimitWindowMs, used: 0 };
      this.windows.set(caller, w);
    }
    return w;
  }

  /** Uses up the window's limit of one caller, or of every caller for a window; `resetInMs` ends that window sooner. */
  exhaust(caller?: string, resetInMs?: number, now = Date.now()): void {
    if (caller === undefined) {
      this.allExhaustedUntil = now + (resetInMs ?? this.settings().rateLimitWindowMs);
      return;
    }
    const w = this.window(caller, now);
    w.used = Math.max(this.settings().rateLimit, w.used);
    if (resetInMs !== undefined) w.resetAt = now + resetInMs;
  }

  /** Every caller starts a fresh window; no secondary limit is armed. */
  reset(): void {
    this.windows.clear();
    this.allExhaustedUntil = 0;
    this.secondary = undefined;
  }

  armSecondary(status: 403 | 429, retryAfterSeconds: number, times: number): void {
    this.secondary = { status, retryAfterSeconds, times };
  }

  /** The caller's window as x-ratelimit-* headers. */
  headers(caller: string, now = Date.now()): Record<string, string> {
    const w = this.window(caller, now);
    const limit = this.settings().rateLimit;
    return {
      'x-ratelimit-limit': String(limit),
      'x-ratelimit-remaining': String(Math.max(0, limit - w.used)),
      'x-ratelimit-reset': String(Math.ceil(w.resetAt / 1000)),
      'x-ratelimit-used': String(w.used),
      'x-ratelimit-resource': 'core',
    };
  }

  /** A refusal when a limit holds for the caller now; undefined when the request may be answered. */
  refusal(caller: string, now = Date.now()): Reply | undefined {
    const w = this.window(caller, now);
    const { rateLimit, primaryLimitStatus } = this.settings();
    if (now < this.allExhaustedUntil) w.used = Math.max(w.used, rateLimit);
    if (this.secondary && this.secondary.times > 0) {
      this.secondary.times--;
      const { status, retryAfterSeconds } = this.secondary;
      return { status, body: { message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.', documentation_url: DOCS, status: String(status) }, headers: { ...this.headers(caller, now), 'retry-after': String(retryAfterSeconds) } };
    }
    if (w.used >= rateLimit) {
      const status = primaryLimitStatus;
      return { status, body: { message: `API rate limit exceeded for ${caller}.`, documentation_url: DOCS, status: String(status) }, headers: this.headers(caller, now) };
    }
    return undefined;
  }

  /** Counts one answered request against the caller's primary limit. */
  count(caller: string, now = Date.now()): void {
    this.window(caller, now).used++;
  }
}
