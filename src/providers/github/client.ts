// GitHub REST for RunnerTarget: the org's self-hosted runners, its runner
// groups and the queued work of followed repositories, answers validated
// with zod, failures typed (errors.ts), the primary rate limit kept from
// every answer's headers. Pages
// are counted here rather than followed from Link headers, so the token only
// ever goes to the configured API. Once GitHub answered a rate limit, the
// client sends nothing more until the time it named: retrying into a limit
// only lengthens it. The listings are asked conditionally (If-None-Match with
// the last ETag): a 304 costs nothing of the primary limit.
import { z } from 'zod';
import { ProviderError } from '../errors.js';
import { sanitize, sendRest } from '../rest.js';
import { tokenSource, type GitHubCredentials, type TokenSource } from './auth.js';
import { RateLimitedError } from '../ratelimit.js';
import { RunnerBusyError, errorForAnswer } from './errors.js';
import type { GitHubActions, GitHubRunner, GitHubUsage, JitConfigRequest, JitRunnerConfig, RateLimitStatus, RunnerGroup, RunStatus, WorkflowJob, WorkflowRun } from './types.js';

export const GITHUB_API = 'https://api.github.com';
const PER_PAGE = 100;
/** A bound on pages, so that an answer whose total_count keeps growing cannot hold a check forever. */
const MAX_PAGES = 100;
/** Bodies kept for conditional requests; the oldest unused goes first. */
const MAX_CACHED_ANSWERS = 2000;

export interface GitHubClientOptions {
  org: string;
  credentials: GitHubCredentials;
  /** Default https://api.github.com. */
  api?: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Called once per call with its operation and the HTTP status, or "lost" when no answer came. */
  onResult?: (operation: string, code: string) => void;
}

const RunnerSchema = z
  .object({
    id: z.number(),
    name: z.string(),
    status: z.string(),
    busy: z.boolean(),
    labels: z.array(z.object({ name: z.string() }).passthrough()).default([]),
    runner_group_id: z.number().optional(),
    ephemeral: z.boolean().optional(),
  })
  .passthrough();

const RunnerGroupSchema = z.object({ id: z.number(), name: z.string(), default: z.boolean().default(false), visibility: z.string().default('all') }).passthrough();

const RunSchema = z
  .object({ id: z.number(), status: z.string().nullable(), conclusion: z.string().nullable().default(null), run_attempt: z.number().optional(), created_at: z.string().optional(), repository: z.object({ full_name: z.string() }).passthrough().optional() })
  .passthrough();

const JobSchema = z
  .object({
    id: z.number(),
    run_id: z.number(),
    run_attempt: z.number().optional(),
    name: z.string().default(''),
    status: z.string(),
    conclusion: z.string().nullable().default(null),
    labels: z.array(z.string()).default([]),
    runner_id: z.number().nullable().default(null),
    runner_name: z.string().nullable().default(null),
    started_at: z.string().nullable().default(null),
  })
  .passthrough();

function toRunner(r: z.infer<typeof RunnerSchema>): GitHubRunner {
  return { id: r.id, name: r.name, status: r.status, busy: r.busy, labels: r.labels.map((l) => l.name), runnerGroupId: r.runner_group_id, ephemeral: r.ephemeral };
}

