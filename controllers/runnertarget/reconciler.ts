// The RunnerTarget reconciler: when a target's check is due (every
// checkInterval, or at once after its spec changed), one check runs
// (check.ts). The work queue never runs one key twice at once, and the
// check lease keeps two replicas apart; status writes of our own wake the
// target but start no check before its time.
import type { Logger } from 'pino';
import { durationMs, MIN_CHECK_INTERVAL_MS, type RunnerTarget } from '../../src/api/index.js';
import type { ObjectCache, ReconcileResult } from '../../src/kube/cache.js';
import type { EventRecorder } from '../../src/kube/events.js';
import { hasFinalizer } from '../../src/kube/finalizers.js';
import type { StatusWriter } from '../../src/kube/status.js';
import { CheckRun } from './check.js';
import type { HostAccess } from './deliver.js';
import type { CheckLeases } from './checklease.js';
import type { RunnerTargetMetrics } from './metrics.js';
import type { TargetClients } from './operations.js';
import type { PlanSettings } from './plan.js';
import { openReceipts } from './receipts.js';
import { RUNNER_HOSTS_FINALIZER } from './teardown.js';

/**
 * How often a target is checked: its checkInterval, never below the minimum
 * (an object stored before the schema had one may hold less), times `scale`
 * (below 1 only for tests).
 */
export function checkEveryMs(checkInterval: string, scale = 1): number {
  return Math.max(durationMs(checkInterval), MIN_CHECK_INTERVAL_MS) * scale;
}

/** How soon a check follows one that left a launch open (a VM booting, a runner to register). */
export const LAUNCH_FOLLOW_UP_MS = 10_000;

export interface RunnerTargetDeps {
  targets: ObjectCache<RunnerTarget>;
  /** The object as the API server has it now; undefined when it is gone. */
  read(namespace: string, name: string): Promise<RunnerTarget | undefined>;
  status: Pick<StatusWriter, 'write'>;
  events: Pick<EventRecorder, 'record'>;
  providers: { clients(target: RunnerTarget): Promise<TargetClients>; forget(key: string): void };
  leases: Pick<CheckLeases, 'acquire'>;
  /** This replica, as the Held condition names it. */
  identity: string;
  installationID: string;
  /** The target's own SSH key (its hosts admit its public half, and only theirs) and the hosts' login user and port. */
  hostAccess(target: RunnerTarget): Promise<HostAccess>;
  /** Deletes a target's SSH key once its pool is gone. */
  removeHostKey?(target: RunnerTarget): Promise<void>;
  settings?: Partial<PlanSettings>;
  /** checkInterval times this (--runner-check-interval-scale, 1 unless set; below 1 only for tests). */
  checkIntervalScale?: number;
  /** How soon a check follows an open launch or a deleted target's check (LAUNCH_FOLLOW_UP_MS unless set). */
  followUpMs?: number;
  metrics?: RunnerTargetMetrics;
  log?: Logger;
  now?: () => number;
  /** Keeps RUNNER_HOSTS_FINALIZER on targets until their pool is gone; absent, none is added. */
  finalizers?: { add(target: RunnerTarget): Promise<unknown>; remove(target: RunnerTarget): Promise<unknown> };
}

export class RunnerTargetReconciler {
  /** When each target's last check ended here, and the generation it checked. */
  private readonly checked = new Map<string, { at: number; generation: number | undefined }>();
  /** Until when GitHub's rate limit keeps each target from being checked (ms). */
  private readonly limitedUntil = new Map<string, number>();
  /** What each target's last finished check counted against GitHub's primary limit. */
  private readonly githubRequests = new Map<string, number>();

  constructor(private readonly deps: RunnerTargetDeps) {}

  private now(): number {
    return (this.deps.now ?? Date.now)();
  }

  async reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace = '', name = ''] = key.split('/');
    const target = this.deps.targets.get(namespace, name);
    if (!target) {
      this.checked.delete(key);
      this.limitedUntil.delete(key);
      this.githubRequests.delete(key);
      this.deps.providers.forget(key);
      return;
    }
    const deleting = !!target.metadata?.deletionTimestamp;
    const followUp = this.deps.followUpMs ?? LAUNCH_FOLLOW_UP_MS;
    if (deleting && !hasFinalizer(target, RUNNER_HOSTS_FINALIZER)) return;
    if (!deleting && this.deps.finalizers && !hasFinalizer(target, RUNNER_HOSTS_FINALIZER)) await this.deps.finalizers.add(target);
    // A target being deleted is checked as often as an open launch, until its pool is gone.
    const checkEvery = checkEveryMs(target.spec.checkInterval, this.deps.checkIntervalScale);
    const interval = deleting ? Math.min(checkEvery, followUp) : checkEvery;
    const generation = target.metadata?.generation;
    const last = this.checked.get(key) ?? { at: Date.parse(target.status?.lastCheckAt ?? ''), generation: target.status?.observedGeneration };
    const now = this.now();
    // No check while GitHub's limit holds, whatever woke the target (a spec change, a status write, a deletion).
    const limited = this.limitedUntil.get(key);
    if (limited !== undefined && now < limited) return { requeueAfter: limited - now };
    // An open launch is followed sooner than the interval: its host waits for its runner config.
    const every = openReceipts(target.status?.receipts).some((r) => r.action === 'Launch') ? Math.min(interval, followUp) : interval;
    if (Number.isFinite(last.at) && last.generation === generation && now - last.at < every) return { requeueAfter: last.at + every - now };
    const result = await new CheckRun(this.deps, target, { lastGitHubRequests: this.githubRequests.get(key) }).run();
    if (result.limitedUntil !== undefined) {
      this.limitedUntil.set(key, result.limitedUntil);
      // Checked again as soon as the limit ends, not an interval after the limited attempt.
      this.checked.set(key, { at: Number.NEGATIVE_INFINITY, generation });
      return { requeueAfter: Math.max(1, result.limitedUntil - this.now()) };
    }
    this.limitedUntil.delete(key);
    if (result.githubRequests !== undefined && result.state === 'Done') this.githubRequests.set(key, result.githubRequests);
    if (deleting && result.poolGone && this.deps.finalizers) {
      // The key goes before the finalizer: should this stop in between, the next pass deletes it again.
      await this.deps.removeHostKey?.(result.target);
      await this.deps.finalizers.remove(result.target);
      return;
    }
    // A check that found the lease held elsewhere did nothing: it is tried again soon, not after a whole interval.
    if (result.state !== 'Held') this.checked.set(key, { at: this.now(), generation });
    const fresh = this.deps.targets.get(namespace, name) ?? target;
    const follow = openReceipts(fresh.status?.receipts).some((r) => r.action === 'Launch') ? Math.min(interval, followUp) : interval;
    return { requeueAfter: result.retryAfterMs ?? follow };
  }
}
