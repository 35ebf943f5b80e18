// The RunnerTarget reconciler: when a target's check is due (every
// checkInterval, or at once after its spec changed), one check runs
// (checkrun/check.ts). The check runs on the shared effect runner, off the
// reconcile workers, so that a long check of one target never delays another's turn:
// a worker only decides whether a check is due, starts it, and takes its
// result on a later pass (the check's end enqueues the target). At most one
// check per target runs (the runner's rule per owner), the check lease keeps
// two replicas apart, and status writes of our own wake the target but start
// no check before its time. Between two checks, an open launch's VM is
// watched on its own (checkrun/bootwatch.ts) so that its runner config lands
// as soon as it runs, not at the launch's follow-up check; a watch is an
// effect of the target like a check, so the two never run at once here.
import { durationMs, MIN_CHECK_INTERVAL_MS, type RunnerTarget } from '../../src/api/index.js';
import type { ObjectCache, ReconcileResult } from '../../src/kube/cache.js';
import type { EffectRunner } from '../../src/kube/effects.js';
import { hasFinalizer } from '../../src/kube/finalizers.js';
import { splitKey } from '../../src/kube/resource.js';
import { CheckRun } from './checkrun/check.js';
import { nextWatchGap, WATCH_FIRST_MS, watchedLaunches, watchLaunches, type WatchResult } from './checkrun/bootwatch.js';
import type { CheckDeps } from './checkrun/checkdeps.js';
import type { CheckResult } from './checkresult.js';
import { openReceipts } from './policy/receipts.js';
import { SAMPLE_WINDOW, sampleTiming } from './policy/sample.js';
import { nothingLaunched, RUNNER_HOSTS_FINALIZER } from './policy/teardown.js';
import { RunnerGroupIds } from './checkrun/runnergroupids.js';

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

/** What the reconciler works with: what each check it starts needs (CheckDeps), and its own. */
export interface RunnerTargetDeps extends CheckDeps {
  targets: ObjectCache<RunnerTarget>;
  /** Deletes a target's SSH key once its pool is gone. */
  removeHostKey?(target: RunnerTarget): Promise<void>;
  /** checkInterval times this (--runner-check-interval-scale, 1 unless set; below 1 only for tests). */
  checkIntervalScale?: number;
  /** How soon a check follows an open launch or a deleted target's check (LAUNCH_FOLLOW_UP_MS unless set). */
  followUpMs?: number;
  /**
   * Where checks run, and how many at once; absent, a check runs on the
   * reconcile worker (unit tests). `requeue` enqueues a target when its check ends.
   */
  checks?: { effects: EffectRunner<FinishedEffect>; concurrency: number; requeue(key: string): void };
  /** Keeps RUNNER_HOSTS_FINALIZER on targets until their pool is gone; absent, none is added. */
  finalizers?: { add(target: RunnerTarget): Promise<unknown>; remove(target: RunnerTarget): Promise<unknown> };
}

/** A check's result with what the pass that started it knew. */
export interface FinishedCheck {
  result: CheckResult;
  generation: number | undefined;
  deleting: boolean;
}

/** A boot watch's result (checkrun/bootwatch.ts). */
export interface FinishedWatch {
  watch: WatchResult;
}

/** What a target's effect hands back: a check's result or a boot watch's. */
export type FinishedEffect = FinishedCheck | FinishedWatch;

/** A burst of requests (webhook deliveries) for one target starts at most one extra check per this many ms. */
export const REQUESTED_CHECK_GAP_MS = 5_000;

/** How soon a pass looks again when every check slot is taken. */
export const CHECK_SLOT_RETRY_MS = 1_000;

/** An open receipt whose host waits for a runner: a Launch, or a Register (a reused host, or a drained one a job still runs on). */
const awaitsRunner = (receipts: Parameters<typeof openReceipts>[0]) => openReceipts(receipts).some((r) => r.action === 'Launch' || r.action === 'Register');

export class RunnerTargetReconciler {
  /** When each target's last check ended here, and the generation it checked. */
  private readonly checked = new Map<string, { at: number; generation: number | undefined }>();
  /** Until when GitHub's rate limit keeps each target from being checked (ms). */
  private readonly limitedUntil = new Map<string, number>();
  /** What each target's last finished check counted against GitHub's primary limit. */
  private readonly githubRequests = new Map<string, number>();
  /** When each target's last accepted check request came (requestCheck). */
  private readonly requestedAt = new Map<string, number>();
  /** Targets a request made due now, until their check starts. */
  private readonly requested = new Set<string>();
  /** Targets a coalesced request owes a check at the end of its gap (`at`), unless a check starts after the request came (`since`). */
  private readonly owed = new Map<string, { at: number; since: number }>();
  /** The UIDs each key's checks ran for: a target deleted and created again under its name is another owner. */
  private readonly uids = new Map<string, Set<string>>();
  /** Per target, open Launch receipts whose host has its runner config, as far as this replica saw. */
  private readonly configured = new Map<string, Set<string>>();
  /** Per target, when the boot watch looks next, its gap, and the receipts it was armed for. */
  private readonly watches = new Map<string, { at: number; gapMs: number; ids: Set<string> }>();

