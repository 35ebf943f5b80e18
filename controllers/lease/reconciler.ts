// The Lease reconciler reads top to bottom as the lifecycle. Each pass:
// look at the world for the current phase (a pure function of the Lease, its
// effect and its plan), turn that into one machine event, compute the
// transition purely, write the new status first (intent before effect), then
// start the effects the transition planned on the effect runner. Long work
// (acquire, probes, release) never runs on a reconcile worker; its result
// re-enqueues the Lease and becomes the next pass's event.
import type { Logger } from 'pino';
import { LEASE_RESOURCE, type Lease, type LeaseStatus, type Offer } from '../../src/api/index.js';
import type { ObjectCache, ReconcileResult } from '../../src/kube/cache.js';
import { isConflict } from '../../src/kube/client.js';
import type { EffectRunner } from '../../src/kube/effects.js';
import type { EventRecorder } from '../../src/kube/events.js';
import { splitKey } from '../../src/kube/resource.js';
import type { StatusWriter } from '../../src/kube/status.js';
import type { LeaseDriver } from './driver.js';
import { pruneHistory } from './history.js';
import { observeLaunching } from './launch.js';
import { observeMachine } from './check.js';
import { restore, step, type Phase, type Step } from './machine.js';
import type { LeaseEffectKind, LeaseEffectResult, LeaseSettings, Observation, Plan } from './observation.js';
import { acquireEffect, probeEffect, releaseEffect } from './operations.js';
import { observeReleasing } from './release.js';
import { schedule, Slots } from './schedule.js';
import { conditionsFor, contextOf, endReasonFor, phaseOf } from './status.js';

export const RELEASE_FINALIZER = 'leasehold.dev/release';
export type { LeaseSettings };

/** The API writes the reconciler makes besides status. */
export interface LeaseWriter {
  addFinalizer(lease: Lease): Promise<Lease>;
  removeFinalizer(lease: Lease): Promise<Lease>;
  /** A fresh read, for retrying a write that lost a race. */
  get(namespace: string, name: string): Promise<Lease | undefined>;
  delete(namespace: string, name: string): Promise<void>;
}

/** What the reconciler reports to metrics; labels are the provider kind only. */
export interface LeaseReconcilerMetrics {
  ready(provider: string, seconds: number): void;
  releaseFailed(provider: string): void;
}

export interface LeaseReconcilerDeps {
  leases: ObjectCache<Lease>;
  offers: ObjectCache<Offer>;
  status: StatusWriter;
  writer: LeaseWriter;
  events: EventRecorder;
  driver: LeaseDriver;
  effects: EffectRunner<LeaseEffectResult>;
  /** Puts a Lease's key back on the work queue (an effect ended). */
  enqueue: (key: string) => void;
  settings: LeaseSettings;
  log: Logger;
  metrics?: LeaseReconcilerMetrics;
  now?: () => Date;
  random?: () => number;
}

export class LeaseReconciler {
  private readonly now: () => Date;
  private readonly random: () => number;
  private readonly slots: Slots;
  private scheduling: Promise<unknown> = Promise.resolve();
  /**
   * When each Lease next wants to act on its own (a check, a prepare or
   * release retry), by UID. Kept in memory only: after a restart every
   * Lease is looked at once.
   */
  private readonly plans = new Map<string, Plan>();

  constructor(private readonly deps: LeaseReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.random = deps.random ?? Math.random;
    this.slots = new Slots(deps.leases);
  }

  /** A Lease gone from the cache: nothing of it is kept. */
  forget(lease: Lease): void {
    const uid = lease.metadata?.uid ?? '';
    this.deps.effects.forget(uid);
    this.plans.delete(uid);
  }