function repoPath(repo: string): string {
  const [owner, name, ...rest] = repo.split('/');
  if (!owner || !name || rest.length) throw new ProviderError('InvalidRequest', `repository "${repo}" is not owner/name`);
  return `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
}

export class GitHubClient implements GitHubActions {
  private readonly api: string;
  private readonly headers: Record<string, string> = { accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', 'user-agent': 'leasehold' };
  private readonly tokens: TokenSource;
  private lastRateLimit: RateLimitStatus | undefined;
  private limitedUntil: Date | undefined;
  private readonly cached = new Map<string, { etag: string; json: unknown }>();
  private readonly counts: GitHubUsage = { requests: 0, notModified: 0 };

  constructor(private readonly opts: GitHubClientOptions) {
    this.api = (opts.api ?? GITHUB_API).replace(/\/+$/, '');
    this.tokens = tokenSource(opts.credentials, this.api, this.headers, opts.timeoutMs ?? 30_000, opts.fetch);
  }

  get rateLimit(): RateLimitStatus | undefined {
    return this.lastRateLimit;
  }

  /** Until when the client sends nothing: a limit GitHub answered, or a primary limit reported used up. */
  get blockedUntil(): Date | undefined {
    const now = Date.now();
    const primary = this.lastRateLimit && this.lastRateLimit.remaining <= 0 ? this.lastRateLimit.resetAt : undefined;
    const until = [this.limitedUntil, primary].filter((d): d is Date => d !== undefined && d.getTime() > now).sort((a, b) => b.getTime() - a.getTime())[0];
    return until;
  }

  get usage(): GitHubUsage {
    return { ...this.counts };
  }

  private get orgPath(): string {
    return `/orgs/${encodeURIComponent(this.opts.org)}/actions/runners`;
  }

  async listRunners(signal?: AbortSignal): Promise<GitHubRunner[]> {
    const runners = await this.pages(this.orgPath, 'runners', RunnerSchema, 'list-runners', signal);
    return runners.map(toRunner);
  }

  async listRunnerGroups(signal?: AbortSignal): Promise<RunnerGroup[]> {
    const groups = await this.pages(`/orgs/${encodeURIComponent(this.opts.org)}/actions/runner-groups`, 'runner_groups', RunnerGroupSchema, 'list-runner-groups', signal);
    return groups.map((g) => ({ id: g.id, name: g.name, isDefault: g.default, visibility: g.visibility }));
  }

  async deleteRunner(id: number, signal?: AbortSignal): Promise<void> {
    await this.call('DELETE', `${this.orgPath}/${id}`, undefined, `delete-runner ${id}`, signal);
  }

  async generateJitConfig(req: JitConfigRequest, signal?: AbortSignal): Promise<JitRunnerConfig> {
    const body = { name: req.name, runner_group_id: req.runnerGroupId, labels: req.labels, work_folder: req.workFolder ?? '_work' };
    const json = z.object({ runner: RunnerSchema, encoded_jit_config: z.string().min(1) }).parse(await this.call('POST', `${this.orgPath}/generate-jitconfig`, body, `generate-jitconfig ${req.name}`, signal));
    return { runner: toRunner(json.runner), encodedJitConfig: json.encoded_jit_config };
  }

  async listRuns(repo: string, status: RunStatus, signal?: AbortSignal): Promise<WorkflowRun[]> {
    const runs = await this.pages(`${repoPath(repo)}/actions/runs`, 'workflow_runs', RunSchema, 'list-runs', signal, { status });
    return runs.map((r) => ({ id: r.id, repo: r.repository?.full_name ?? repo, status: r.status ?? '', conclusion: r.conclusion, createdAt: r.created_at }));
  }

  async listJobs(repo: string, runId: number, signal?: AbortSignal): Promise<WorkflowJob[]> {
    const jobs = await this.pages(`${repoPath(repo)}/actions/runs/${runId}/jobs`, 'jobs', JobSchema, 'list-jobs', signal, { filter: 'latest' });
    return jobs.map((j) => ({ id: j.id, runId: j.run_id, runAttempt: j.run_attempt, name: j.name, status: j.status, conclusion: j.conclusion, labels: j.labels, runnerId: j.runner_id, runnerName: j.runner_name, startedAt: j.started_at }));
  }

  async getRun(repo: string, runId: number, signal?: AbortSignal): Promise<WorkflowRun> {
    const r = RunSchema.parse(await this.call('GET', `${repoPath(repo)}/actions/runs/${runId}`, undefined, `get-run ${runId}`, signal));
    return { id: r.id, repo: r.repository?.full_name ?? repo, status: r.status ?? '', conclusion: r.conclusion, runAttempt: r.run_attempt, createdAt: r.created_at };
  }

  async rerunFailedJobs(repo: string, runId: number, signal?: AbortSignal): Promise<void> {
    await this.call('POST', `${repoPath(repo)}/actions/runs/${runId}/rerun-failed-jobs`, {}, `rerun-failed-jobs ${runId}`, signal);
  }

  private async pages<S extends z.ZodTypeAny>(path: string, field: string, item: S, operation: string, signal?: AbortSignal, query: Record<string, string> = {}): Promise<z.infer<S>[]> {
    const out: z.infer<S>[] = [];
    const shape = z.object({ total_count: z.number(), [field]: z.array(item) }).passthrough();
    for (let page = 1; page <= MAX_PAGES; page++) {
      const q = new URLSearchParams({ ...query, per_page: String(PER_PAGE), page: String(page) });
      const body = shape.parse(await this.call('GET', `${path}?${q}`, undefined, operation, signal, true)) as { total_count: number } & Record<string, z.infer<S>[]>;
      const items = body[field]!;
      out.push(...items);
      if (items.length < PER_PAGE || out.length >= body.total_count) break;
    }
    return out;
  }

  private async call(method: string, path: string, body: unknown, what: string, signal?: AbortSignal, conditional = false): Promise<unknown> {
    const operation = what.split(' ')[0]!;
    for (let attempt = 0; ; attempt++) {
      const until = this.blockedUntil;
      if (until) throw new RateLimitedError(`GitHub ${what}: not sent, GitHub's rate limit holds until ${until.toISOString()}`, until);
      const token = await this.tokens.token(signal);
      const kept = conditional ? this.cached.get(path) : undefined;
      let answer;
      try {
        answer = await sendRest({ method, url: `${this.api}${path}`, headers: { ...this.headers, authorization: `Bearer ${token}`, ...(kept ? { 'if-none-match': kept.etag } : {}) }, body, what: `GitHub ${what}`, timeoutMs: this.opts.timeoutMs ?? 30_000, signal, fetch: this.opts.fetch });
      } catch (err) {
        this.opts.onResult?.(operation, 'lost');
        throw err;
      }
      this.opts.onResult?.(operation, String(answer.status));
      this.noteRateLimit(answer.headers);
      if (answer.status === 304 && kept) {
        this.counts.notModified++;
        this.cached.delete(path);
        this.cached.set(path, kept);
        return kept.json;
      }
      this.counts.requests++;
      if (answer.status >= 200 && answer.status < 300) {
        const etag = answer.headers.get('etag');
        if (conditional && etag) this.keep(path, etag, answer.json);
        return answer.json;
      }
      // An installation token can be revoked before it expires: one more try with a fresh one.
      if (answer.status === 401 && attempt === 0 && this.tokens.invalidate()) continue;
      if (answer.status === 422 && method === 'DELETE') {
        const message = typeof (answer.json as { message?: unknown })?.message === 'string' ? (answer.json as { message: string }).message : 'the runner is running a job';
        throw new RunnerBusyError(`GitHub ${what}: HTTP 422: ${sanitize(message)}`);
      }
      const err = errorForAnswer(what, answer.status, answer.json, answer.headers);
      if (err instanceof RateLimitedError && err.retryAt) this.limitedUntil = err.retryAt;
      throw err;
    }
  }

  private keep(path: string, etag: string, json: unknown): void {
    this.cached.delete(path);
    this.cached.set(path, { etag, json });
    if (this.cached.size > MAX_CACHED_ANSWERS) this.cached.delete(this.cached.keys().next().value!);
  }

  private noteRateLimit(h: Headers): void {
    const limit = h.get('x-ratelimit-limit');
    const remaining = h.get('x-ratelimit-remaining');
    const reset = h.get('x-ratelimit-reset');
    if (limit === null || remaining === null || reset === null) return;
    this.lastRateLimit = { limit: Number(limit), remaining: Number(remaining), used: Number(h.get('x-ratelimit-used') ?? 0), resetAt: new Date(Number(reset) * 1000), resource: h.get('x-ratelimit-resource') ?? 'core' };
  }
}