  private readonly deps: RunnerTargetDeps;

  constructor(deps: RunnerTargetDeps) {
    // One set of kept runner group ids for every check this reconciler starts.
    this.deps = { ...deps, runnerGroups: deps.runnerGroups ?? new RunnerGroupIds(deps.now ? { now: deps.now } : {}) };
  }

  private now(): number {
    return (this.deps.now ?? Date.now)();
  }

  /**
   * Makes a check of `key` happen now rather than at its next interval (a
   * workflow_job delivery saw a job queued). Only sooner: the check is the
   * ordinary one, under the same lease, limits and budget. A request within
   * REQUESTED_CHECK_GAP_MS of the last accepted one for the target is
   * coalesced (false): when the check that one asked for has started
   * already, and so may have read the jobs before this one's was queued,
   * one check at the end of the gap serves it and the rest of the burst.
   */
  requestCheck(key: string): boolean {
    const now = this.now();
    const last = this.requestedAt.get(key);
    if (last !== undefined && now - last < REQUESTED_CHECK_GAP_MS) {
      if (!this.requested.has(key) && !this.owed.has(key)) {
        this.owed.set(key, { at: last + REQUESTED_CHECK_GAP_MS, since: now });
        this.deps.checks?.requeue(key);
      }
      return false;
    }
    this.owed.delete(key);
    this.requestedAt.set(key, now);
    this.requested.add(key);
    this.deps.checks?.requeue(key);
    return true;
  }

  async reconcile(key: string): Promise<ReconcileResult | void> {
    const { namespace = '', name } = splitKey(key);
    const target = this.deps.targets.get(namespace, name);
    const checks = this.deps.checks;
    if (!target) {
      this.checked.delete(key);
      this.limitedUntil.delete(key);
      this.githubRequests.delete(key);
      this.requestedAt.delete(key);
      this.requested.delete(key);
      this.owed.delete(key);
      this.configured.delete(key);
      this.watches.delete(key);
      this.deps.providers.forget(key);
      // A check still running is cancelled; its end enqueues the key again, and that pass drops its result.
      const left = new Set<string>();
      for (const uid of this.uids.get(key) ?? []) {
        checks?.effects.forget(uid);
        if (checks?.effects.get(uid)) left.add(uid);
      }
      if (left.size) this.uids.set(key, left);
      else this.uids.delete(key);
      return;
    }
    const uid = target.metadata!.uid!;
    if (checks) {
      const uids = this.uids.get(key) ?? new Set<string>();
      uids.add(uid);
      this.uids.set(key, uids);
      const state = checks.effects.get(uid);
      // Its end enqueues the target again.
      if (state?.state === 'running') return;
      const done = checks.effects.take(uid);
      if (done) return 'watch' in done.result ? this.watched(key, target, done.result.watch) : this.finish(key, done.result);
    }
    const deleting = !!target.metadata?.deletionTimestamp;
    if (deleting && !hasFinalizer(target, RUNNER_HOSTS_FINALIZER)) return;
    if (deleting && this.deps.finalizers && nothingLaunched(target.status) && (await this.releaseUnlaunched(target))) return;
    if (!deleting && this.deps.finalizers && !hasFinalizer(target, RUNNER_HOSTS_FINALIZER)) await this.deps.finalizers.add(target);
    const generation = target.metadata?.generation;
    const now = this.now();
    // No check while GitHub's limit holds, whatever woke the target (a spec change, a status write, a deletion).
    const limited = this.limitedUntil.get(key);
    if (limited !== undefined && now < limited) return { requeueAfter: limited - now };
    const owed = this.owed.get(key);
    if (owed && now >= owed.at) {
      this.owed.delete(key);
      this.requestedAt.set(key, now);
      this.requested.add(key);
    }
    const requested = this.requested.has(key);
    const checkIn = Math.min(this.checkDueIn(key, target, now), this.owedIn(key, now));
    if (!requested && checkIn > 0) {
      // Before its check is due, an open launch's VM may be watched: its runner config goes as soon as it runs.
      const watchIn = this.watchDueIn(key, target, now);
      if (watchIn === undefined || watchIn >= checkIn) return { requeueAfter: checkIn };
      if (watchIn > 0) return { requeueAfter: watchIn };
      return this.startWatch(key, target);
    }
    // A requested check does not wait for the sample window: it is there to serve a queued job now, and its sample counts only if it falls inside.
    const history = { lastGitHubRequests: this.githubRequests.get(key), ...(requested ? { requested: true } : {}) };
    if (!checks) {
      this.starts(key, now);
      return this.finish(key, { result: await new CheckRun(this.deps, target, history).run(), generation, deleting });
    }
    // A check due just before its sample window would wait for it inside; it is started when the window opens instead.
    const timing = sampleTiming(target.status?.lastSample?.at, now, this.deps.settings?.window ?? SAMPLE_WINDOW);
    if (timing.kind === 'wait' && !deleting && !requested) return { requeueAfter: timing.waitMs };
    if (checks.effects.inFlight('check') >= checks.concurrency) return { requeueAfter: CHECK_SLOT_RETRY_MS };
    this.starts(key, now);
    const started = checks.effects.start(
      uid,
      `check/${key}`,
      async (signal) => ({ result: await new CheckRun(this.deps, target, history, signal).run(), generation, deleting }),
      () => checks.requeue(key),
    );
    // Refused only while the controller stops: the next replica checks it.
    if (!started) return;
  }

