// The GitHub emulator over real HTTP (Node's fetch): tokens and GitHub App
// auth, JIT configs and the fake runners that use them, runner deletion and
// the busy refusal, the busy-flag lag, workflow runs and jobs, pages, rate
// limit headers, the primary and secondary limits, faults and the request log.
import { describe, it, expect, beforeAll, afterAll, afterEach } from '@jest/globals';
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { signJwt } from '../../../src/providers/jwt.js';
import { startGitHubEmulator, type GitHubEmulator } from './server.js';

interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

async function call(gh: GitHubEmulator, token: string | null, method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/vnd.github+json', ...extra };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`${gh.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined, headers: r.headers };
}

function appJwt(gh: GitHubEmulator, over: Record<string, unknown> = {}, pem = gh.app.privateKey): string {
  const now = Math.floor(Date.now() / 1000);
  return signJwt({ iat: now - 60, exp: now + 540, iss: String(gh.app.appId), ...over }, createPrivateKey(pem));
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('GitHub emulator', () => {
  let gh: GitHubEmulator;
  let n = 0;
  beforeAll(async () => {
    // Runners leave at once after their job unless a test asks for GitHub's removal lag.
    gh = await startGitHubEmulator({ jitRemovalLagMs: 0 });
  });
  afterAll(() => gh.stop());
  afterEach(() => {
    gh.clearFaults();
    gh.resetRateLimits();
    gh.busyLagMs = 0;
    gh.deleteBusySucceeds = false;
    gh.jitRemovalLagMs = 0;
    gh.zombieRemovalMs = 86_400_000;
    gh.offlineRatePerHour = 0;
    gh.lostRunnerFailMs = 600_000;
  });
  const org = () => gh.org;
  const jit = (labels = ['linux', 'gce'], over: Record<string, unknown> = {}) => call(gh, gh.token, 'POST', `/orgs/${org()}/actions/runners/generate-jitconfig`, { name: `runner-${++n}`, runner_group_id: 1, labels, work_folder: '_work', ...over });
  const runner = async (labels?: string[]) => {
    const r = await jit(labels);
    expect(r.status).toBe(201);
    return gh.startRunner(r.body.encoded_jit_config);
  };
  const listed = async (id: number) => ((await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners?per_page=100`)).body.runners as { id: number; busy: boolean; status: string }[]).find((r) => r.id === id);

  describe('auth', () => {
    it('answers 401 Bad credentials without a known token', async () => {
      for (const token of [null, 'ghp_unknown']) {
        const a = await call(gh, token, 'GET', `/orgs/${org()}/actions/runners`);
        expect(a).toMatchObject({ status: 401, body: { message: 'Bad credentials' } });
      }
    });

    it('trades an App JWT for an installation token that works on the org, and expires', async () => {
      const t = await call(gh, appJwt(gh), 'POST', `/app/installations/${gh.app.installationId}/access_tokens`);
      expect(t.status).toBe(201);
      expect(t.body).toMatchObject({ token: expect.stringMatching(/^ghs_/), expires_at: expect.stringMatching(/Z$/), repository_selection: 'all' });
      expect(Date.parse(t.body.expires_at)).toBeGreaterThan(Date.now() + 3_500_000);
      expect((await call(gh, t.body.token, 'GET', `/orgs/${org()}/actions/runners`)).status).toBe(200);
      gh.installationTokenTtlMs = 200;
      try {
        const short = (await call(gh, appJwt(gh), 'POST', `/app/installations/${gh.app.installationId}/access_tokens`)).body.token;
        await until('the installation token to expire', async () => ((await call(gh, short, 'GET', `/orgs/${org()}/actions/runners`)).status === 401 ? true : undefined));
      } finally {
        gh.installationTokenTtlMs = 3_600_000;
      }
    });

    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    it.each([
      ['signed with another key', () => appJwt(gh, {}, other)],
      ['issued for another App', () => appJwt(gh, { iss: '1' })],
      ['living over 10 minutes', () => appJwt(gh, { exp: Math.floor(Date.now() / 1000) + 900 })],
      ['expired', () => appJwt(gh, { iat: 1000, exp: 1500 })],
    ])('refuses an App JWT %s with 401', async (_what, jwt) => {
      expect((await call(gh, jwt(), 'POST', `/app/installations/${gh.app.installationId}/access_tokens`)).status).toBe(401);
    });

    it('refuses an unknown installation, the App JWT on org endpoints, and tokens on App endpoints', async () => {
      expect((await call(gh, appJwt(gh), 'POST', `/app/installations/1/access_tokens`)).status).toBe(404);
      expect((await call(gh, appJwt(gh), 'GET', `/orgs/${org()}/actions/runners`)).status).toBe(401);
      expect((await call(gh, gh.token, 'POST', `/app/installations/${gh.app.installationId}/access_tokens`)).status).toBe(403);
    });
  });

  describe('runners', () => {
    it('generates a JIT config: 201 with the runner (offline, self-hosted plus the labels, in the group)', async () => {
      const r = await jit(['linux', 'gce-spot']);
      expect(r.status).toBe(201);
      expect(r.body.runner).toMatchObject({ name: `runner-${n}`, status: 'offline', busy: false, ephemeral: true, runner_group_id: 1 });
      expect(r.body.runner.labels.map((l: { name: string; type: string }) => `${l.name}/${l.type}`)).toEqual(['self-hosted/read-only', 'linux/custom', 'gce-spot/custom']);
      expect(typeof r.body.encoded_jit_config).toBe('string');
      expect(await listed(r.body.runner.id)).toMatchObject({ status: 'offline' });
    });

    it('lists runner groups (Default always, pages), and a JIT config joins a group the test added; a removed group is 404', async () => {
      const id = gh.addRunnerGroup('spot-runners', 'selected');
      const all = await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runner-groups?per_page=100`);
      expect(all.status).toBe(200);
      expect(all.body.total_count).toBe(all.body.runner_groups.length);
      expect(all.body.runner_groups).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ id: 1, name: 'Default', default: true, visibility: 'all' }),
          expect.objectContaining({ id, name: 'spot-runners', default: false, visibility: 'selected', runners_url: expect.stringContaining(`/runner-groups/${id}/runners`) }),
        ]),
      );
      const paged = await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runner-groups?per_page=1&page=2`);
      expect(paged.body.runner_groups).toHaveLength(1);
      expect(paged.headers.get('link')).toContain('rel="prev"');
      const joined = await jit(['linux'], { runner_group_id: id });
      expect(joined).toMatchObject({ status: 201, body: { runner: { runner_group_id: id } } });
      gh.removeRunnerGroup(id);
      expect(await listed(joined.body.runner.id)).toMatchObject({ runner_group_id: 1 });
      expect((await jit(['linux'], { runner_group_id: id })).status).toBe(404);
      expect((await call(gh, gh.token, 'GET', `/orgs/not-ours/actions/runner-groups`)).status).toBe(404);
      expect(gh.requests.filter((r) => r.op === 'list-runner-groups').at(-1)).toMatchObject({ status: 404 });
    });

    it.each([
      ['no runner_group_id', { runner_group_id: undefined }, 422],
      ['an unknown runner group', { runner_group_id: 99 }, 404],
      ['no labels', { labels: [] }, 422],
      ['no name', { name: '' }, 422],
    ])('refuses %s', async (_what, over, status) => {
      expect((await jit(['linux'], over)).status).toBe(status);
    });

    it('refuses a second runner of the same name with 409', async () => {
      const first = await jit();
      expect((await jit(['linux'], { name: first.body.runner.name })).status).toBe(409);
    });

    it('registers a runner from its JIT config once: online, and the config is single use', async () => {
      const r = await jit();
      const fake = gh.startRunner(r.body.encoded_jit_config);
      expect(fake.id).toBe(r.body.runner.id);
      expect(await listed(fake.id)).toMatchObject({ status: 'online', busy: false });
      expect(() => gh.startRunner(r.body.encoded_jit_config)).toThrow(/single use/);
      expect(() => gh.startRunner('bm9wZQ==')).toThrow(/not a JIT config/);
      fake.goOffline();
      expect(await listed(fake.id)).toMatchObject({ status: 'offline' });
    });

    it('deletes an idle runner (204), and its JIT config no longer registers', async () => {
      const r = await jit();
      const d = await call(gh, gh.token, 'DELETE', `/orgs/${org()}/actions/runners/${r.body.runner.id}`);
      expect(d.status).toBe(204);
      expect(await listed(r.body.runner.id)).toBeUndefined();
      expect(() => gh.startRunner(r.body.encoded_jit_config)).toThrow(/does not exist/);
      expect((await call(gh, gh.token, 'DELETE', `/orgs/${org()}/actions/runners/${r.body.runner.id}`)).status).toBe(404);
    });

    it('refuses to delete a runner running a job with 422, or lets it go when deleteBusySucceeds', async () => {
      gh.queueRun('app', [{ labels: ['self-hosted', 'busy-test'] }, { labels: ['self-hosted', 'busy-test'] }]);
      const a = await runner(['busy-test']);
      expect(a.takeJob()).toBeDefined();
      const refused = await call(gh, gh.token, 'DELETE', `/orgs/${org()}/actions/runners/${a.id}`);
      expect(refused.status).toBe(422);
      expect(refused.body.message).toMatch(/still running a job/);
      gh.deleteBusySucceeds = true;
      const b = await runner(['busy-test']);
      const job = b.takeJob()!;
      expect((await call(gh, gh.token, 'DELETE', `/orgs/${org()}/actions/runners/${b.id}`)).status).toBe(204);
      expect(gh.jobs().find((j) => j.id === job.id)!.status).toBe('in_progress');
    });

    it("reads busy false for busyLagMs after a job started, then true; the runner is gone once its job is done", async () => {
      gh.busyLagMs = 300;
      const { runId, jobIds } = gh.queueRun('lag', [{ labels: ['lag-test'] }]);
      const r = await runner(['lag-test']);
      const taken = r.takeJob()!;
      expect(taken).toMatchObject({ id: jobIds[0], status: 'in_progress', runner_id: r.id, runner_name: r.name });
      expect(r.busy).toBe(true);
      expect((await listed(r.id))!.busy).toBe(false);
      await until('busy to show', async () => ((await listed(r.id))?.busy ? true : undefined));
      r.finishJob('success');
      expect(await listed(r.id)).toBeUndefined();
      const jobs = (await call(gh, gh.token, 'GET', `/repos/${org()}/lag/actions/runs/${runId}/jobs`)).body.jobs;
      expect(jobs[0]).toMatchObject({ status: 'completed', conclusion: 'success', completed_at: expect.any(String) });
    });

    it('by default GitHub removes a JIT runner a few seconds after its job, and no runner goes offline on its own', async () => {
      const fresh = await startGitHubEmulator();
      try {
        expect(fresh).toMatchObject({ jitRemovalLagMs: 3000, zombieRemovalMs: 86_400_000, offlineRatePerHour: 0 });
      } finally {
        await fresh.stop();
      }
    });

    it('a JIT runner is listed offline for jitRemovalLagMs after its job, then removed; a DELETE meanwhile is 204, after it 404', async () => {
      gh.jitRemovalLagMs = 400;
      gh.queueRun('removal', [{ labels: ['removal-test'] }, { labels: ['removal-test'] }]);
      const a = await runner(['removal-test']);
      a.takeJob();
      a.finishJob();
      expect(await listed(a.id)).toMatchObject({ status: 'offline', busy: false });
      expect(() => a.takeJob()).toThrow(/removed/);
      await until('the lagged removal', async () => ((await listed(a.id)) === undefined ? true : undefined));
      expect((await call(gh, gh.token, 'DELETE', `/orgs/${org()}/actions/runners/${a.id}`)).status).toBe(404);

      const b = await runner(['removal-test']);
      b.takeJob();
      b.finishJob();
      expect((await call(gh, gh.token, 'DELETE', `/orgs/${org()}/actions/runners/${b.id}`)).status).toBe(204);
      expect(await listed(b.id)).toBeUndefined();
      // GitHub's own removal comes after the DELETE and finds nothing: nothing reappears or fails.
      await new Promise((r) => setTimeout(r, 450));
      expect(await listed(b.id)).toBeUndefined();
    });

    it('runnerOffline: a runner goes offline on its own, takes no job, and its job stays in progress', async () => {
      gh.queueRun('crash', [{ labels: ['crash-test'] }, { labels: ['crash-test'] }]);
      const a = await runner(['crash-test']);
      const job = a.takeJob()!;
      gh.runnerOffline(a.name);
      expect(await listed(a.id)).toMatchObject({ status: 'offline' });
      expect(gh.jobs().find((j) => j.id === job.id)!.status).toBe('in_progress');
      const b = await runner(['crash-test']);
      gh.runnerOffline(b.name);
      expect(b.takeJob()).toBeUndefined();
      expect(() => gh.runnerOffline('no-such-runner')).toThrow(/no runner/);
    });

    it('offlineRatePerHour: online runners go offline on their own at that rate; registrations not yet connected are not affected', async () => {
      const a = await runner(['rate-test']);
      const pending = await jit(['rate-test']);
      await new Promise((r) => setTimeout(r, 30));
      expect(await listed(a.id)).toMatchObject({ status: 'online' });
      // About one per millisecond: within a few milliseconds it is all but certain.
      gh.offlineRatePerHour = 3_600_000;
      await until('the runner to go offline', async () => ((await listed(a.id))?.status === 'offline' ? true : undefined));
      expect(await listed(pending.body.runner.id)).toMatchObject({ status: 'offline' });
      gh.offlineRatePerHour = 0;
      const b = await runner(['rate-test']);
      await new Promise((r) => setTimeout(r, 30));
      expect(await listed(b.id)).toMatchObject({ status: 'online' });
    });

    it('a registration whose runner never connected (a zombie) is removed zombieRemovalMs after it was made; a connected one stays', async () => {
      gh.zombieRemovalMs = 300;
      const zombie = await jit(['zombie-test']);
      const live = await runner(['zombie-test']);
      expect(await listed(zombie.body.runner.id)).toMatchObject({ status: 'offline' });
      await until('the zombie registration to go', async () => ((await listed(zombie.body.runner.id)) === undefined ? true : undefined));
      expect(await listed(live.id)).toMatchObject({ status: 'online' });
      expect(() => gh.startRunner(zombie.body.encoded_jit_config)).toThrow(/does not exist/);
    });

    it('takes only jobs whose labels the runner has, all of them, oldest first', async () => {
      const { jobIds } = gh.queueRun('match', [{ labels: ['self-hosted', 'gpu'] }, { labels: ['self-hosted', 'Match-Test'] }, { labels: ['match-test'] }]);
      const r = await runner(['match-test']);
      expect(r.takeJob()!.id).toBe(jobIds[1]);
      r.finishJob();
      const s = await runner(['match-test']);
      expect(s.takeJob()!.id).toBe(jobIds[2]);
      const t = await runner(['match-test']);
      expect(t.takeJob()).toBeUndefined();
    });
  });

  describe('workflow runs and jobs', () => {
    it('lists runs by status, and a run is queued, in progress, then completed with its jobs', async () => {
      const { runId, jobIds } = gh.queueRun('svc', [{ labels: ['self-hosted', 'flow'], name: 'build' }, { labels: ['self-hosted', 'flow'], name: 'test' }]);
      const byStatus = async (status: string) => ((await call(gh, gh.token, 'GET', `/repos/${org()}/svc/actions/runs?status=${status}`)).body.workflow_runs as { id: number }[]).map((r) => r.id);
      expect(await byStatus('queued')).toContain(runId);
      const runs = (await call(gh, gh.token, 'GET', `/repos/${org()}/svc/actions/runs?status=queued`)).body;
      expect(runs.workflow_runs.find((r: { id: number }) => r.id === runId)).toMatchObject({ status: 'queued', conclusion: null, repository: { full_name: `${org()}/svc` } });
      const r = await runner(['flow']);
      r.takeJob();
      expect(await byStatus('in_progress')).toContain(runId);
      expect(await byStatus('queued')).not.toContain(runId);
      const jobs = (await call(gh, gh.token, 'GET', `/repos/${org()}/svc/actions/runs/${runId}/jobs`)).body;
      expect(jobs.total_count).toBe(2);
      expect(jobs.jobs.map((j: { name: string; status: string; labels: string[] }) => [j.name, j.status, j.labels])).toEqual([
        ['build', 'in_progress', ['self-hosted', 'flow']],
        ['test', 'queued', ['self-hosted', 'flow']],
      ]);
      r.finishJob();
      gh.completeJob(jobIds[1]!, 'cancelled');
      expect(await byStatus('completed')).toContain(runId);
      expect(await byStatus('cancelled')).toContain(runId);
    });

    it('answers 404 for an unknown repository, a run of another repository, or another org', async () => {
      const { runId } = gh.queueRun('one', [{ labels: ['x'] }]);
      gh.queueRun('two', [{ labels: ['x'] }]);
      expect((await call(gh, gh.token, 'GET', `/repos/${org()}/nothing/actions/runs`)).status).toBe(404);
      expect((await call(gh, gh.token, 'GET', `/repos/${org()}/two/actions/runs/${runId}/jobs`)).status).toBe(404);
      expect((await call(gh, gh.token, 'GET', `/repos/other-org/one/actions/runs`)).status).toBe(404);
      expect((await call(gh, gh.token, 'GET', `/orgs/other-org/actions/runners`)).status).toBe(404);
    });

    it('keeps a repository apart from its runs: one without runs lists 200 with none; a removed one is 404 with its runs', async () => {
      gh.addRepository('empty');
      const empty = await call(gh, gh.token, 'GET', `/repos/${org()}/empty/actions/runs?status=queued`);
      expect(empty.status).toBe(200);
      expect(empty.body).toEqual({ total_count: 0, workflow_runs: [] });
      const { runId } = gh.queueRun('vanishing', [{ labels: ['x'] }]);
      expect((await call(gh, gh.token, 'GET', `/repos/${org()}/vanishing/actions/runs`)).body.total_count).toBe(1);
      gh.removeRepository('vanishing');
      expect((await call(gh, gh.token, 'GET', `/repos/${org()}/vanishing/actions/runs`)).status).toBe(404);
      expect((await call(gh, gh.token, 'GET', `/repos/${org()}/vanishing/actions/runs/${runId}/jobs`)).status).toBe(404);
      expect(gh.runs().map((r) => r.id)).not.toContain(runId);
    });

    it('pages with per_page and page, and a Link header', async () => {
      for (let i = 0; i < 3; i++) gh.queueRun('paged', [{ labels: ['p'] }]);
      const first = await call(gh, gh.token, 'GET', `/repos/${org()}/paged/actions/runs?per_page=2`);
      expect(first.body.total_count).toBe(3);
      expect(first.body.workflow_runs).toHaveLength(2);
      expect(first.headers.get('link')).toMatch(/[?&]page=2[^>]*>; rel="next"/);
      const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link')!)![1]!;
      const second = await fetch(next, { headers: { authorization: `Bearer ${gh.token}` } });
      const body = (await second.json()) as { workflow_runs: unknown[] };
      expect(body.workflow_runs).toHaveLength(1);
      expect(second.headers.get('link')).toMatch(/rel="prev"/);
      expect(second.headers.get('link')).not.toMatch(/rel="next"/);
    });
  });

  describe('lost runners and re-runs', () => {
    const repo = 'rerun';
    const run = async (id: number) => (await call(gh, gh.token, 'GET', `/repos/${org()}/${repo}/actions/runs/${id}`)).body;
    const rerun = (id: number) => call(gh, gh.token, 'POST', `/repos/${org()}/${repo}/actions/runs/${id}/rerun-failed-jobs`, {});

    it('fails the job of a runner that went offline after lostRunnerFailMs; the run completes as failure', async () => {
      gh.lostRunnerFailMs = 200;
      const { runId } = gh.queueRun(repo, [{ labels: ['self-hosted', 'rerun-lost'] }]);
      const r = await runner(['rerun-lost']);
      r.takeJob();
      r.goOffline();
      expect(await run(runId)).toMatchObject({ status: 'in_progress', run_attempt: 1 });
      await until('the lost job failed', async () => ((await run(runId)).status === 'completed' ? true : undefined));
      expect(await run(runId)).toMatchObject({ conclusion: 'failure', run_attempt: 1 });
    });

    it('re-runs the failed jobs of a completed run as a new attempt, keeping the jobs that succeeded; 403 while it runs', async () => {
      const { runId, jobIds } = gh.queueRun(repo, [{ labels: ['self-hosted', 'rerun-a'], name: 'a' }, { labels: ['self-hosted', 'rerun-b'], name: 'b' }]);
      const a = await runner(['rerun-a']);
      a.takeJob();
      const refused = await rerun(runId);
      expect(refused.status).toBe(403);
      expect(refused.body.message).toMatch(/cannot be rerun/);
      a.finishJob('failure');
      gh.completeJob(jobIds[1]!, 'success');
      expect(await run(runId)).toMatchObject({ status: 'completed', conclusion: 'failure' });
      const ok = await rerun(runId);
      expect(ok.status).toBe(201);
      expect(await run(runId)).toMatchObject({ status: 'in_progress', conclusion: null, run_attempt: 2 });
      const jobs = (await call(gh, gh.token, 'GET', `/repos/${org()}/${repo}/actions/runs/${runId}/jobs`)).body.jobs;
      expect(jobs.map((j: any) => [j.name, j.status, j.run_attempt])).toEqual([['a', 'queued', 2], ['b', 'completed', 1]]);
      expect((await rerun(runId)).status).toBe(403);
      expect(gh.mutations.filter((m) => m.op === 'rerun-failed-jobs').map((m) => m.status)).toEqual([403, 201, 403]);
    });

    it('a stall fault re-runs the run and never answers; a hang fault answers nothing and re-runs nothing', async () => {
      const { runId, jobIds } = gh.queueRun(repo, [{ labels: ['self-hosted', 'rerun-stall'] }]);
      gh.completeJob(jobIds[0]!, 'failure');
      const post = () => fetch(`${gh.url}/repos/${org()}/${repo}/actions/runs/${runId}/rerun-failed-jobs`, { method: 'POST', headers: { authorization: `Bearer ${gh.token}` }, signal: AbortSignal.timeout(300) });
      gh.fault({ op: 'rerun-failed-jobs', mode: 'hang', times: 1 });
      await expect(post()).rejects.toThrow();
      expect(await run(runId)).toMatchObject({ status: 'completed', run_attempt: 1 });
      gh.fault({ op: 'rerun-failed-jobs', mode: 'stall', times: 1 });
      await expect(post()).rejects.toThrow();
      expect(await run(runId)).toMatchObject({ status: 'queued', run_attempt: 2 });
      expect(gh.mutations.filter((m) => m.path.includes(`/runs/${runId}/`)).map((m) => [m.status, m.fault])).toEqual([[0, 'hang'], [0, 'stall']]);
    });

    it('answers 404 for the run of another repository', async () => {
      const { runId } = gh.queueRun('elsewhere', [{ labels: ['self-hosted'] }]);
      gh.queueRun(repo, [{ labels: ['self-hosted'] }]);
      expect((await call(gh, gh.token, 'GET', `/repos/${org()}/${repo}/actions/runs/${runId}`)).status).toBe(404);
      expect((await rerun(runId)).status).toBe(404);
    });
  });

  describe('rate limits', () => {
    it('reports the primary limit on every answer, per token', async () => {
      const a = await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners`);
      const b = await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners`);
      expect(a.headers.get('x-ratelimit-limit')).toBe('5000');
      expect(Number(b.headers.get('x-ratelimit-remaining'))).toBe(Number(a.headers.get('x-ratelimit-remaining')) - 1);
      expect(Number(b.headers.get('x-ratelimit-used'))).toBe(Number(a.headers.get('x-ratelimit-used')) + 1);
      expect(b.headers.get('x-ratelimit-resource')).toBe('core');
      expect(Number(b.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
      const other = await call(gh, gh.addToken(), 'GET', `/orgs/${org()}/actions/runners`);
      expect(other.headers.get('x-ratelimit-used')).toBe('1');
      const failed = await call(gh, gh.token, 'GET', `/repos/${org()}/nothing/actions/runs`);
      expect(failed.headers.get('x-ratelimit-remaining')).not.toBeNull();
    });

    it('refuses with 403 and x-ratelimit-remaining 0 once the limit is used up, and counts it per token', async () => {
      const spare = gh.addToken();
      gh.exhaustRateLimit(gh.token);
      const a = await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners`);
      expect(a.status).toBe(403);
      expect(a.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(a.body.message).toMatch(/API rate limit exceeded/);
      expect((await call(gh, spare, 'GET', `/orgs/${org()}/actions/runners`)).status).toBe(200);
      gh.exhaustRateLimit();
      expect((await call(gh, spare, 'GET', `/orgs/${org()}/actions/runners`)).status).toBe(403);
      gh.rateLimit = 2;
      gh.resetRateLimits();
      try {
        const statuses = [];
        for (let i = 0; i < 3; i++) statuses.push((await call(gh, spare, 'GET', `/orgs/${org()}/actions/runners`)).status);
        expect(statuses).toEqual([200, 200, 403]);
      } finally {
        gh.rateLimit = 5000;
      }
    });

    it('answers the primary limit with 429 when primaryLimitStatus says so, and starts afresh when the window ends', async () => {
      const token = gh.addToken();
      gh.primaryLimitStatus = 429;
      gh.rateLimitWindowMs = 1500;
      try {
        const first = await call(gh, token, 'GET', `/orgs/${org()}/actions/runners`);
        gh.exhaustRateLimit(token);
        const a = await call(gh, token, 'GET', `/orgs/${org()}/actions/runners`);
        expect(a.status).toBe(429);
        expect(a.headers.get('x-ratelimit-remaining')).toBe('0');
        expect(a.headers.get('x-ratelimit-reset')).toBe(first.headers.get('x-ratelimit-reset'));
        expect(a.headers.get('retry-after')).toBeNull();
        const reset = Number(a.headers.get('x-ratelimit-reset')) * 1000;
        await until('the window to end', () => (Date.now() > reset ? true : undefined), 10_000);
        const b = await call(gh, token, 'GET', `/orgs/${org()}/actions/runners`);
        expect(b.status).toBe(200);
        expect(b.headers.get('x-ratelimit-used')).toBe('1');
      } finally {
        gh.primaryLimitStatus = 403;
        gh.rateLimitWindowMs = 3_600_000;
      }
    });

    it('serves an ETag on GETs; If-None-Match with it answers 304 without a body, not counted; a change gives a new ETag', async () => {
      const path = `/orgs/${org()}/actions/runners`;
      const a = await call(gh, gh.token, 'GET', path);
      const etag = a.headers.get('etag')!;
      expect(etag).toMatch(/^W\/"[0-9a-f]+"$/);
      const b = await call(gh, gh.token, 'GET', path, undefined, { 'if-none-match': etag });
      expect(b.status).toBe(304);
      expect(b.body).toBeUndefined();
      expect(b.headers.get('etag')).toBe(etag);
      expect(b.headers.get('x-ratelimit-used')).toBe(a.headers.get('x-ratelimit-used'));
      expect(gh.requests.at(-1)).toMatchObject({ op: 'list-runners', status: 304 });
      await jit();
      const c = await call(gh, gh.token, 'GET', path, undefined, { 'if-none-match': etag });
      expect(c.status).toBe(200);
      expect(c.headers.get('etag')).not.toBe(etag);
      // The JIT config and this listing counted; the 304 did not.
      expect(Number(c.headers.get('x-ratelimit-used'))).toBe(Number(a.headers.get('x-ratelimit-used')) + 2);
      // Another token gets another ETag (GitHub's vary by Authorization).
      expect((await call(gh, gh.addToken(), 'GET', path)).headers.get('etag')).not.toBe(c.headers.get('etag'));
      gh.etags = false;
      try {
        const d = await call(gh, gh.token, 'GET', path, undefined, { 'if-none-match': c.headers.get('etag')! });
        expect(d.status).toBe(200);
        expect(d.headers.get('etag')).toBeNull();
      } finally {
        gh.etags = true;
      }
    });

    it.each([403, 429] as const)('answers a secondary limit with %i and retry-after on demand', async (status) => {
      gh.secondaryLimit({ status, retryAfterSeconds: 42, times: 1 });
      const a = await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners`);
      expect(a.status).toBe(status);
      expect(a.headers.get('retry-after')).toBe('42');
      expect(a.body.message).toMatch(/secondary rate limit/);
      expect((await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners`)).status).toBe(200);
    });
  });

  describe('faults and the request log', () => {
    it('injects faults per operation and logs requests by caller, never by token', async () => {
      gh.fault({ op: 'list-runners', mode: 'status', status: 502, times: 1 });
      expect((await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners`)).status).toBe(502);
      expect(gh.requests.at(-1)).toMatchObject({ op: 'list-runners', status: 502, fault: 'status', account: 'user:bot-1' });
      const before = gh.mutations.length;
      await call(gh, gh.token, 'GET', `/orgs/${org()}/actions/runners`);
      expect(gh.mutations.length).toBe(before);
      await jit();
      expect(gh.mutations.length).toBe(before + 1);
      expect(JSON.stringify(gh.requests)).not.toContain(gh.token);
    });
  });
});
