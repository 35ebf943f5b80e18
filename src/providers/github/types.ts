// The one interface RunnerTarget's controller has to GitHub: the org's
// self-hosted runners (list, delete, a JIT config for a new one), its runner
// groups, and the
// queued work of the repositories it follows, and re-runs of failed jobs. Typed errors in errors.ts.

export interface GitHubRunner {
  id: number;
  name: string;
  /** "online" or "offline". */
  status: string;
  /** GitHub's flag: it lags a job's start by 25-60 s and may read false mid-job, so never the only proof a runner is idle. */
  busy: boolean;
  labels: string[];
  runnerGroupId: number | undefined;
  ephemeral: boolean | undefined;
}

/** A runner group of the org. */
export interface RunnerGroup {
  id: number;
  name: string;
  /** GitHub's Default group. */
  isDefault: boolean;
  /** all, selected or private: which repositories' jobs its runners take. */
  visibility: string;
}

export interface JitConfigRequest {
  name: string;
  runnerGroupId: number;
  /** Custom labels, 1 to 100. */
  labels: string[];
  /** Default "_work". */
  workFolder?: string;
}

export interface JitRunnerConfig {
  runner: GitHubRunner;
  /** Secret: whoever has it can register a runner in the org. Deliver it over the pinned SSH connection only; never log it. */
  encodedJitConfig: string;
}

export type RunStatus = 'queued' | 'in_progress' | 'completed';

export interface WorkflowRun {
  id: number;
  /** "owner/name". */
  repo: string;
  status: string;
  conclusion: string | null;
  /** 1 for the first attempt; a re-run makes a new attempt. */
  runAttempt?: number | undefined;
  createdAt: string | undefined;
}

export interface WorkflowJob {
  id: number;
  runId: number;
  runAttempt?: number | undefined;
  name: string;
  status: string;
  conclusion: string | null;
  /** The job's `runs-on` labels. */
  labels: string[];
  runnerId: number | null;
  runnerName: string | null;
  startedAt: string | null;
}

/** The primary rate limit as the last answer reported it. */
export interface RateLimitStatus {
  limit: number;
  remaining: number;
  used: number;
  resetAt: Date;
  resource: string;
}

/** What a client sent: answers that counted against the primary limit, and 304s (conditional requests answered from the kept body, which do not). */
export interface GitHubUsage {
  requests: number;
  notModified: number;
}

export interface GitHubActions {
  /** Every self-hosted runner of the org (all pages). */
  listRunners(signal?: AbortSignal): Promise<GitHubRunner[]>;
  /** Every runner group of the org (all pages). */
  listRunnerGroups(signal?: AbortSignal): Promise<RunnerGroup[]>;
  /** Deregisters a runner; RunnerBusyError while GitHub says it runs a job, NotFound when it is gone already. */
  deleteRunner(id: number, signal?: AbortSignal): Promise<void>;
  generateJitConfig(req: JitConfigRequest, signal?: AbortSignal): Promise<JitRunnerConfig>;
  /** The runs of `repo` ("owner/name") with that status (all pages). */
  listRuns(repo: string, status: RunStatus, signal?: AbortSignal): Promise<WorkflowRun[]>;
  /** The jobs of the run's latest attempt (all pages). */
  listJobs(repo: string, runId: number, signal?: AbortSignal): Promise<WorkflowJob[]>;
  /** One run of `repo`; NotFound when it is gone. */
  getRun(repo: string, runId: number, signal?: AbortSignal): Promise<WorkflowRun>;
  /** Re-runs the failed jobs of a completed run (and the jobs that need them) as a new attempt; GitHub answers 403 while the run is not completed. */
  rerunFailedJobs(repo: string, runId: number, signal?: AbortSignal): Promise<void>;
  /** From the last answer that carried x-ratelimit-* headers; undefined before any. */
  readonly rateLimit: RateLimitStatus | undefined;
  /** Until when the client sends nothing (a rate limit answered or used up); undefined when it may send. */
  readonly blockedUntil?: Date | undefined;
  /** Counted since the client was made. */
  readonly usage?: GitHubUsage;
}
