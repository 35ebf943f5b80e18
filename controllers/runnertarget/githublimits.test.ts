// A RunnerTarget check under GitHub's rate limits and with followed
// repositories GitHub no longer shows, through the reconciler with fake
// clients: a limited check stops, says until when, and nothing is asked of
// GitHub before then; a missing repository leaves the others served.
import { describe, expect, it } from '@jest/globals';
import type { RunnerTarget } from '../../src/api/index.js';
import { RateLimitedError } from '../../src/providers/ratelimit.js';
import { GitHubApiError } from '../../src/providers/github/errors.js';
import type { RateLimitStatus, WorkflowJob as GitHubJob } from '../../src/providers/github/types.js';
import { observePool, type TargetClients } from './checkrun/providers.js';
import { RunnerTargetReconciler, type RunnerTargetDeps } from './reconciler.js';
import { spec } from './testing/pool.js';

const T0 = Date.parse('2026-12-03T12:00:00Z');

/** A GitHub that counts what it is asked; each answer can be replaced by a test. */
function fakeGitHub(now: () => number) {
  const calls: string[] = [];
  const state = {
    rateLimit: undefined as RateLimitStatus | undefined,
    blockedUntil: undefined as Date | undefined,
    requests: 0,
    limitOn: undefined as string | undefined,
    limitUntil: 0,
    missing: new Set<string>(),
    runs: new Map<string, { id: number; jobs: GitHubJob[] }[]>(),
  };
  const ask = (op: string) => {
    calls.push(op);
    state.requests++;
    if (state.limitOn === op) {
      state.limitOn = undefined;
      state.blockedUntil = new Date(state.limitUntil);
      throw new RateLimitedError(`GitHub ${op}: HTTP 403: You have exceeded a secondary rate limit.`, new Date(state.limitUntil));
    }
  };
  const github = {
    get rateLimit() {
      return state.rateLimit;
    },
    get blockedUntil() {
      return state.blockedUntil && state.blockedUntil.getTime() > now() ? state.blockedUntil : undefined;
    },
    get usage() {
      return { requests: state.requests, notModified: 0 };
    },
    listRunnerGroups: async () => (ask('list-runner-groups'), [{ id: 1, name: 'Default', isDefault: true, visibility: 'all' }]),
    listRunners: async () => (ask('list-runners'), []),
    listRuns: async (repo: string, status: string) => {
      ask('list-runs');
      if (state.missing.has(repo)) throw new GitHubApiError('NotFound', `GitHub list-runs: HTTP 404: Not Found`, 404);
      return status === 'queued' ? (state.runs.get(repo) ?? []).map((r) => ({ id: r.id, repo, status: 'queued', conclusion: null, createdAt: undefined })) : [];
    },
    listJobs: async (repo: string, runId: number) => {
      ask('list-jobs');
      const run = (state.runs.get(repo) ?? []).find((r) => r.id === runId);
      if (!run) throw new GitHubApiError('NotFound', `GitHub list-jobs: HTTP 404: Not Found`, 404);
      return run.jobs;
    },
    deleteRunner: async () => ask('delete-runner'),
    generateJitConfig: async () => {
      throw new Error('not in these tests');
    },
  };
  return { github, calls, state };
}

function world(repositories = ['swack-tools/oxidex']) {
  let now = T0;
  const target: RunnerTarget = {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'RunnerTarget',
    metadata: { namespace: 'ci', name: 'pool', uid: 'u-1', generation: 1, resourceVersion: '10' },
    spec: { ...spec, floor: 0, checkInterval: '5m', github: { ...spec.github, repositories } },
  };
  const events: { type: string; reason: string; message: string }[] = [];
  const acquired: string[] = [];
  const gh = fakeGitHub(() => now);
  const clients = { gce: { list: async () => [], listAll: async () => ({ instances: [], unreachable: [] }) }, github: gh.github } as unknown as TargetClients;
  const deps: RunnerTargetDeps = {
    targets: { get: () => target, list: () => [target] } as never,
    read: async () => structuredClone(target),
    status: {
      write: async (_ref, obj, status) => {
        target.status = structuredClone(status) as RunnerTarget['status'];
        return { ...obj, status } as never;
      },
    },
    events: { record: async (_o, type, reason, message) => void events.push({ type, reason, message }) },
    providers: { clients: async () => clients, forget: () => {} },
    leases: {
      acquire: async (name) => {
        acquired.push(name);
        return { held: true, lease: { signal: new AbortController().signal, release: async () => {} } };
      },
    },
    identity: 'me',
    installationID: 'abcd',
    hostAccess: async () => ({ privateKey: '', publicKey: 'ssh-ed25519 AAAA', user: 'leasehold', port: 22 }),
    now: () => now,
  };
  const condition = (type: string) => target.status?.conditions?.find((c) => c.type === type);
  return { target, events, acquired, gh, condition, reconciler: new RunnerTargetReconciler(deps), advance: (ms: number) => (now += ms), now: () => now };
}

