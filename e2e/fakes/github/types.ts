// The GitHub emulator's public types: options, the handle, the fake runner,
// and the shapes it answers with.
import type { Fault as KitFault, FaultSpec as KitFaultSpec } from '../kit/faults.js';
import type { RequestRecord as KitRequestRecord } from '../kit/log.js';

/** One delivery attempt, as GET …/hooks/{id}/deliveries lists it (with the body, for tests). */
export interface HookDelivery {
  id: number;
  guid: string;
  hook_id: number;
  delivered_at: string;
  redelivery: boolean;
  duration: number;
  status: string;
  status_code: number;
  event: string;
  action: string | null;
  /** What was sent, for tests: the body and its headers. */
  request: { headers: Record<string, string>; body: string };
}

export interface HookRetry {
  /** Attempts in all, the first included. */
  attempts: number;
  delayMs: number;
}


export type GitHubOp = 'list-runners' | 'list-runner-groups' | 'delete-runner' | 'generate-jitconfig' | 'list-runs' | 'get-run' | 'list-jobs' | 'rerun-failed-jobs' | 'access-token' | 'create-hook' | 'list-hooks' | 'get-hook' | 'delete-hook' | 'ping-hook' | 'list-hook-deliveries' | 'redeliver-hook';
export type FaultSpec = KitFaultSpec<GitHubOp>;
export type Fault = KitFault<GitHubOp>;
export type RequestRecord = KitRequestRecord<GitHubOp>;

export type JobStatus = 'queued' | 'in_progress' | 'completed';
export type Conclusion = 'success' | 'failure' | 'cancelled';

export interface RunnerLabel {
  id: number;
  name: string;
  type: 'read-only' | 'custom';
}

/** A self-hosted runner as the API shows it. */
export interface ApiRunner {
  id: number;
  name: string;
  os: string;
  status: 'online' | 'offline';
  busy: boolean;
  ephemeral: boolean;
  runner_group_id: number;
  labels: RunnerLabel[];
}

export interface ApiJob {
  id: number;
  run_id: number;
  run_attempt: number;
  workflow_name: string;
  name: string;
  status: JobStatus;
  conclusion: Conclusion | null;
  labels: string[];
  runner_id: number | null;
  runner_name: string | null;
  runner_group_id: number | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  head_branch: string;
}

export interface ApiRun {
  id: number;
  name: string;
  run_number: number;
  run_attempt: number;
  status: JobStatus;
  conclusion: Conclusion | null;
  head_branch: string;
  created_at: string;
  updated_at: string;
  repository: { id: number; name: string; full_name: string };
}

/** The GitHub App the emulator issued: its ID, the installation on the org, and its private key (PEM, PKCS#1 as GitHub hands it out). */
export interface GitHubApp {
  appId: number;
  installationId: number;
  privateKey: string;
}

/** A runner on a host, driven by the test: it registers with a JIT config, takes jobs, finishes them. */
export interface FakeRunner {
  readonly id: number;
  readonly name: string;
  /** Whether it is running a job (the truth; the API's `busy` lags it by busyLagMs). */
  readonly busy: boolean;
  /** Takes the oldest queued job whose labels the runner has (all of them); undefined when none. */
  takeJob(): ApiJob | undefined;
  /** Completes the job it runs; a JIT runner is ephemeral, so GitHub then removes it (jitRemovalLagMs later, offline meanwhile). */
  finishJob(conclusion?: Conclusion): void;
  goOffline(): void;
}

