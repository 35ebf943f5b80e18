// The Lease reconciler reads top to bottom as the lifecycle. Each pass:
// look at the world for the current phase (a pure function of the Lease, its
// effect and its wake-up), turn that into one machine event, compute the
// transition purely, write the new status first (intent before effect), then
// start the effects the transition planned on the effect runner. Long work
// (acquire, probes, release) never runs on a reconcile worker; its result
// re-enqueues the Lease and becomes the next pass's event.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { LEASE_RESOURCE, type Lease, type LeaseStatus, type Offer } from '../../src/api/index.js';
import { feedIndex, type ChangeFeed, type ObjectCache, type ReconcileResult } from '../../src/kube/cache.js';
import { isConflict } from '../../src/kube/client.js';
import type { EffectRunner } from '../../src/kube/effects.js';
import type { EventRecorder } from '../../src/kube/events.js';
import { splitKey } from '../../src/kube/resource.js';
import type { StatusWriter } from '../../src/kube/status.js';
import type { LeaseDriver } from './driver.js';
import { EndedLeases, pruneHistory } from './history.js';
import { observeLaunching } from './phases/launching.js';
import { observeMachine } from './phases/ready.js';
import { restore, step, type Phase, type Step } from './machine.js';
import type { LeaseEffectKind, LeaseEffectResult, LeaseSettings, Decision, Wake } from './decision.js';
import { acquireEffect, probeEffect, releaseEffect } from './effects.js';
import { observeReleasing } from './phases/releasing.js';
import { Refusals, schedule, Slots } from './phases/pending.js';
import { conditionsFor, contextOf, endReasonFor, fitLeaseStatus, phaseOf } from './status.js';
import { LeaseGuard, RECORD_SWEEP_KEY } from './guard.js';
import { ownershipOf } from './policy/ownership.js';
import { limitFor } from './policy/limits.js';
import type { LeaseRecord, RecordStore } from '../../src/kube/leaserecords.js';
import { recordOf, sealedLease } from './policy/trust.js';

export const RELEASE_FINALIZER = 'leasehold.dev/release';
export { RECORD_SWEEP_KEY };
export type { LeaseSettings };

/** The API writes the reconciler makes besides status. */
export interface LeaseWriter {
  addFinalizer(lease: Lease): Promise<Lease>;
  removeFinalizer(lease: Lease): Promise<Lease>;
  /** A fresh read, for retrying a write that lost a race. */
  get(namespace: string, name: string): Promise<Lease | undefined>;
  /** Deletes the Lease only while it is still the object with this UID (a precondition), never one made since under its name. */
  delete(namespace: string, name: string, uid: string): Promise<void>;
  /** Stamps the Lease with an installation ID (annotation), with its resourceVersion: of two installations racing, one wins. */
  stamp(lease: Lease, installationID: string): Promise<Lease>;
}

/** What the reconciler reports to metrics; labels are the provider kind only. */
export interface LeaseReconcilerMetrics {
  ready(provider: string, seconds: number): void;
  releaseFailed(provider: string): void;
}

export interface LeaseReconcilerDeps {
  /** The Leases' informer: its changes keep the maxLeases slots and the ended Leases' history current. */
  leases: ObjectCache<Lease> & ChangeFeed<Lease>;
  /** The Offers; where the cache tells of its changes (an informer), refusals are remembered until the next one. */
  offers: ObjectCache<Offer> & Partial<ChangeFeed<Offer>>;
  /** Namespaces, for the labels an Offer's spec.namespaceSelector is matched against. */
  namespaces?: ObjectCache<KubernetesObject>;
  status: StatusWriter;
  writer: LeaseWriter;
  events: EventRecorder;
  driver: LeaseDriver;
  /** The controller's records of each Lease's machine (src/kube/leaserecords.ts). */
  records: RecordStore;
  /** Where the records live, and the one namespace watched, if any (the sweep leaves other installations' records alone). */
  recordScope?: { namespace: string; watchNamespace?: string | undefined };
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
  private readonly history: EndedLeases;
  private readonly refusals?: Refusals;
  private scheduling: Promise<unknown> = Promise.resolve();
  /**
   * When each Lease next wants to act on its own (a check, a prepare or
   * release retry), by UID. Kept in memory only: after a restart every
   * Lease is looked at once.
   */
  private readonly wakes = new Map<string, Wake>();
  private readonly guard: LeaseGuard;