describe('a check that meets a GitHub rate limit', () => {
  it('stops there, says RateLimited until the time GitHub named, asks GitHub nothing before it whatever wakes the target, and checks again at it', async () => {
    const w = world();
    const until = T0 + 600_000;
    w.gh.state.limitOn = 'list-runners';
    w.gh.state.limitUntil = until;
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 600_000 });
    const asked = w.gh.calls.length;
    expect(w.gh.calls.at(-1)).toBe('list-runners');
    expect(w.condition('RateLimited')).toMatchObject({ status: 'True', reason: 'GitHubRateLimit', message: expect.stringContaining(new Date(until).toISOString()) });
    expect(w.condition('Ready')).toMatchObject({ status: 'False', reason: 'RateLimited' });
    expect(w.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'RateLimited' })]);

    // A wake-up (a status write, a spec change) while limited checks nothing.
    w.advance(1_000);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 599_000 });
    w.target.metadata!.generation = 2;
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 599_000 });
    expect(w.gh.calls).toHaveLength(asked);
    expect(w.acquired).toHaveLength(1);

    // At the time GitHub named the check runs at once, not an interval after the limited one, and the condition clears.
    w.advance(599_000);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: 300_000 });
    expect(w.gh.calls.length).toBeGreaterThan(asked);
    expect(w.condition('RateLimited')).toMatchObject({ status: 'False', reason: 'WithinLimit' });
    expect(w.condition('Ready')).toMatchObject({ status: 'True', reason: 'CheckCompleted' });
  });

  it('is not started when the primary limit has less left than the last check used, and waits for the reset', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    const used = w.gh.calls.length;
    expect(used).toBeGreaterThan(0);
    expect(w.condition('RateLimited')).toBeUndefined();
    const resetAt = w.now() + 900_000;
    w.gh.state.rateLimit = { limit: 5000, remaining: used - 1, used: 5000 - used + 1, resetAt: new Date(resetAt), resource: 'core' };
    w.advance(300_000);
    expect(await w.reconciler.reconcile('ci/pool')).toEqual({ requeueAfter: resetAt - w.now() });
    expect(w.gh.calls).toHaveLength(used);
    expect(w.condition('RateLimited')).toMatchObject({ status: 'True', message: expect.stringContaining(`${used - 1} requests left until ${new Date(resetAt).toISOString()}`) });
    // With enough left (the window reset) it runs again.
    w.gh.state.rateLimit = { limit: 5000, remaining: 5000, used: 0, resetAt: new Date(resetAt + 3_600_000), resource: 'core' };
    w.advance(resetAt - w.now());
    await w.reconciler.reconcile('ci/pool');
    // 20 minutes on, the runner group's kept id has passed its time and is listed again too.
    expect(w.gh.calls.length).toBe(2 * used);
    expect(w.condition('RateLimited')).toMatchObject({ status: 'False' });
  });

  it('starts when as many are left as the last check used with headroom', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    const used = w.gh.calls.length;
    w.gh.state.rateLimit = { limit: 5000, remaining: Math.ceil(used * 1.25), used: 0, resetAt: new Date(w.now() + 900_000), resource: 'core' };
    w.advance(300_000);
    await w.reconciler.reconcile('ci/pool');
    // The runner group's id is kept from the first check.
    expect(w.gh.calls.length).toBe(2 * used - 1);
  });
});

