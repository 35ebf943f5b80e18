// The GitHub client against the emulator (e2e/fakes/github) on loopback:
// token and GitHub App auth (installation tokens cached and renewed), runners
// across pages, JIT configs a runner registers with, deletes refused while
// busy, queued runs and their jobs, rate limits typed with the time to retry,
// and that no token or key reaches an error.
import { describe, it, expect, beforeAll, afterAll, afterEach } from '@jest/globals';
import { generateKeyPairSync } from 'node:crypto';
import { startGitHubEmulator, type GitHubEmulator } from '../../../e2e/fakes/github/server.js';
import { isProviderError, ProviderError } from '../errors.js';
import { RateLimitedError } from '../ratelimit.js';
import { GitHubClient } from './client.js';
import { GitHubApiError, RunnerBusyError } from './errors.js';

async function caught(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ProviderError);
    return e as ProviderError;
  }
  throw new Error('expected the call to fail');
}

describe('GitHubClient against the GitHub emulator', () => {
  let gh: GitHubEmulator;
  let client: GitHubClient;
  let n = 0;
  const results: string[] = [];
  beforeAll(async () => {
    gh = await startGitHubEmulator();
    client = new GitHubClient({ org: gh.org, credentials: { token: gh.token }, api: gh.url, onResult: (op, code) => results.push(`${op} ${code}`) });
  });
  afterAll(() => gh.stop());
  afterEach(() => {
    gh.clearFaults();
    gh.resetRateLimits();
  });
  const appClient = (privateKey = gh.app.privateKey) => new GitHubClient({ org: gh.org, credentials: { appId: gh.app.appId, installationId: gh.app.installationId, privateKey }, api: gh.url });
  const tokenRequests = () => gh.requests.filter((r) => r.op === 'access-token').length;
  const jit = (labels = ['linux']) => client.generateJitConfig({ name: `client-runner-${++n}`, runnerGroupId: 1, labels });

  it('generates a JIT config a runner registers with, and lists it', async () => {
    const config = await jit(['linux', 'gce']);
    expect(config.runner).toMatchObject({ name: `client-runner-${n}`, status: 'offline', busy: false, labels: ['self-hosted', 'linux', 'gce'], runnerGroupId: 1, ephemeral: true });
    const fake = gh.startRunner(config.encodedJitConfig);
    const listed = (await client.listRunners()).find((r) => r.id === fake.id);
    expect(listed).toMatchObject({ status: 'online', busy: false });
    expect(gh.mutations.at(-1)).toMatchObject({ op: 'generate-jitconfig', status: 201 });
  });

  it('lists the runner groups, and a JIT config for a removed group is NotFound', async () => {
    const id = gh.addRunnerGroup('client-group');
    expect(await client.listRunnerGroups()).toEqual(expect.arrayContaining([{ id: 1, name: 'Default', isDefault: true, visibility: 'all' }, { id, name: 'client-group', isDefault: false, visibility: 'all' }]));
    const config = await client.generateJitConfig({ name: `client-runner-${++n}`, runnerGroupId: id, labels: ['linux'] });
    expect(config.runner.runnerGroupId).toBe(id);
    gh.removeRunnerGroup(id);
    await expect(client.generateJitConfig({ name: `client-runner-${++n}`, runnerGroupId: id, labels: ['linux'] })).rejects.toMatchObject({ kind: 'NotFound' });
    expect(results).toContain('list-runner-groups 200');
  });

  it('lists every runner across pages of 100', async () => {
    for (let i = 0; i < 120; i++) await jit();
    const before = gh.requests.filter((r) => r.op === 'list-runners').length;
    const all = await client.listRunners();
    expect(all.length).toBe(gh.runners().length);
    expect(all.length).toBeGreaterThan(100);
    expect(gh.requests.filter((r) => r.op === 'list-runners').length - before).toBe(2);
  });

  it('deletes a runner; RunnerBusyError while it runs a job; NotFound once gone', async () => {
    gh.queueRun('delete-me', [{ labels: ['self-hosted', 'client-busy'] }]);
    const config = await jit(['client-busy']);
    const fake = gh.startRunner(config.encodedJitConfig);
    fake.takeJob();
    const busy = await caught(client.deleteRunner(fake.id));
    expect(busy).toBeInstanceOf(RunnerBusyError);
    expect(busy.retryable).toBe(true);
    const idle = await jit();
    await client.deleteRunner(idle.runner.id);
    const gone = await caught(client.deleteRunner(idle.runner.id));
    expect(isProviderError(gone, 'NotFound')).toBe(true);
  });

  it('lists queued runs of a repository and the labels and states of their jobs', async () => {
    const { runId, jobIds } = gh.queueRun('web', [{ labels: ['self-hosted', 'linux', 'x64'], name: 'build' }, { labels: ['self-hosted', 'gpu'], name: 'train' }]);
    const queued = await client.listRuns(`${gh.org}/web`, 'queued');
    expect(queued).toEqual([expect.objectContaining({ id: runId, repo: `${gh.org}/web`, status: 'queued', conclusion: null })]);
    const jobs = await client.listJobs(`${gh.org}/web`, runId);
    expect(jobs.map((j) => ({ id: j.id, name: j.name, status: j.status, labels: j.labels }))).toEqual([
      { id: jobIds[0], name: 'build', status: 'queued', labels: ['self-hosted', 'linux', 'x64'] },
      { id: jobIds[1], name: 'train', status: 'queued', labels: ['self-hosted', 'gpu'] },
    ]);
    gh.completeJob(jobIds[0]!);
    expect((await client.listRuns(`${gh.org}/web`, 'in_progress')).map((r) => r.id)).toEqual([runId]);
    expect(await client.listRuns(`${gh.org}/web`, 'queued')).toEqual([]);
    expect(isProviderError(await caught(client.listRuns('not-a-full-name', 'queued')), 'InvalidRequest')).toBe(true);
    expect(isProviderError(await caught(client.listRuns(`${gh.org}/unknown`, 'queued')), 'NotFound')).toBe(true);
  });

  it('keeps the primary rate limit from the last answer', async () => {
    await client.listRunners();
    expect(client.rateLimit).toMatchObject({ limit: 5000, resource: 'core' });
    expect(client.rateLimit!.remaining).toBe(5000 - client.rateLimit!.used);
    expect(client.rateLimit!.resetAt.getTime()).toBeGreaterThan(Date.now());
  });

  // Each limit test has its own client: a limited client sends nothing more until the time GitHub named.
  const fresh = () => new GitHubClient({ org: gh.org, credentials: { token: gh.token }, api: gh.url });
  const sent = () => gh.requests.filter((r) => r.account !== undefined && r.op !== 'access-token').length;

  it('types the primary limit as RateLimitedError until x-ratelimit-reset, and sends nothing more before then', async () => {
    const limited = fresh();
    gh.exhaustRateLimit(gh.token);
    const e = await caught(limited.listRunners());
    expect(e).toBeInstanceOf(RateLimitedError);
    expect((e as RateLimitedError).retryAt!.getTime()).toBe(limited.rateLimit!.resetAt.getTime());
    expect(limited.rateLimit!.remaining).toBe(0);
    expect(limited.blockedUntil!.getTime()).toBe(limited.rateLimit!.resetAt.getTime());
    const before = sent();
    const again = (await caught(limited.listRuns(`${gh.org}/web`, 'queued'))) as RateLimitedError;
    expect(again).toBeInstanceOf(RateLimitedError);
    expect(again.retryAt!.getTime()).toBe(limited.rateLimit!.resetAt.getTime());
    expect(sent()).toBe(before);
  });

  it.each([403, 429] as const)('types a secondary limit (%i) as RateLimitedError after retry-after, sends nothing before it, and sends again after it', async (status) => {
    const limited = fresh();
    gh.secondaryLimit({ status, retryAfterSeconds: 42 });
    const before = Date.now();
    const e = (await caught(limited.listRunners())) as RateLimitedError;
    expect(e).toBeInstanceOf(RateLimitedError);
    expect(e.retryAt!.getTime()).toBeGreaterThanOrEqual(before + 42_000);
    expect(e.retryAt!.getTime()).toBeLessThan(Date.now() + 43_000);
    const count = sent();
    await expect(limited.listRunnerGroups()).rejects.toBeInstanceOf(RateLimitedError);
    expect(sent()).toBe(count);

    const short = fresh();
    gh.secondaryLimit({ status, retryAfterSeconds: 1 });
    await expect(short.listRunners()).rejects.toBeInstanceOf(RateLimitedError);
    const until = short.blockedUntil!.getTime();
    while (Date.now() <= until) await new Promise((r) => setTimeout(r, until - Date.now() + 5));
    expect(short.blockedUntil).toBeUndefined();
    await expect(short.listRunners()).resolves.toEqual(expect.any(Array));
  });

  it('types a secondary 403 without retry-after as a minute to wait, and a plain 403 as Unauthorized', async () => {
    gh.fault({ op: 'list-runners', mode: 'status', status: 403, message: 'You have exceeded a secondary rate limit.', times: 1 });
    const e = (await caught(fresh().listRunners())) as RateLimitedError;
    expect(e).toBeInstanceOf(RateLimitedError);
    expect(e.retryAt!.getTime()).toBeGreaterThan(Date.now() + 55_000);
    gh.fault({ op: 'list-runners', mode: 'status', status: 403, message: 'Resource not accessible by integration', times: 1 });
    const denied = await caught(fresh().listRunners());
    expect(denied).toBeInstanceOf(GitHubApiError);
    expect(denied.kind).toBe('Unauthorized');
  });

  it('asks the listings again with If-None-Match: a 304 reuses the kept answer and costs none of the primary limit', async () => {
    const c = fresh();
    const { runId } = gh.queueRun('etag', [{ labels: ['self-hosted', 'etag'] }]);
    const first = { runners: await c.listRunners(), runs: await c.listRuns(`${gh.org}/etag`, 'queued'), jobs: await c.listJobs(`${gh.org}/etag`, runId) };
    const asked = c.usage.requests;
    expect(c.usage.notModified).toBe(0);
    const used = c.rateLimit!.used;
    const since = gh.requests.length;
    const second = { runners: await c.listRunners(), runs: await c.listRuns(`${gh.org}/etag`, 'queued'), jobs: await c.listJobs(`${gh.org}/etag`, runId) };
    expect(second).toEqual(first);
    const again = gh.requests.slice(since);
    expect(new Set(again.map((r) => r.status))).toEqual(new Set([304]));
    expect(new Set(again.map((r) => r.op))).toEqual(new Set(['list-runners', 'list-runs', 'list-jobs']));
    expect(again).toHaveLength(asked);
    expect(c.usage).toEqual({ requests: asked, notModified: asked });
    expect(c.rateLimit!.used).toBe(used);
    // A change is seen at once: the listing's ETag changed with it.
    const config = await jit(['etag']);
    const third = await c.listRunners();
    expect(third.map((r) => r.id)).toContain(config.runner.id);
    expect(gh.requests.filter((r) => r.op === 'list-runners').at(-1)!.status).toBe(200);
  });

  it('marks a 5xx as possibly done and reports each call for metrics', async () => {
    gh.fault({ op: 'generate-jitconfig', mode: 'status', status: 502, times: 1 });
    expect(await caught(jit())).toMatchObject({ kind: 'Unknown', answerLost: true });
    expect(results).toEqual(expect.arrayContaining(['generate-jitconfig 502', 'list-runners 200']));
  });

  describe('as a GitHub App', () => {
    it('gets one installation token for many calls and uses it', async () => {
      const c = appClient();
      const before = tokenRequests();
      await Promise.all([c.listRunners(), c.listRunners()]);
      await c.listRunners();
      expect(tokenRequests() - before).toBe(1);
      expect(gh.requests.filter((r) => r.op === 'list-runners').at(-1)!.account).toMatch(/^installation:/);
    });

    it('renews the installation token before it expires', async () => {
      // GitHub gives expires_at in whole seconds: this token lives 2 to 3 s.
      gh.installationTokenTtlMs = 3000;
      try {
        const c = appClient();
        const before = tokenRequests();
        await c.listRunners();
        await c.listRunners();
        expect(tokenRequests() - before).toBe(1);
        const end = Date.now() + 10_000;
        while (tokenRequests() - before < 2 && Date.now() < end) {
          await c.listRunners();
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(tokenRequests() - before).toBe(2);
        expect(gh.requests.filter((r) => r.op === 'list-runners' && r.status === 401)).toHaveLength(0);
      } finally {
        gh.installationTokenTtlMs = 3_600_000;
      }
    });

    it('gets a fresh token once when GitHub refuses the cached one', async () => {
      const c = appClient();
      await c.listRunners();
      const before = tokenRequests();
      gh.fault({ op: 'list-runners', mode: 'status', status: 401, times: 1 });
      await c.listRunners();
      expect(tokenRequests() - before).toBe(1);
    });

    it('reports a wrong private key as Unauthorized without the key or the JWT', async () => {
      const wrong = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
      const e = await caught(appClient(wrong).listRunners());
      expect(e.kind).toBe('Unauthorized');
      expect(e.message).toMatch(/installation .* token: refused \(HTTP 401/);
      expect(e.message).not.toContain(wrong.slice(40, 80));
      expect(e.message).not.toMatch(/eyJ/);
      expect(() => appClient('not a key')).toThrow(/the GitHub App private key is not a PEM RSA private key/);
    });
  });

  it('never puts a token in an error', async () => {
    gh.fault({ op: 'list-runners', mode: 'status', status: 500, times: 1 });
    const e = await caught(client.listRunners());
    expect(`${e.message} ${String(e.stack)}`).not.toContain(gh.token);
  });
});