  constructor(private readonly deps: LeaseReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.random = deps.random ?? Math.random;
    this.slots = new Slots(deps.settings.installationID);
    this.history = new EndedLeases(deps.settings.installationID);
    feedIndex(deps.leases, this.slots);
    feedIndex(deps.leases, this.history);
    if (deps.offers.on) {
      const refusals = new Refusals();
      const forget = () => refusals.clear();
      for (const e of ['add', 'update', 'delete'] as const) deps.offers.on(e, forget);
      this.refusals = refusals;
    }
    this.guard = new LeaseGuard({ ...deps, now: () => this.now().getTime() });
  }

  /**
   * A Lease gone from the cache: nothing of it is kept, its maxLeases slot
   * included (one whose finalizer was stripped never reaches an end here).
   */
  forget(lease: Lease): void {
    const uid = lease.metadata?.uid ?? '';
    this.slots.free(uid);
    this.deps.effects.forget(uid);
    this.wakes.delete(uid);
    this.guard.forget(uid);
  }

  async reconcile(key: string): Promise<ReconcileResult | void> {
    if (key === RECORD_SWEEP_KEY) return this.guard.sweep(() => this.deps.enqueue(RECORD_SWEEP_KEY));
    const { namespace, name } = splitKey(key);
    let lease = this.deps.leases.get(namespace, name);
    if (!lease) return;
    await this.guard.adopted();
    const uid = lease.metadata?.uid ?? '';
    // The stamp goes on before anything is written or started for the
    // Lease: a crash after it leaves a Lease this installation will finish,
    // and another installation that lost the race sees the stamp and stops.
    const own = ownershipOf(lease, phaseOf(lease), await this.deps.records.get(uid), this.deps.settings.installationID);
    if (own.kind === 'others') return this.guard.leftAlone(lease, phaseOf(lease), own.stamp);
    if (own.kind === 'stamp') {
      lease = await this.deps.writer.stamp(lease, this.deps.settings.installationID);
      if (own.conflict !== undefined) this.guard.restamped(lease, own.conflict);
    }
    let requeueAfter: number | undefined;
    // A pass goes on while each step leads straight to another (a result
    // recorded, an end reached); it ends at an effect, a wait or nothing new.
    for (let i = 0; i < 8; i++) {
      const phase = phaseOf(lease);
      const record = await this.deps.records.get(uid);
      const unaccounted = await this.guard.unaccounted(lease, phase, record, () => this.deps.enqueue(key));
      if (unaccounted) return unaccounted;
      if (phase === 'Released' || phase === 'Failed') return this.ended(lease, record);
      if (record) lease = await this.guard.check(lease, record);
      // What the pass acts on is the record's, never what status says for it.
      const obs = await this.observe(sealedLease(lease, record), phase, record);
      requeueAfter = obs.requeueAfter;
      if (obs.cancel) this.deps.effects.cancel(uid);
      if (obs.wake !== undefined) this.wake(uid, obs.wake);
      if (obs.notice) await this.deps.events.record(lease, 'Warning', obs.notice.reason, obs.notice.message);
      if (!obs.event) {
        if (obs.status) lease = await this.record(lease, obs.status);
        if (obs.consumed) this.deps.effects.take(uid);
        if (obs.start) await this.start(lease, obs.start);
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
      const started = await this.runTransitionEffects(lease, next);
      if (next.effects.includes('retryRelease')) {
        this.wake(uid, { at: this.now().getTime() + this.deps.settings.checkIntervalMs });
        return after(this.deps.settings.checkIntervalMs);
      }
      if (started || (next.phase !== 'Released' && next.phase !== 'Failed' && next.phase === phase)) return after(requeueAfter);
    }
    return { requeueAfter: 1000 };
  }

  private observe(lease: Lease, phase: Phase, record: LeaseRecord | undefined): Promise<Decision> | Decision {
    if (phase === 'Pending') return this.schedule(lease);
    if (!record && phase !== 'Releasing') {
      // Every launch writes its record before the provider is called: a
      // machine-holding phase without one was written by someone else.
      // Nothing is probed; the release finds no record and runs nothing.
      const message = `status.phase says ${phase}, but the controller holds no record of a machine for this Lease: its status was not written by the controller; nothing was probed or released. Only the controller may write a Lease's status`;
      return { event: { type: 'LAUNCH_FAILED', reason: 'StatusTampered', message } };
    }
    const uid = lease.metadata?.uid ?? '';
    const input = { lease, now: this.now().getTime(), settings: this.deps.settings, effect: this.deps.effects.get(uid), wake: this.wakes.get(uid) };
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

  private schedule(lease: Lease): Promise<Decision> {
    // Scheduling decisions are serialized so that two Leases cannot both
    // take the last slot under maxLeases.
    const run = this.scheduling.then(() => {
      const uid = lease.metadata!.uid!;
      const namespace = lease.metadata?.namespace ?? '';
      const holders = this.slots.holders(uid);
      const obs = schedule({
        lease,
        offers: this.deps.offers.list(),
        active: holders.length,
        maxLeases: this.deps.settings.maxLeases,
        namespace: {
          labels: (this.deps.namespaces?.get(undefined, namespace)?.metadata?.labels ?? {}) as Record<string, string>,
          activeOffers: holders.filter((h) => h.namespace === namespace).map((h) => h.offer),
        },
        maxLeasesPerNamespace: this.deps.settings.maxLeasesPerNamespace,
        namespaceLimit: limitFor(this.deps.settings.namespaceLeaseLimits, namespace),
        installationID: this.deps.settings.installationID,
        now: this.now().getTime(),
        random: this.random,
        refusals: this.refusals,
      });
      // The slot is taken now, inside the serialized decision: another Lease
      // scheduled while this one's intent is being written must count it.
      // apply() gives it back if the intent write fails.
      if (obs.event?.type === 'OFFER_CHOSEN') this.slots.claim(uid, { namespace, offer: obs.event.offer });
      return obs;
    });
    this.scheduling = run.catch(() => undefined);
    return run;
  }

  /** Ended: the record goes, then the finalizer, and ended Leases past the history limits are deleted. */
  private async ended(lease: Lease, record: LeaseRecord | undefined): Promise<ReconcileResult | void> {
    const uid = lease.metadata?.uid ?? '';
    this.slots.free(uid);
    this.forget(lease);
    // The record outlives the release it describes until here: with it gone,
    // nothing would release the machine if the Lease had not really ended.
    if (record) await this.deps.records.delete(uid);
    if (lease.metadata?.finalizers?.includes(RELEASE_FINALIZER)) await this.deps.writer.removeFinalizer(lease);
    const { historyLimit = 32, historyMaxAgeMs = 7 * 24 * 3600_000 } = this.deps.settings;
    return pruneHistory(lease, this.history.in(lease.metadata?.namespace ?? ''), this.now().getTime(), historyLimit, historyMaxAgeMs, (ns, name, uid) => this.deps.writer.delete(ns, name, uid));
  }

  // ---- writing status, then starting effects ----

  private async apply(lease: Lease, next: Step, obs: Decision): Promise<Lease> {
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
      // Then the record: how to release what acquire makes, where only the
      // controller can write it, before status says anything is launching.
      await this.deps.records.put(recordOf(lease, obs.status ?? {})).catch(unclaim);
    } else if (obs.status) {
      await this.guard.sealResult(lease, obs.status);
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
    const written = await this.guard.writeStatus(lease, fitLeaseStatus(status)).catch(unclaim);
    if (written !== lease && next.effects.includes('announce')) {
      const warning = next.phase === 'Pending' || next.phase === 'Failed' || next.context.failure !== undefined || obs.event?.type === 'RELEASE_FAILED' || obs.event?.type === 'CHECK_FAILED';
      await this.deps.events.record(written, warning ? 'Warning' : 'Normal', status.reason ?? next.phase, status.message ?? '');
    }
    return written;
  }

  /** Metrics for what a transition means; never for a transition that was not written. */
  private report(lease: Lease, obs: Decision, next: Step): void {
    const provider = lease.status?.release?.provider ?? 'command';
    if (obs.event?.type === 'MACHINE_READY') {
      const created = Date.parse(lease.metadata?.creationTimestamp as unknown as string);
      if (created) this.deps.metrics?.ready(provider, Math.max(0, (this.now().getTime() - created) / 1000));
    }
    if (obs.event?.type === 'RELEASE_FAILED' && next.accepted) this.deps.metrics?.releaseFailed(provider);
  }

  /** Starts what the transition planned; true when an effect started. */
  private async runTransitionEffects(lease: Lease, next: Step): Promise<boolean> {
    const uid = lease.metadata?.uid ?? '';
    if (next.effects.includes('acquire')) {
      this.slots.claim(uid, { namespace: lease.metadata?.namespace ?? '', offer: lease.status?.offer ?? '' });
      return this.start(lease, 'acquire');
    }
    if (next.effects.includes('release')) {
      // Whatever runs for the Lease (an acquire to withdraw, a probe) is
      // stopped first; the release starts once it has ended.
      this.wakes.delete(uid);
      this.deps.effects.cancel(uid);
      return this.start(lease, 'release');
    }
    if (next.effects.includes('finish') || next.effects.includes('unclaim')) this.slots.free(uid);
    return false;
  }

  private async start(raw: Lease, kind: LeaseEffectKind): Promise<boolean> {
    const uid = raw.metadata!.uid!;
    // Effects see the record's values, never what status says for them.
    const lease = sealedLease(raw, await this.deps.records.get(uid));
    const st = lease.status ?? {};
    const attempt = kind === 'release' ? (st.releaseAttempts ?? 0) + 1 : st.launch?.attempt ?? 0;
    const key = `${lease.metadata!.namespace}/${lease.metadata!.name}`;
    const ctx = { driver: this.deps.driver, records: this.deps.records, events: this.deps.events, log: this.deps.log, now: () => this.now().getTime(), record: (l: Lease, f: Partial<LeaseStatus>) => this.record(l, f), progress: (l: Lease, m: string) => this.writeProgress(l, m) };
    const run =
      kind === 'acquire' ? (signal: AbortSignal) => acquireEffect(ctx, lease, signal)
      : kind === 'release' ? (signal: AbortSignal) => releaseEffect(ctx, lease, signal)
      : (signal: AbortSignal) => probeEffect(ctx, lease, kind, signal);
    return this.deps.effects.start(uid, `${kind}/${attempt}`, run, () => this.deps.enqueue(key));
  }

  private wake(uid: string, wake: Wake | null): void {
    if (wake) this.wakes.set(uid, wake);
    else this.wakes.delete(uid);
  }

  /** A progress message for a launch still running; a lost race reads the Lease again and skips this line. */
  private async writeProgress(lease: Lease, message: string): Promise<Lease> {
    try {
      return await this.guard.writeStatus(lease, fitLeaseStatus({ ...lease.status, message }));
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
    await this.guard.sealResult(lease, fields);
    for (let i = 0; ; i++) {
      try {
        return await this.guard.writeStatus(lease, fitLeaseStatus({ ...lease.status, ...fields }));
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