describe('a requested check', () => {
  it('does not wait for the sample window: it runs now and its sample does not count', async () => {
    const w = world();
    // The observation is stamped with the real clock: the last sample is 4 min before it, the window 1 min away.
    const sample = { at: new Date(Date.now() - 240_000).toISOString(), queued: 0, running: 0, idleRunners: 0, busyRunners: 0 };
    w.target.status = { lastSample: sample, lastCheckAt: sample.at, observedGeneration: 1 };
    w.reconciler.requestCheck('ci/pool');
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(1);
    expect(w.condition('Ready')).toMatchObject({ status: 'True', reason: 'CheckCompleted' });
    expect(w.target.status?.lastSample).toEqual(sample);
  });
});

describe('the runner group id', () => {
  it('is listed at the first check only; the next checks use the kept id', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    w.advance(300_000);
    await w.reconciler.reconcile('ci/pool');
    w.advance(300_000);
    await w.reconciler.reconcile('ci/pool');
    expect(w.acquired).toHaveLength(3);
    expect(w.gh.calls.filter((c) => c === 'list-runner-groups')).toHaveLength(1);
    expect(w.gh.calls.filter((c) => c === 'list-runners')).toHaveLength(3);
  });
});

describe('a followed repository GitHub answers 404 for', () => {
  const job = (id: number, runId: number): GitHubJob => ({ id, runId, name: 'build', status: 'queued', conclusion: null, labels: ['self-hosted'], runnerId: null, runnerName: null, startedAt: null });

  it('is left out of the observation and named; the other repositories are served', async () => {
    const w = world(['swack-tools/gone', 'swack-tools/oxidex']);
    w.gh.state.missing.add('swack-tools/gone');
    w.gh.state.runs.set('swack-tools/oxidex', [{ id: 7, jobs: [job(70, 7)] }]);
    const seen = await observePool(w.target, { gce: { list: async () => [], listAll: async () => ({ instances: [], unreachable: [] }) }, github: w.gh.github } as unknown as TargetClients, 'abcd');
    expect(seen.missingRepositories).toEqual(['swack-tools/gone']);
    expect(seen.jobs.map((j) => j.id)).toEqual([70]);
  });

  it('a run deleted between its listing and its jobs is skipped, not a missing repository', async () => {
    const w = world();
    w.gh.state.runs.set('swack-tools/oxidex', [{ id: 7, jobs: [job(70, 7)] }]);
    const github = { ...w.gh.github, listRuns: async () => [{ id: 7 }, { id: 8 }] };
    const seen = await observePool(w.target, { gce: { list: async () => [], listAll: async () => ({ instances: [], unreachable: [] }) }, github } as unknown as TargetClients, 'abcd');
    expect(seen.missingRepositories).toBeUndefined();
    expect(seen.jobs.map((j) => j.id)).toEqual([70]);
  });

  it('another failure of a repository still fails the check', async () => {
    const w = world();
    const github = { ...w.gh.github, listRuns: async () => Promise.reject(new GitHubApiError('Unknown', 'GitHub list-runs: HTTP 502', 502, { answerLost: true })) };
    await expect(observePool(w.target, { gce: { list: async () => [], listAll: async () => ({ instances: [], unreachable: [] }) }, github } as unknown as TargetClients, 'abcd')).rejects.toThrow('HTTP 502');
  });

  it('the check completes, RepositoryMissing names it and the fix, and clears once GitHub shows it again', async () => {
    const w = world(['swack-tools/gone', 'swack-tools/oxidex']);
    w.gh.state.missing.add('swack-tools/gone');
    await w.reconciler.reconcile('ci/pool');
    expect(w.condition('Ready')).toMatchObject({ status: 'True', reason: 'CheckCompleted' });
    const c = w.condition('RepositoryMissing');
    expect(c).toMatchObject({ status: 'True', reason: 'RepositoryNotFound' });
    expect(c!.message).toContain('swack-tools/gone');
    expect(c!.message).not.toContain('swack-tools/oxidex');
    expect(c!.message).toContain('spec.github.repositories');
    w.gh.state.missing.clear();
    w.advance(300_000);
    await w.reconciler.reconcile('ci/pool');
    expect(w.condition('RepositoryMissing')).toMatchObject({ status: 'False', reason: 'AllFound' });
  });

  it('a target whose repositories were always found carries no RepositoryMissing condition', async () => {
    const w = world();
    await w.reconciler.reconcile('ci/pool');
    expect(w.condition('RepositoryMissing')).toBeUndefined();
  });
});