  async reconcile(key: string): Promise<ReconcileResult | void> {
    const { namespace, name } = splitKey(key);
    let lease = this.deps.leases.get(namespace, name);
    if (!lease) return;
    const uid = lease.metadata?.uid ?? '';
    let requeueAfter: number | undefined;
    // A pass goes on while each step leads straight to another (a result
    // recorded, an end reached); it ends at an effect, a wait or nothing new.
    for (let i = 0; i < 8; i++) {
      const phase = phaseOf(lease);
      if (phase === 'Released' || phase === 'Failed') return this.ended(lease);
      const obs = await this.observe(lease, phase);
      requeueAfter = obs.requeueAfter;
      if (obs.cancel) this.deps.effects.cancel(uid);
      if (obs.plan !== undefined) this.plan(uid, obs.plan);
      if (!obs.event) {
        if (obs.status) lease = await this.record(lease, obs.status);
        if (obs.consumed) this.deps.effects.take(uid);
        if (obs.start) this.start(lease, obs.start);
        if (obs.consumed && requeueAfter === 0) continue;
        return after(requeueAfter);
      }
      const next = step(restore(phase, contextOf(lease)), obs.event);
      if (!next.accepted) {
        if (obs.event.type === 'OFFER_CHOSEN') this.slots.free(uid);
        if (obs.consumed) this.deps.effects.take(uid);
        return after(requeueAfter);
      }
      lease = await this.apply(lease, next, obs);
      if (obs.consumed) this.deps.effects.take(uid);
      this.report(lease, obs, next);
      const started = this.runTransitionEffects(lease, next);
      if (next.effects.includes('retryRelease')) {
        this.plan(uid, { at: this.now().getTime() + this.deps.settings.checkIntervalMs });
        return after(this.deps.settings.checkIntervalMs);
      }
      if (started || (next.phase !== 'Released' && next.phase !== 'Failed' && next.phase === phase)) return after(requeueAfter);
    }
    return { requeueAfter: 1000 };
  }

  private observe(lease: Lease, phase: Phase): Promise<Observation> | Observation {
    if (phase === 'Pending') return this.schedule(lease);
    const uid = lease.metadata?.uid ?? '';
    const input = { lease, now: this.now().getTime(), settings: this.deps.settings, effect: this.deps.effects.get(uid), plan: this.plans.get(uid) };
    switch (phase) {
      case 'Launching':
        return observeLaunching(input);
      case 'Ready':
      case 'Idle':
        return observeMachine(input, phase);
      default:
        return observeReleasing(input);
    }
  }

  private schedule(lease: Lease): Promise<Observation> {
    // Scheduling decisions are serialized so that two Leases cannot both
    // take the last slot under maxLeases.
    const run = this.scheduling.then(() => {
      const uid = lease.metadata!.uid!;
      const obs = schedule({
        lease,
        offers: this.deps.offers.list(),
        active: this.slots.activeExcept(uid),
        maxLeases: this.deps.settings.maxLeases,
        installationID: this.deps.settings.installationID,
        now: this.now().getTime(),
        random: this.random,
      });
      // The slot is taken now, inside the serialized decision: another Lease
      // scheduled while this one's intent is being written must count it.
      // apply() gives it back if the intent write fails.
      if (obs.event?.type === 'OFFER_CHOSEN') this.slots.claim(uid);
      return obs;
    });
    this.scheduling = run.catch(() => undefined);
    return run;
  }

  /** Ended: the finalizer goes, and ended Leases past the history limits are deleted. */
  private async ended(lease: Lease): Promise<ReconcileResult | void> {
    const uid = lease.metadata?.uid ?? '';
    this.slots.free(uid);
    this.forget(lease);
    if (lease.metadata?.finalizers?.includes(RELEASE_FINALIZER)) await this.deps.writer.removeFinalizer(lease);
    const { historyLimit = 32, historyMaxAgeMs = 7 * 24 * 3600_000 } = this.deps.settings;
    return pruneHistory(lease, this.deps.leases.list(), this.now().getTime(), historyLimit, historyMaxAgeMs, (ns, name) => this.deps.writer.delete(ns, name));
  }

  // ---- writing status, then starting effects ----

  private async apply(lease: Lease, next: Step, obs: Observation): Promise<Lease> {
    const now = this.now();
    const generation = lease.metadata?.generation;
    const uid = lease.metadata?.uid ?? '';
    const acquiring = next.effects.includes('acquire');
    // Until the intent is written the Lease stays Pending: a failure gives back the slot scheduling claimed for it.
    const unclaim = (err: unknown) => {
      if (acquiring) this.slots.free(uid);
      throw err;
    };
    if (acquiring) {
      // The finalizer goes on before anything is rented: without it, a
      // delete during acquire would lose the only record of the machine.
      lease = await this.deps.writer.addFinalizer(lease).catch(unclaim);
    }
    const status: LeaseStatus = {
      ...lease.status,
      ...obs.status,
      observedGeneration: generation,
      phase: next.phase,
      reason: next.context.reason,
      message: next.context.message,
      conditions: conditionsFor(lease.status?.conditions, next, generation, now),
    };
    const endReason = endReasonFor(lease.status, next, obs.event!);
    if (endReason) status.endReason = endReason;
    if (next.phase === 'Failed' && next.context.failure) {
      status.reason = next.context.failure.reason;
      status.message = next.context.failure.message;
    }
    // Intent before effect: a conflict here throws, and no effect starts.
    const written = await this.deps.status.write(LEASE_RESOURCE, lease, status).catch(unclaim);
    if (written !== lease && next.effects.includes('announce')) {
      const warning = next.phase === 'Pending' || next.phase === 'Failed' || next.context.failure !== undefined || obs.event?.type === 'RELEASE_FAILED';
      await this.deps.events.record(written, warning ? 'Warning' : 'Normal', status.reason ?? next.phase, status.message ?? '');
    }
    return written;
  }

