// The org's Actions state: self-hosted runners (registered with single-use
// JIT configs), runner groups, and workflow runs and jobs that the test
// queues and fake runners take and finish. A runner's `busy` as the API shows
// it lags the truth by busyLagMs, as GitHub's does. Runners may go offline on
// their own (offlineRatePerHour, seeded); a JIT runner is removed
// jitRemovalLagMs after its job, offline meanwhile; a registration whose
// runner never connected is removed zombieRemovalMs after it was made. These
// clocks are read whenever the runners are, so no timer runs.
// it lags the truth by busyLagMs, as GitHub's does. A job whose runner is
// lost (offline, or removed) fails lostRunnerFailMs later, as GitHub fails a
// job whose runner stopped answering; its run then completes as failure and
// may be re-run (its failed jobs queued again as a new attempt).
import { randomBytes } from 'node:crypto';
import { HttpError } from '../kit/http.js';
import { seededRandom } from '../kit/faults.js';
import type { ApiJob, ApiRun, ApiRunner, Conclusion, FakeRunner, RunnerLabel } from './types.js';

interface RunnerState {
  id: number;
  name: string;
  groupId: number;
  labels: RunnerLabel[];
  online: boolean;
  /** Since when it is offline (ms), while it is. */
  offlineSince: number | undefined;
  /** When it took its current job (ms), if it runs one. */
  busySince: number | undefined;
  jobId: number | undefined;
  secret: string;
  registered: boolean;
  /** When generate-jitconfig made it (ms). */
  createdAt: number;
  /** When GitHub removes it (its job done, the removal lagging), if it does. */
  removeAt: number | undefined;
  /** Up to when its chance of going offline on its own was drawn (ms). */
  drawnTo: number;
}

interface RunState {
  id: number;
  repo: string;
  runNumber: number;
  attempt: number;
  /** The latest attempt of each job. */
  jobIds: number[];
  createdAt: string;
  updatedAt: string;
}

export interface ActionsSettings {
  busyLagMs: number;
  deleteBusySucceeds: boolean;
  jitRemovalLagMs: number;
  zombieRemovalMs: number;
  offlineRatePerHour: number;
  lostRunnerFailMs: number;
}

/** A runner group as `GET /orgs/{org}/actions/runner-groups` shows it. */
export interface ApiRunnerGroup {
  id: number;
  name: string;
  visibility: 'all' | 'selected' | 'private';
  default: boolean;
  runners_url: string;
  inherited: boolean;
  allows_public_repositories: boolean;
  restricted_to_workflows: boolean;
  selected_workflows: string[];
  workflow_restrictions_read_only: boolean;
}

export class Actions {
  private readonly runnersById = new Map<number, RunnerState>();
  private readonly runsById = new Map<number, RunState>();
  private readonly jobsById = new Map<number, ApiJob>();
  private readonly repos = new Map<string, number>();
  /** Every org has the group Default, id 1. */
  /** Jobs whose runner was removed while it ran them, and when. */
  private readonly orphanedJobs = new Map<number, number>();
  private readonly groups = new Map<number, { id: number; name: string; visibility: ApiRunnerGroup['visibility'] }>([[1, { id: 1, name: 'Default', visibility: 'all' }]]);
  private seq = 1000;
  private labelSeq = 1;
  /** Told of each job that is queued, starts or completes (the workflow_job webhook event). */
  onJob: ((job: ApiJob, repo: string, action: 'queued' | 'in_progress' | 'completed') => void) | undefined;
  private readonly random: () => number;

  constructor(
    readonly org: string,
    private readonly settings: ActionsSettings,
    private readonly origin: () => string,
    seed = 1,
  ) {
    this.random = seededRandom(seed);
  }

