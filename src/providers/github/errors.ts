// GitHub's failures as typed errors: rate limits (primary: remaining 0 until
// x-ratelimit-reset; secondary: retry-after, or a minute when GitHub gives no
// time) with the time to retry, a runner that still runs a job, and the rest
// by status.
import { ProviderError, type ProviderErrorKind } from '../errors.js';
import { RateLimitedError } from '../ratelimit.js';
import { retryAfterMs, sanitize } from '../rest.js';

/** GitHub asks clients that hit a secondary limit without retry-after to wait at least a minute. */
const SECONDARY_DEFAULT_WAIT_MS = 60_000;

export class GitHubApiError extends ProviderError {
  constructor(
    kind: ProviderErrorKind,
    message: string,
    readonly status: number,
    opts: { retryable?: boolean; answerLost?: boolean } = {},
  ) {
    super(kind, message, opts);
  }
}

/** DELETE of a runner GitHub says runs a job (422): deregister later, after the job. */
export class RunnerBusyError extends GitHubApiError {
  constructor(message: string) {
    super('InvalidRequest', message, 422, { retryable: true });
  }
}

export function errorForAnswer(what: string, status: number, json: unknown, headers: Headers, now = Date.now()): ProviderError {
  const message = typeof (json as { message?: unknown })?.message === 'string' ? (json as { message: string }).message : `HTTP ${status}`;
  const text = `GitHub ${what}: HTTP ${status}: ${sanitize(message)}`;
  if (status === 403 || status === 429) {
    if (headers.get('x-ratelimit-remaining') === '0') {
      const reset = Number(headers.get('x-ratelimit-reset'));
      return new RateLimitedError(text, Number.isFinite(reset) && reset > 0 ? new Date(reset * 1000) : undefined);
    }
    const after = retryAfterMs(headers.get('retry-after'), now);
    if (after !== undefined) return new RateLimitedError(text, new Date(now + after));
    if (status === 429 || /secondary rate limit/i.test(message)) return new RateLimitedError(text, new Date(now + SECONDARY_DEFAULT_WAIT_MS));
  }
  if (status === 401 || status === 403) return new GitHubApiError('Unauthorized', text, status);
  if (status === 404) return new GitHubApiError('NotFound', text, status);
  if (status >= 500) return new GitHubApiError('Unknown', text, status, { answerLost: true });
  return new GitHubApiError('InvalidRequest', text, status);
}
