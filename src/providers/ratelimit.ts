// The rate-limit error every REST client throws: when the API says the
// caller may try again, so that a controller waits instead of hammering.
import { ProviderError } from './errors.js';

export class RateLimitedError extends ProviderError {
  /** When the limit resets, as the API said (GitHub's x-ratelimit-reset, a Retry-After); undefined when it did not say. */
  readonly retryAt: Date | undefined;

  constructor(message: string, retryAt: Date | undefined, opts: { cause?: unknown } = {}) {
    super('RateLimited', retryAt ? `${message} (retry after ${retryAt.toISOString()})` : message, opts);
    this.retryAt = retryAt;
  }
}