  /**
   * Brings the runners up to now: lagged JIT removals and zombie
   * registrations that are due go, and each online runner goes offline with
   * the chance offlineRatePerHour gives the time since the last look.
   */
  private advance(now = Date.now()): void {
    for (const r of [...this.runnersById.values()]) {
      if ((r.removeAt !== undefined && now >= r.removeAt) || (!r.registered && now - r.createdAt >= this.settings.zombieRemovalMs)) {
        this.runnersById.delete(r.id);
        continue;
      }
      const rate = this.settings.offlineRatePerHour;
      if (r.online && rate > 0 && now > r.drawnTo && this.random() < 1 - Math.exp((-rate * (now - r.drawnTo)) / 3_600_000)) {
        r.online = false;
        r.offlineSince = now;
      }
      r.drawnTo = Math.max(r.drawnTo, now);
    }
  }

  /** A runner goes offline as if its process died or its host rebooted: a job it ran stays in progress. */
  runnerOffline(name: string): void {
    this.advance();
    const r = [...this.runnersById.values()].find((x) => x.name === name);
    if (!r) throw new Error(`no runner ${name}`);
    if (r.online) r.offlineSince = Date.now();
    r.online = false;
  }

  runnerGroups(): ApiRunnerGroup[] {
    return [...this.groups.values()]
      .sort((a, b) => a.id - b.id)
      .map((g) => ({
        ...g,
        default: g.id === 1,
        runners_url: `${this.origin()}/orgs/${this.org}/actions/runner-groups/${g.id}/runners`,
        inherited: false,
        allows_public_repositories: false,
        restricted_to_workflows: false,
        selected_workflows: [],
        workflow_restrictions_read_only: false,
      }));
  }

  addRunnerGroup(name: string, visibility: ApiRunnerGroup['visibility'] = 'all'): number {
    if ([...this.groups.values()].some((g) => g.name.toLowerCase() === name.toLowerCase())) throw new Error(`a runner group named ${name} exists`);
    const id = this.next();
    this.groups.set(id, { id, name, visibility });
    return id;
  }

  /** Removes a group (not Default); its runners move to Default, as GitHub does. */
  removeRunnerGroup(id: number): void {
    if (id === 1 || !this.groups.delete(id)) throw new Error(`no runner group ${id} to remove (Default cannot be removed)`);
    for (const r of this.runnersById.values()) if (r.groupId === id) r.groupId = 1;
  }

  private next(): number {
    return ++this.seq;
  }

  repoId(repo: string): number | undefined {
    return this.repos.get(repo);
  }

  runnerView(r: RunnerState, now = Date.now()): ApiRunner {
    // GitHub's busy flag lags: it reads false for a while after a job started.
    const busy = r.busySince !== undefined && now - r.busySince >= this.settings.busyLagMs;
    return { id: r.id, name: r.name, os: 'Linux', status: r.online ? 'online' : 'offline', busy, ephemeral: true, runner_group_id: r.groupId, labels: r.labels.map((l) => ({ ...l })) };
  }

  runners(): ApiRunner[] {
    this.advance();
    this.failLostJobs();
    return [...this.runnersById.values()].sort((a, b) => a.id - b.id).map((r) => this.runnerView(r));
  }