  /**
   * A deleted target whose status shows nothing launched lets its finalizer
   * go without a check, so that one refused for its credentials or endpoint
   * does not stay forever. Decided again on a fresh read, whose
   * resourceVersion the removal carries: a receipt written after that read
   * (another replica's check) makes the removal conflict instead of leaving
   * a VM behind. False when the fresh read shows something to tear down.
   */
  private async releaseUnlaunched(target: RunnerTarget): Promise<boolean> {
    const fresh = await this.deps.read(target.metadata!.namespace!, target.metadata!.name!);
    if (!fresh || !hasFinalizer(fresh, RUNNER_HOSTS_FINALIZER)) return true;
    if (!fresh.metadata?.deletionTimestamp || !nothingLaunched(fresh.status)) return false;
    // The key goes before the finalizer: should this stop in between, the next pass deletes it again.
    await this.deps.removeHostKey?.(fresh);
    await this.deps.finalizers!.remove(fresh);
    return true;
  }

  /** How long until `target`'s next check is due (0 or less: due now). */
  private checkDueIn(key: string, target: RunnerTarget, now: number): number {
    const followUp = this.deps.followUpMs ?? LAUNCH_FOLLOW_UP_MS;
    // A target being deleted is checked as often as an open launch, until its pool is gone.
    const checkEvery = checkEveryMs(target.spec.checkInterval, this.deps.checkIntervalScale);
    const interval = target.metadata?.deletionTimestamp ? Math.min(checkEvery, followUp) : checkEvery;
    // An open launch or register is followed sooner than the interval: its host waits for its runner config, or its runner to come online.
    const every = awaitsRunner(target.status?.receipts) ? Math.min(interval, followUp) : interval;
    const last = this.checked.get(key) ?? { at: Date.parse(target.status?.lastCheckAt ?? ''), generation: target.status?.observedGeneration };
    if (!Number.isFinite(last.at) || last.generation !== target.metadata?.generation) return 0;
    return last.at + every - now;
  }

  /** A check of `key` starts: it serves the request that made it due, and any coalesced one that came before it (it reads their jobs). */
  private starts(key: string, now: number): void {
    this.requested.delete(key);
    if ((this.owed.get(key)?.since ?? Number.POSITIVE_INFINITY) <= now) this.owed.delete(key);
  }

  /** How long until the check a coalesced request owes is due; infinite when none is owed. */
  private owedIn(key: string, now: number): number {
    const owed = this.owed.get(key);
    return owed ? owed.at - now : Number.POSITIVE_INFINITY;
  }

  /** How long until the boot watch of `target` looks next (0 or less: now); undefined when no launch is watched. */
  private watchDueIn(key: string, target: RunnerTarget, now: number): number | undefined {
    const configured = this.configured.get(key);
    if (configured) {
      // Only receipts still open are kept: a settled one is never watched again.
      const open = new Set((target.status?.receipts ?? []).filter((r) => r.phase === 'Intended').map((r) => r.id));
      for (const id of configured) if (!open.has(id)) configured.delete(id);
    }
    const ids = watchedLaunches(target, configured ?? new Set()).map((r) => r.id);
    if (!ids.length) {
      this.watches.delete(key);
      return undefined;
    }
    let w = this.watches.get(key);
    // A new launch starts the watch over from its first, short gap.
    if (!w || ids.some((id) => !w!.ids.has(id))) this.watches.set(key, (w = { at: now + WATCH_FIRST_MS, gapMs: WATCH_FIRST_MS, ids: new Set(ids) }));
    return w.at - now;
  }

