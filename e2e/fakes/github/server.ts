// An HTTP emulator of the GitHub REST API's Actions runner, runner group and
// workflow endpoints and GitHub App installation tokens, for tests of the controller's
// GitHub client and RunnerTarget. Tests steer it through the returned handle
// (see README.md).
//
// The parts: actions.ts (runners, JIT configs, runs and jobs, the busy-flag
// lag, fake runners), auth.ts (tokens and the App), limits.ts (primary and
// secondary rate limits), routes.ts (the API); the HTTP pipeline, faults and
// request log come from ../kit.
import { RestApi } from '../kit/api.js';
import { listen } from '../kit/http.js';
import { RecordLog } from '../kit/log.js';
import { Actions } from './actions.js';
import { GitHubAuth, type Caller } from './auth.js';
import { RateLimits } from './limits.js';
import { GITHUB_ERRORS, githubRoutes } from './routes.js';
import { Hooks, workflowJobView } from './hooks.js';
import type { GitHubEmulator, GitHubEmulatorOptions, GitHubOp, RequestRecord } from './types.js';

export type * from './types.js';

const MUTATING: readonly GitHubOp[] = ['delete-runner', 'generate-jitconfig', 'rerun-failed-jobs', 'create-hook', 'delete-hook', 'ping-hook', 'redeliver-hook'];

export async function startGitHubEmulator(opts: GitHubEmulatorOptions = {}): Promise<GitHubEmulator> {
  const settings = {
    rateLimit: opts.rateLimit ?? 5000,
    rateLimitWindowMs: opts.rateLimitWindowMs ?? 3_600_000,
    primaryLimitStatus: opts.primaryLimitStatus ?? (403 as 403 | 429),
    etags: opts.etags ?? true,
    busyLagMs: opts.busyLagMs ?? 0,
    deleteBusySucceeds: opts.deleteBusySucceeds ?? false,
    installationTokenTtlMs: opts.installationTokenTtlMs ?? 3_600_000,
    jitRemovalLagMs: opts.jitRemovalLagMs ?? 3_000,
    zombieRemovalMs: opts.zombieRemovalMs ?? 86_400_000,
    offlineRatePerHour: opts.offlineRatePerHour ?? 0,
    lostRunnerFailMs: opts.lostRunnerFailMs ?? 600_000,
    webhookRetry: opts.webhookRetry as GitHubEmulatorOptions['webhookRetry'],
  };
  let origin = '';
  const auth = new GitHubAuth(opts.token);
  const actions = new Actions(opts.org ?? 'leasehold-org', settings, () => origin, opts.seed ?? 1);
  const limits = new RateLimits(() => settings);
  const hooks = new Hooks(actions.org, () => origin, 4_200_001, (repo) => actions.repoId(repo), settings);
  actions.onJob = (job, repo, action) => hooks.emit(repo, 'workflow_job', { action, workflow_job: workflowJobView(job, repo, actions.org, origin) });
  const requests = new RecordLog<RequestRecord>();
  const api: RestApi<GitHubOp, Caller, undefined> = new RestApi<GitHubOp, Caller, undefined>({
    basePath: '',
    routes: githubRoutes({ actions, hooks, auth, limits, origin: () => origin, installationTokenTtlMs: () => settings.installationTokenTtlMs, etags: () => settings.etags, errorReply: (e) => api.errorReply(e) }),
    errors: GITHUB_ERRORS,
    callerOf: (credential) => auth.callerOf(credential),
    requests,
  });
  const server = await listen({ host: opts.host, port: opts.port, mounts: [api], unmounted: { status: 404, body: { message: 'Not Found' } } });
  origin = server.origin;

  const handle = {
    url: origin,
    org: actions.org,
    token: auth.firstToken,
    app: { ...auth.app },
    addToken: () => auth.addToken(),
    exhaustRateLimit: (token?: string, resetInMs?: number) => {
      if (token === undefined) return limits.exhaust(undefined, resetInMs);
      const caller = auth.callerOf(token);
      if (!caller) throw new Error('no such token');
      limits.exhaust(caller.id, resetInMs);
    },
    resetRateLimits: () => limits.reset(),
    secondaryLimit: ({ status, retryAfterSeconds, times }: { status: 403 | 429; retryAfterSeconds: number; times?: number }) => limits.armSecondary(status, retryAfterSeconds, times ?? 1),
    addRepository: (repo: string) => actions.addRepo(repo),
    removeRepository: (repo: string) => actions.removeRepo(repo),
    queueRun: (repo: string, jobs: { labels: string[]; name?: string }[]) => actions.queueRun(repo, jobs),
    completeJob: (jobId: number, conclusion?: 'success' | 'failure' | 'cancelled') => actions.completeJob(jobId, conclusion),
    startRunner: (encoded: string) => actions.startRunner(encoded),
    runnerOffline: (name: string) => actions.runnerOffline(name),
    addRunnerGroup: (name: string, visibility?: 'all' | 'selected' | 'private') => actions.addRunnerGroup(name, visibility),
    removeRunnerGroup: (id: number) => actions.removeRunnerGroup(id),
    hookDeliveries: () => hooks.all(),
    hooksIdle: () => hooks.idle(),
    runners: () => actions.runners(),
    jobs: () => actions.jobs(),
    runs: () => actions.runs(),
    fault: (spec: Parameters<GitHubEmulator['fault']>[0]) => api.faults.add(spec),
    clearFaults: () => api.faults.clear(),
    get requests() {
      return requests.items.map((r) => ({ ...r }));
    },
    get mutations() {
      return requests.items.filter((r) => MUTATING.includes(r.op as GitHubOp)).map((r) => ({ ...r }));
    },
    stop: () => server.close(),
  } as Omit<GitHubEmulator, keyof typeof settings>;
  for (const k of Object.keys(settings) as (keyof typeof settings)[]) {
    Object.defineProperty(handle, k, {
      enumerable: true,
      get: () => settings[k],
      set: (v: never) => {
        settings[k] = v;
      },
    });
  }
  return handle as GitHubEmulator;
}