  generateJitConfig(body: Record<string, unknown>): { runner: ApiRunner; encoded_jit_config: string } {
    const { name, runner_group_id: groupId, labels, work_folder: workFolder } = body;
    if (typeof name !== 'string' || name === '') throw new HttpError(422, undefined, 'Invalid input: object is missing required key: name.');
    if (groupId === undefined) throw new HttpError(422, undefined, 'Invalid input: object is missing required key: runner_group_id.');
    if (typeof groupId !== 'number' || !this.groups.has(groupId)) throw new HttpError(404, undefined, 'Not Found');
    if (!Array.isArray(labels) || labels.length < 1 || labels.length > 100 || !labels.every((l) => typeof l === 'string' && l !== '')) {
      throw new HttpError(422, undefined, 'Invalid input: labels must list 1 to 100 label names.');
    }
    if (workFolder !== undefined && typeof workFolder !== 'string') throw new HttpError(422, undefined, 'Invalid input: work_folder must be a string.');
    this.advance();
    if ([...this.runnersById.values()].some((r) => r.name === name)) throw new HttpError(409, undefined, `Already exists - A runner with the name ${name} already exists.`);
    const r: RunnerState = {
      id: this.next(),
      name,
      groupId,
      labels: [{ id: this.labelSeq++, name: 'self-hosted', type: 'read-only' as const }, ...(labels as string[]).map((l) => ({ id: this.labelSeq++, name: l, type: 'custom' as const }))],
      online: false,
      offlineSince: undefined,
      busySince: undefined,
      jobId: undefined,
      secret: randomBytes(24).toString('hex'),
      registered: false,
      createdAt: Date.now(),
      removeAt: undefined,
      drawnTo: Date.now(),
    };
    this.runnersById.set(r.id, r);
    const file = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64');
    const config = {
      '.runner': file({ agentId: r.id, agentName: r.name, poolId: groupId, serverUrl: `${this.origin()}/_runner`, gitHubUrl: `${this.origin()}/${this.org}`, workFolder: workFolder ?? '_work', ephemeral: true }),
      '.credentials': file({ scheme: 'OAuthAccessToken', data: { token: r.secret } }),
    };
    return { runner: this.runnerView(r), encoded_jit_config: Buffer.from(JSON.stringify(config)).toString('base64') };
  }

  deleteRunner(id: number): void {
    this.advance();
    this.failLostJobs();
    const r = this.runnersById.get(id);
    if (!r) throw new HttpError(404, undefined, 'Not Found');
    if (r.jobId !== undefined && !this.settings.deleteBusySucceeds) throw new HttpError(422, undefined, `Bad request - Runner "${r.name}" is still running a job.`);
    if (r.jobId !== undefined) this.orphanedJobs.set(r.jobId, Date.now());
    this.runnersById.delete(id);
  }

  /**
   * Jobs whose runner went offline, or was removed, lostRunnerFailMs ago
   * fail (GitHub: "The self-hosted runner lost communication with the
   * server"); the ephemeral runner goes with its job.
   */
  private failLostJobs(now = Date.now()): void {
    const wait = this.settings.lostRunnerFailMs;
    for (const r of [...this.runnersById.values()]) {
      if (r.jobId !== undefined && !r.online && r.offlineSince !== undefined && now - r.offlineSince >= wait) this.completeJob(r.jobId, 'failure');
    }
    for (const [jobId, since] of [...this.orphanedJobs]) {
      if (now - since < wait) continue;
      this.orphanedJobs.delete(jobId);
      if (this.jobsById.get(jobId)?.status === 'in_progress') this.completeJob(jobId, 'failure');
    }
  }

  /** Registers the runner a JIT config names; a config works once, and not for a deleted runner. */
  startRunner(encoded: string): FakeRunner {
    let id: number;
    let secret: string;
    try {
      const config = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8')) as Record<string, string>;
      const runner = JSON.parse(Buffer.from(config['.runner']!, 'base64').toString('utf8')) as { agentId: number };
      const creds = JSON.parse(Buffer.from(config['.credentials']!, 'base64').toString('utf8')) as { data: { token: string } };
      id = runner.agentId;
      secret = creds.data.token;
    } catch {
      throw new Error('not a JIT config this emulator issued');
    }
    this.advance();
    const r = this.runnersById.get(id);
    if (!r || r.secret !== secret) throw new Error(`runner ${id} does not exist (deleted, or the config is not one this emulator issued)`);
    if (r.registered) throw new Error(`the JIT config of runner ${r.name} was used already; it is single use`);
    r.registered = true;
    r.online = true;
    r.drawnTo = Date.now();
    r.offlineSince = undefined;
    return this.fakeRunner(r);
  }