  private async startWatch(key: string, target: RunnerTarget): Promise<ReconcileResult | void> {
    const receipts = watchedLaunches(target, this.configured.get(key) ?? new Set());
    const checks = this.deps.checks;
    if (!checks) return this.watched(key, target, await watchLaunches(this.deps, target, receipts));
    // Refused only while the controller stops; otherwise its end enqueues the target.
    checks.effects.start(target.metadata!.uid!, `watch/${key}`, async (signal) => ({ watch: await watchLaunches(this.deps, target, receipts, signal) }), () => checks.requeue(key));
  }

  /** Receipts whose host has its runner config: no boot watch looks at them again. */
  private remember(key: string, configured: readonly string[]): void {
    if (!configured.length) return;
    const kept = this.configured.get(key) ?? new Set<string>();
    for (const id of configured) kept.add(id);
    this.configured.set(key, kept);
  }

  /** What a boot watch leaves: the hosts that have their config, a GitHub limit it met, and its next, longer gap. */
  private watched(key: string, target: RunnerTarget, result: WatchResult): ReconcileResult {
    const now = this.now();
    this.remember(key, result.configured);
    if (result.limitedUntil !== undefined) this.limitedUntil.set(key, result.limitedUntil);
    const w = this.watches.get(key);
    if (w) {
      w.gapMs = nextWatchGap(w.gapMs, this.deps.followUpMs ?? LAUNCH_FOLLOW_UP_MS);
      w.at = now + w.gapMs;
    }
    // A check requested while the watch ran (a job queued) starts at once.
    if (this.requested.has(key)) return { requeueAfter: 1 };
    const watchIn = this.watchDueIn(key, target, now);
    const checkIn = Math.min(this.checkDueIn(key, target, now), this.owedIn(key, now));
    return { requeueAfter: Math.max(1, Math.min(checkIn, watchIn ?? Number.POSITIVE_INFINITY)) };
  }

  /** What a finished check leaves: the rate limit it met, the finalizer once the pool is gone, when to look again. */
  private async finish(key: string, { result, generation, deleting }: FinishedCheck): Promise<ReconcileResult | void> {
    const { namespace = '', name } = splitKey(key);
    if (result.limitedUntil !== undefined) {
      this.limitedUntil.set(key, result.limitedUntil);
      // Checked again as soon as the limit ends, not an interval after the limited attempt.
      this.checked.set(key, { at: Number.NEGATIVE_INFINITY, generation });
      return { requeueAfter: Math.max(1, result.limitedUntil - this.now()) };
    }
    this.limitedUntil.delete(key);
    if (result.githubRequests !== undefined && result.state === 'Done') this.githubRequests.set(key, result.githubRequests);
    this.remember(key, result.configured ?? []);
    if (deleting && result.poolGone && this.deps.finalizers) {
      // The key goes before the finalizer: should this stop in between, the next pass deletes it again.
      await this.deps.removeHostKey?.(result.target);
      await this.deps.finalizers.remove(result.target);
      return;
    }
    // A check that found the lease held elsewhere did nothing: it is tried again soon, not after a whole interval.
    if (result.state !== 'Held') this.checked.set(key, { at: this.now(), generation });
    const fresh = this.deps.targets.get(namespace, name) ?? result.target;
    const followUp = this.deps.followUpMs ?? LAUNCH_FOLLOW_UP_MS;
    const checkEvery = checkEveryMs(fresh.spec.checkInterval, this.deps.checkIntervalScale);
    const interval = fresh.metadata?.deletionTimestamp ? Math.min(checkEvery, followUp) : checkEvery;
    const follow = awaitsRunner(fresh.status?.receipts) ? Math.min(interval, followUp) : interval;
    // A request that came while this check ran may be for a job it did not see: one more check follows at once.
    if (this.requested.has(key) && result.retryAfterMs === undefined) return { requeueAfter: 1 };
    // The check's own object holds the receipts it wrote; the cache may not have them yet.
    const watchIn = this.watchDueIn(key, result.target, this.now());
    return { requeueAfter: Math.max(1, Math.min(result.retryAfterMs ?? follow, watchIn ?? Number.POSITIVE_INFINITY, this.owedIn(key, this.now()))) };
  }
}