  /** Metrics for what a transition means; never for a transition that was not written. */
  private report(lease: Lease, obs: Observation, next: Step): void {
    const provider = lease.status?.release?.provider ?? 'command';
    if (obs.event?.type === 'MACHINE_READY') {
      const created = Date.parse(lease.metadata?.creationTimestamp as unknown as string);
      if (created) this.deps.metrics?.ready(provider, Math.max(0, (this.now().getTime() - created) / 1000));
    }
    if (obs.event?.type === 'RELEASE_FAILED' && next.accepted) this.deps.metrics?.releaseFailed(provider);
  }

  /** Starts what the transition planned; true when an effect started. */
  private runTransitionEffects(lease: Lease, next: Step): boolean {
    const uid = lease.metadata?.uid ?? '';
    if (next.effects.includes('acquire')) {
      this.slots.claim(uid);
      return this.start(lease, 'acquire');
    }
    if (next.effects.includes('release')) {
      // Whatever runs for the Lease (an acquire to withdraw, a probe) is
      // stopped first; the release starts once it has ended.
      this.plans.delete(uid);
      this.deps.effects.cancel(uid);
      return this.start(lease, 'release');
    }
    if (next.effects.includes('finish')) this.slots.free(uid);
    return false;
  }

  private start(lease: Lease, kind: LeaseEffectKind): boolean {
    const uid = lease.metadata!.uid!;
    const st = lease.status ?? {};
    const attempt = kind === 'release' ? (st.releaseAttempts ?? 0) + 1 : st.launch?.attempt ?? 0;
    const key = `${lease.metadata!.namespace}/${lease.metadata!.name}`;
    const ctx = { driver: this.deps.driver, events: this.deps.events, log: this.deps.log, now: () => this.now().getTime(), record: (l: Lease, f: Partial<LeaseStatus>) => this.record(l, f), progress: (l: Lease, m: string) => this.writeProgress(l, m) };
    const run =
      kind === 'acquire' ? (signal: AbortSignal) => acquireEffect(ctx, lease, signal)
      : kind === 'release' ? (signal: AbortSignal) => releaseEffect(ctx, lease, signal)
      : (signal: AbortSignal) => probeEffect(ctx, lease, kind, signal);
    return this.deps.effects.start(uid, `${kind}/${attempt}`, run, () => this.deps.enqueue(key));
  }

  private plan(uid: string, plan: Plan | null): void {
    if (plan) this.plans.set(uid, plan);
    else this.plans.delete(uid);
  }

  /** A progress message for a launch still running; a lost race reads the Lease again and skips this line. */
  private async writeProgress(lease: Lease, message: string): Promise<Lease> {
    try {
      return await this.deps.status.write(LEASE_RESOURCE, lease, { ...lease.status, message } as LeaseStatus);
    } catch (err) {
      this.deps.log.debug({ err: String(err), lease: lease.metadata?.name }, 'acquire progress not recorded');
      if (!isConflict(err)) return lease;
      const fresh = await this.deps.writer.get(lease.metadata!.namespace!, lease.metadata!.name!).catch(() => undefined);
      return fresh && fresh.status?.launch?.attempt === lease.status?.launch?.attempt && phaseOf(fresh) === phaseOf(lease) ? fresh : lease;
    }
  }

  /**
   * Records observations that change no phase. The result of an acquire
   * must not be lost to a race with an unrelated update (an annotation, a
   * label), so a conflict is retried on a fresh read of the same attempt.
   */
  private async record(lease: Lease, fields: Partial<LeaseStatus>): Promise<Lease> {
    for (let i = 0; ; i++) {
      try {
        return await this.deps.status.write(LEASE_RESOURCE, lease, { ...lease.status, ...fields } as LeaseStatus);
      } catch (err) {
        if (!isConflict(err) || i >= 4) throw err;
        const fresh = await this.deps.writer.get(lease.metadata!.namespace!, lease.metadata!.name!);
        if (!fresh || fresh.status?.launch?.attempt !== lease.status?.launch?.attempt || phaseOf(fresh) !== phaseOf(lease)) throw err;
        lease = fresh;
      }
    }
  }
}

function after(ms: number | undefined): ReconcileResult | undefined {
  return ms === undefined ? undefined : { requeueAfter: ms };
}