  private fakeRunner(r: RunnerState): FakeRunner {
    const actions = this;
    return {
      id: r.id,
      name: r.name,
      get busy() {
        return r.jobId !== undefined;
      },
      takeJob: () => {
        actions.advance();
        if (!actions.runnersById.has(r.id) || r.removeAt !== undefined) throw new Error(`runner ${r.name} was removed`);
        // GitHub gives no job to a runner that is not connected.
        if (!r.online) return undefined;
        if (r.jobId !== undefined) throw new Error(`runner ${r.name} runs job ${r.jobId} already`);
        const names = new Set(r.labels.map((l) => l.name.toLowerCase()));
        const job = [...actions.jobsById.values()].filter((j) => j.status === 'queued' && j.labels.every((l) => names.has(l.toLowerCase()))).sort((a, b) => a.id - b.id)[0];
        if (!job) return undefined;
        Object.assign(job, { status: 'in_progress', started_at: new Date().toISOString(), runner_id: r.id, runner_name: r.name, runner_group_id: r.groupId });
        r.jobId = job.id;
        r.busySince = Date.now();
        actions.touch(job.run_id);
        actions.jobEvent(job, 'in_progress');
        return { ...job, labels: [...job.labels] };
      },
      finishJob: (conclusion: Conclusion = 'success') => {
        if (r.jobId === undefined) throw new Error(`runner ${r.name} runs no job`);
        actions.completeJob(r.jobId, conclusion);
      },
      goOffline: () => {
        if (r.online) r.offlineSince = Date.now();
        r.online = false;
      },
    };
  }

  /** A repository exists apart from its runs: one without any lists none (200), an unknown one is 404. */
  addRepo(repo: string): void {
    if (!this.repos.has(repo)) this.repos.set(repo, this.next());
  }

  /** The repository is gone, and its runs with it (a job a runner holds may still be finished). */
  removeRepo(repo: string): void {
    if (!this.repos.delete(repo)) throw new Error(`no repository ${repo}`);
    for (const [id, run] of this.runsById) if (run.repo === repo) this.runsById.delete(id);
  }

  queueRun(repo: string, jobs: { labels: string[]; name?: string }[]): { runId: number; jobIds: number[] } {
    this.addRepo(repo);
    const now = new Date().toISOString();
    const run: RunState = { id: this.next(), repo, runNumber: this.runsById.size + 1, attempt: 1, jobIds: [], createdAt: now, updatedAt: now };
    this.runsById.set(run.id, run);
    for (const [n, j] of jobs.entries()) {
      const job: ApiJob = {
        id: this.next(),
        run_id: run.id,
        run_attempt: 1,
        workflow_name: 'ci',
        name: j.name ?? `job-${n + 1}`,
        status: 'queued',
        conclusion: null,
        labels: [...j.labels],
        runner_id: null,
        runner_name: null,
        runner_group_id: null,
        created_at: now,
        started_at: null,
        completed_at: null,
        head_branch: 'main',
      };
      this.jobsById.set(job.id, job);
      run.jobIds.push(job.id);
    }
    for (const id of run.jobIds) this.jobEvent(this.jobsById.get(id)!, 'queued');
    return { runId: run.id, jobIds: [...run.jobIds] };
  }

  completeJob(jobId: number, conclusion: Conclusion = 'success'): void {
    const job = this.jobsById.get(jobId);
    if (!job) throw new Error(`no job ${jobId}`);
    Object.assign(job, { status: 'completed', conclusion, completed_at: new Date().toISOString() });
    const runner = [...this.runnersById.values()].find((r) => r.jobId === jobId);
    // A JIT runner is ephemeral: after its one job its process exits (offline) and GitHub removes it, a little later.
    if (runner) {
      if (this.settings.jitRemovalLagMs <= 0) this.runnersById.delete(runner.id);
      else Object.assign(runner, { online: false, jobId: undefined, busySince: undefined, removeAt: Date.now() + this.settings.jitRemovalLagMs });
    }
    this.touch(job.run_id);
    this.jobEvent(job, 'completed');
  }

