// A RunnerTarget against a GitHub that limits its token and loses a followed
// repository (issue 20): the controller process against the shared control
// plane, the emulators in this process. A limited target says RateLimited
// with the time, sends GitHub nothing until then, and recovers by itself; a
// repository GitHub answers 404 for is named while the others are served.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { condition, startRunnerTargetPool, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rt-ghlimits');
});

afterAll(async () => {
  await pool?.stop();
});

/** Requests the controller sent with the target's token (not the emulator's own bookkeeping). */
const tokenRequests = () => pool.gh.requests.filter((r) => r.account?.startsWith('user:'));

async function conditionOf(name: string, type: string, status: string, timeoutMs = 60_000): Promise<any> {
  return waitFor(`${name}: ${type}=${status}`, async () => {
    const c = condition(await pool.get(name), type);
    return c?.status === status ? c : undefined;
  }, timeoutMs);
}

describe('a RunnerTarget under GitHub rate limits', () => {
  it.each([
    ['the primary limit used up (403, x-ratelimit-remaining 0) until x-ratelimit-reset', 'primary'],
    ['a secondary limit (429 with retry-after)', 'secondary'],
  ] as const)('%s: RateLimited with the time, no request to GitHub until then, then it recovers by itself', async (_what, kind) => {
    const name = `limits-${kind}`;
    pool.gh.addRepository(name);
    // checkInterval 30s is checked every 3 s by the test controller: without obeying the limit it would be asked several times.
    await pool.target(name, name, { checkInterval: '30s' });
    await conditionOf(name, 'Ready', 'True');

    const since = Date.now();
    const waitMs = 12_000;
    if (kind === 'primary') pool.gh.exhaustRateLimit(pool.gh.token, waitMs);
    else pool.gh.secondaryLimit({ status: 429, retryAfterSeconds: waitMs / 1000 });
    const limited = await conditionOf(name, 'RateLimited', 'True', 30_000);
    const refused = tokenRequests().filter((r) => r.time >= since && (r.status === 403 || r.status === 429));
    expect(refused).toHaveLength(1);
    const first = refused[0]!;
    // The time GitHub named: x-ratelimit-reset (whole seconds) or retry-after after the refusal.
    const until = kind === 'primary' ? Math.ceil((since + waitMs) / 1000) * 1000 : first.time + waitMs;
    const named = Date.parse(/next check is at (\S+?)\. /.exec(limited.message)![1]!);
    expect(Math.abs(named - until)).toBeLessThan(2_000);
    const t = await pool.get(name);
    expect(condition(t, 'Ready')).toMatchObject({ status: 'False', reason: 'RateLimited' });
    expect((await pool.events(name)).some((e: any) => e.reason === 'RateLimited' && e.type === 'Warning')).toBe(true);

    await conditionOf(name, 'RateLimited', 'False', 60_000);
    expect(condition(await pool.get(name), 'Ready')).toMatchObject({ status: 'True', reason: 'CheckCompleted' });
    // Nothing was sent with the token between the refusal and the time GitHub named (a second of slack for clocks).
    const during = tokenRequests().filter((r) => r.time > first.time && r.time < named - 1000);
    expect(during).toEqual([]);
    expect(tokenRequests().filter((r) => r.time >= since && (r.status === 403 || r.status === 429))).toHaveLength(1);
    // Quiet from here on: the spec change is checked once at once, and that check must be over before
    // the next case arms a one-shot limit every target shares (it would take the refusal meant for that case's target).
    await pool.target(name, name, { checkInterval: '1h' });
    await waitFor(`${name} checked its new spec`, async () => {
      const t = await pool.get(name);
      return t?.status?.observedGeneration === t?.metadata?.generation ? true : undefined;
    }, 60_000, 300);
  });

  it('a steady check asks its listings conditionally: most answers are 304', async () => {
    const name = 'limits-etag';
    pool.gh.addRepository(name);
    await pool.target(name, name, { checkInterval: '30s' });
    await conditionOf(name, 'Ready', 'True');
    const since = Date.now();
    await waitFor('three more checks', async () => {
      const t = await pool.get(name);
      return Date.parse(t?.status?.lastCheckAt ?? '') > since + 6_000 ? true : undefined;
    }, 60_000);
    const listings = tokenRequests().filter((r) => r.time > since && ['list-runners', 'list-runs', 'list-runner-groups'].includes(r.op));
    expect(listings.length).toBeGreaterThan(0);
    expect(listings.filter((r) => r.status === 304).length / listings.length).toBeGreaterThan(0.5);
    await pool.target(name, name, { checkInterval: '1h' });
  });
});

describe('a followed repository GitHub answers 404 for', () => {
  it('is named in RepositoryMissing with the fix while the other repositories are served; the condition clears once it is back', async () => {
    const name = 'limits-repos';
    pool.gh.queueRun('kept', [{ labels: ['self-hosted', 'linux'] }]);
    pool.gh.addRepository('vanished');
    pool.gh.removeRepository('vanished');
    const github = { org: pool.gh.org, repositories: [`${pool.gh.org}/vanished`, `${pool.gh.org}/kept`], tokenSecretRef: { name: 'gh-token' }, apiURL: pool.gh.url };
    await pool.target(name, 'kept', { github, dryRun: true, checkInterval: '30s' });
    const missing = await conditionOf(name, 'RepositoryMissing', 'True');
    expect(missing.message).toContain(`${pool.gh.org}/vanished`);
    expect(missing.message).not.toContain(`${pool.gh.org}/kept`);
    expect(missing.message).toContain('spec.github.repositories');
    const t = await pool.get(name);
    expect(condition(t, 'Ready')).toMatchObject({ status: 'True', reason: 'DryRun' });
    // The job of the repository still there is served: the plan launches a host for it.
    expect(t.status.counts).toMatchObject({ queued: 1 });
    expect(t.status.plan).toMatchObject({ launch: 1 });
    pool.gh.addRepository('vanished');
    await conditionOf(name, 'RepositoryMissing', 'False');
    await pool.target(name, 'kept', { github, dryRun: true, checkInterval: '1h' });
  });
});