export interface GitHubEmulatorOptions {
  host?: string;
  port?: number;
  /** Default "leasehold-org". */
  org?: string;
  /** The first personal access token (default: a fresh one). */
  token?: string;
  /** Primary rate limit per token per window (default 5000). */
  rateLimit?: number;
  /** How long a primary rate limit window lasts (default an hour, as GitHub's). */
  rateLimitWindowMs?: number;
  /** The status of a primary limit refusal (default 403; GitHub documents 403 or 429). */
  primaryLimitStatus?: 403 | 429;
  /** GETs carry an ETag and answer a matching If-None-Match with an uncounted 304 (default true, as GitHub). */
  etags?: boolean;
  /** A runner's `busy` reads false this long after it took a job (default 0; GitHub's lags 25-60 s). */
  busyLagMs?: number;
  /** DELETE of a busy runner succeeds instead of answering 422 (a hazard GitHub has shown). Default false. */
  deleteBusySucceeds?: boolean;
  /** Installation tokens last this long (default one hour). */
  installationTokenTtlMs?: number;
  /** A JIT runner is listed offline this long after its job before GitHub removes it (default 3000; 0 removes it at once). */
  jitRemovalLagMs?: number;
  /** A registration whose runner never connected is removed this long after it was made (default a day, as GitHub does). */
  zombieRemovalMs?: number;
  /** How often, per runner and hour, an online runner goes offline on its own (default 0: never). */
  offlineRatePerHour?: number;
  /** Seeds which runners go offline at offlineRatePerHour (default 1). */
  seed?: number;
  /** A job whose runner went offline (or was removed) fails this long after (default 10 minutes); Infinity: never. */
  lostRunnerFailMs?: number;
  /**
   * Webhook deliveries of events (not pings or redeliveries) that fail are
   * sent again on their own, `attempts` in all, `delayMs` apart. GitHub does
   * not do this (a failed delivery stays failed until someone redelivers
   * it); default undefined: no retry, as GitHub.
   */
  webhookRetry?: HookRetry;
}

export interface GitHubEmulator {
  /** The API root, "http://127.0.0.1:PORT" (api.github.com's place). */
  readonly url: string;
  readonly org: string;
  /** The first personal access token. */
  readonly token: string;
  readonly app: GitHubApp;
  /** A new personal access token. */
  addToken(): string;
  rateLimit: number;
  rateLimitWindowMs: number;
  primaryLimitStatus: 403 | 429;
  etags: boolean;
  busyLagMs: number;
  deleteBusySucceeds: boolean;
  installationTokenTtlMs: number;
  jitRemovalLagMs: number;
  zombieRemovalMs: number;
  offlineRatePerHour: number;
  /** Runner `name` goes offline as if its process died or its host rebooted (a job it ran stays in progress). */
  runnerOffline(name: string): void;
  /** Uses up a caller's primary limit for its window: by token, or every caller when omitted; `resetInMs` ends that window sooner than rateLimitWindowMs. */
  exhaustRateLimit(token?: string, resetInMs?: number): void;
  lostRunnerFailMs: number;
  /** Every caller starts a fresh hour; an armed secondary limit is dropped. */
  resetRateLimits(): void;
  /** The next `times` (default 1) requests answer a secondary rate limit: 403 or 429 with retry-after. */
  secondaryLimit(opts: { status: 403 | 429; retryAfterSeconds: number; times?: number }): void;
  /** Creates the org's repository `repo` (name only) with no runs: its run listing is 200 with none. */
  addRepository(repo: string): void;
  /** The repository is gone (deleted, renamed, or the token lost access): its endpoints answer 404; its runs go with it. */
  removeRepository(repo: string): void;
  /** Queues a workflow run of one job per entry in the org's repository `repo` (created if it does not exist). */
  queueRun(repo: string, jobs: { labels: string[]; name?: string }[]): { runId: number; jobIds: number[] };
  /** Completes a job no fake runner runs (cancelled, or done elsewhere). */
  completeJob(jobId: number, conclusion?: Conclusion): void;
  /** The runner a JIT config registers (once: a JIT config is single use). */
  startRunner(encodedJitConfig: string): FakeRunner;
  /** A new runner group (visibility all unless given); returns its id. Default (id 1) always exists. */
  addRunnerGroup(name: string, visibility?: 'all' | 'selected' | 'private'): number;
  /** Removes a runner group other than Default; its runners move to Default. */
  removeRunnerGroup(id: number): void;
  runners(): ApiRunner[];
  jobs(): ApiJob[];
  runs(): ApiRun[];
  fault(spec: FaultSpec): string;
  clearFaults(): void;
  webhookRetry: HookRetry | undefined;
  /** Every webhook delivery attempt so far (pings, events, redeliveries), oldest first, with what was sent. */
  hookDeliveries(): HookDelivery[];
  /** Resolves once no webhook delivery is in flight. */
  hooksIdle(): Promise<void>;
  readonly requests: readonly RequestRecord[];
  /** Requests that change something (runner deletes, JIT configs), answered or not. */
  readonly mutations: readonly RequestRecord[];
  stop(): Promise<void>;
}