  private jobEvent(job: ApiJob, action: 'queued' | 'in_progress' | 'completed'): void {
    const repo = this.runsById.get(job.run_id)?.repo;
    if (repo !== undefined) this.onJob?.({ ...job, labels: [...job.labels] }, repo, action);
  }

  private touch(runId: number): void {
    const run = this.runsById.get(runId);
    if (run) run.updatedAt = new Date().toISOString();
  }

  runView(run: RunState): ApiRun {
    const jobs = run.jobIds.map((id) => this.jobsById.get(id)!);
    const status = jobs.every((j) => j.status === 'completed') ? 'completed' : jobs.every((j) => j.status === 'queued') ? 'queued' : 'in_progress';
    const conclusion = status !== 'completed' ? null : jobs.some((j) => j.conclusion === 'failure') ? 'failure' : jobs.some((j) => j.conclusion === 'cancelled') ? 'cancelled' : 'success';
    const name = run.repo;
    return { id: run.id, name: 'ci', run_number: run.runNumber, run_attempt: run.attempt, status, conclusion, head_branch: 'main', created_at: run.createdAt, updated_at: run.updatedAt, repository: { id: this.repos.get(run.repo)!, name, full_name: `${this.org}/${name}` } };
  }

  runs(repo?: string): ApiRun[] {
    this.failLostJobs();
    return [...this.runsById.values()].filter((r) => repo === undefined || r.repo === repo).sort((a, b) => b.id - a.id).map((r) => this.runView(r));
  }

  run(runId: number): ApiRun | undefined {
    this.failLostJobs();
    const run = this.runsById.get(runId);
    return run && this.runView(run);
  }

  /**
   * POST .../rerun-failed-jobs: a completed run's failed and cancelled jobs
   * are queued again as its next attempt (run_attempt + 1), the others kept;
   * a run not completed, or with nothing failed, cannot be re-run (403).
   */
  rerunFailedJobs(runId: number): void {
    this.failLostJobs();
    const run = this.runsById.get(runId);
    if (!run) throw new HttpError(404, undefined, 'Not Found');
    const jobs = run.jobIds.map((id) => this.jobsById.get(id)!);
    if (!jobs.every((j) => j.status === 'completed')) throw new HttpError(403, undefined, 'This workflow run is not completed and cannot be rerun.');
    if (!jobs.some((j) => j.conclusion === 'failure' || j.conclusion === 'cancelled')) throw new HttpError(403, undefined, 'This workflow run has no failed jobs and cannot be rerun.');
    run.attempt += 1;
    const now = new Date().toISOString();
    run.jobIds = jobs.map((j) => {
      if (j.conclusion !== 'failure' && j.conclusion !== 'cancelled') return j.id;
      const again: ApiJob = { ...j, labels: [...j.labels], id: this.next(), run_attempt: run.attempt, status: 'queued', conclusion: null, runner_id: null, runner_name: null, runner_group_id: null, created_at: now, started_at: null, completed_at: null };
      this.jobsById.set(again.id, again);
      return again.id;
    });
    this.touch(run.id);
    for (const id of run.jobIds) if (this.jobsById.get(id)!.status === 'queued') this.jobEvent(this.jobsById.get(id)!, 'queued');
  }

  jobsOf(runId: number): ApiJob[] | undefined {
    this.failLostJobs();
    const run = this.runsById.get(runId);
    return run?.jobIds.map((id) => ({ ...this.jobsById.get(id)!, labels: [...this.jobsById.get(id)!.labels] }));
  }

  runRepo(runId: number): string | undefined {
    return this.runsById.get(runId)?.repo;
  }

  jobs(): ApiJob[] {
    this.failLostJobs();
    return [...this.jobsById.values()].map((j) => ({ ...j, labels: [...j.labels] }));
  }
}
