// When a RunnerTarget check may start under GitHub's rate limits, and when a
// limited target is looked at again.
import { describe, expect, it } from '@jest/globals';
import { RateLimitedError } from '../../../src/providers/ratelimit.js';
import { mayStartCheck, rateLimitedCondition, requestsNeeded, retryAtAfter, UNNAMED_WAIT_MS, type QuotaFacts } from './ratelimit.js';

const NOW = Date.parse('2026-12-03T12:00:00Z');
const RESET = NOW + 20 * 60_000;

describe('mayStartCheck', () => {
  it.each<[string, Omit<QuotaFacts, 'now'>, number | undefined]>([
    ['nothing known yet (the first check)', {}, undefined],
    ['plenty left', { rateLimit: { remaining: 4000, resetAt: RESET }, lastCheckRequests: 40 }, undefined],
    ['exactly the last count with headroom left', { rateLimit: { remaining: 50, resetAt: RESET }, lastCheckRequests: 40 }, undefined],
    ['less than the last count with headroom left', { rateLimit: { remaining: 49, resetAt: RESET }, lastCheckRequests: 40 }, RESET],
    ['none left and no earlier check', { rateLimit: { remaining: 0, resetAt: RESET } }, RESET],
    ['one left and no earlier check', { rateLimit: { remaining: 1, resetAt: RESET } }, undefined],
    ['none left, but the window already reset', { rateLimit: { remaining: 0, resetAt: NOW - 1 }, lastCheckRequests: 40 }, undefined],
    ['a limit answered until later', { blockedUntil: NOW + 30_000, rateLimit: { remaining: 4000, resetAt: RESET } }, NOW + 30_000],
    ['a limit answered that has passed', { blockedUntil: NOW - 1, rateLimit: { remaining: 4000, resetAt: RESET } }, undefined],
    ['a limit answered and the quota low: the limit first', { blockedUntil: NOW + 30_000, rateLimit: { remaining: 0, resetAt: RESET } }, NOW + 30_000],
  ])('%s', (_what, facts, until) => {
    const d = mayStartCheck({ now: NOW, ...facts });
    if (until === undefined) expect(d).toEqual({ start: true });
    else {
      expect(d).toMatchObject({ start: false, until });
      expect((d as { message: string }).message).toContain(new Date(until).toISOString());
    }
  });

  it('names what is left and what a check needs when the quota is low', () => {
    const d = mayStartCheck({ now: NOW, rateLimit: { remaining: 3, resetAt: RESET }, lastCheckRequests: 8 });
    expect(d).toMatchObject({ start: false, message: expect.stringContaining('3 requests left') });
    expect((d as { message: string }).message).toContain('needs about 10 (the last one used 8)');
  });
});

describe('requestsNeeded', () => {
  it.each([
    [undefined, 1],
    [0, 1],
    [1, 2],
    [8, 10],
    [100, 125],
  ])('last check %p: %p', (last, need) => expect(requestsNeeded(last)).toBe(need));
});

describe('retryAtAfter', () => {
  it.each<[string, Date | undefined, number]>([
    ['the reset GitHub named', new Date(RESET), RESET],
    ['a minute when GitHub named no time', undefined, NOW + UNNAMED_WAIT_MS],
    ['never in the past: a second from now', new Date(NOW - 5000), NOW + 1000],
  ])('%s', (_what, retryAt, at) => {
    expect(retryAtAfter(new RateLimitedError('GitHub list-runners: HTTP 403', retryAt), NOW)).toBe(at);
  });
});

describe('rateLimitedCondition', () => {
  it('is True naming the time and the fixes while limited, False after', () => {
    const c = rateLimitedCondition({ until: RESET, message: 'GitHub answered a rate limit' });
    expect(c).toMatchObject({ type: 'RateLimited', status: 'True', reason: 'GitHubRateLimit' });
    expect(c.message).toContain('2026-12-03T12:20:00.000Z');
    expect(c.message).toContain('spec.checkInterval');
    expect(rateLimitedCondition(undefined)).toMatchObject({ type: 'RateLimited', status: 'False', reason: 'WithinLimit' });
  });
});
