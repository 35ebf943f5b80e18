// The Lease reconciler reads top to bottom as the lifecycle. Each pass:
// observe the world for the current phase, turn it into one machine event,
// compute the transition purely, write the new status (intent) first, then
// run the effects the transition planned; an effect's result is the next
// event, handled in the same pass.
import type { Logger } from 'pino';
import { parseWhere } from '../../src/api/where.js';
import { parseDuration } from '../../src/api/duration.js';
import { parsePublicKey } from '../../src/machine/keys.js';
import { ACTIVE_PHASES, type Lease, type LeaseStatus, type Offer } from '../../src/api/index.js';
import { LEASE_RESOURCE } from '../../src/api/resources.js';
import { rfc3339, setCondition } from '../../src/kube/conditions.js';
import type { EventRecorder } from '../../src/kube/events.js';
import type { StatusWriter } from '../../src/kube/status.js';
import { splitKey } from '../../src/kube/resource.js';
import { isConflict } from '../../src/kube/client.js';
import type { ObjectCache, ReconcileResult } from '../../src/kube/cache.js';
import { errorText } from '../../src/kube/errors.js';
import { restore, step, type LeaseEvent, type Phase, type Step } from './machine.js';
import { chooseOffer } from './choose.js';
import { candidatesOf } from './offers.js';
import { ACTIVITY_ANNOTATION, lastActivity, nextCheckIn, verdict } from './timing.js';
import { leasesToPrune } from './history.js';
import type { LeaseDriver, MachineCheck } from './driver.js';
import { PROGRESS_INTERVAL_MS, ProgressThrottle } from './progress.js';

export const RELEASE_FINALIZER = 'leasehold.dev/release';
const DEFAULT_IDLE_TIMEOUT = '20m';
const DEFAULT_MAX_LIFETIME = '12h';

/** The API writes the reconciler makes besides status. */
export interface LeaseWriter {
  addFinalizer(lease: Lease): Promise<Lease>;
  removeFinalizer(lease: Lease): Promise<Lease>;
  /** A fresh read, for retrying a write that lost a race. */
  get(namespace: string, name: string): Promise<Lease | undefined>;
  delete(namespace: string, name: string): Promise<void>;
}

export interface LeaseSettings {
  /** Active leases across all namespaces. */
  maxLeases: number;
  /** Acquire plus agent readiness must finish within this. */
  acquireTimeoutMs: number;
  /** How often Ready and Idle machines are probed and failed releases retried. */
  checkIntervalMs: number;
  historyLimit?: number;
  historyMaxAgeMs?: number;
}

export interface LeaseReconcilerDeps {
  leases: ObjectCache<Lease>;
  offers: ObjectCache<Offer>;
  status: StatusWriter;
  writer: LeaseWriter;
  events: EventRecorder;
  driver: LeaseDriver;
  settings: LeaseSettings;
  log: Logger;
  metrics?: LeaseMetrics;
  now?: () => Date;
  random?: () => number;
}

/** What the reconciler reports to metrics; labels are the provider kind only. */
export interface LeaseMetrics {
  ready(provider: string, seconds: number): void;
  releaseFailed(provider: string): void;
}

/** What one look at the world found: an event for the machine, extra status to record, when to look again. */
interface Observation {
  event?: LeaseEvent;
  status?: Partial<LeaseStatus>;
  requeueAfter?: number;
}

/** What a check depends on besides the machine: a change of spec (sshKeys) or of the activity annotation is looked at without waiting. */
function checkInputsOf(lease: Lease): string {
  const annotation = (lease.metadata?.annotations as Record<string, string> | undefined)?.[ACTIVITY_ANNOTATION] ?? '';
  return `${lease.metadata?.generation ?? 0}|${annotation}`;
}

export class LeaseReconciler {
  private readonly now: () => Date;
  private readonly random: () => number;
  /** Leases this process moved out of Pending that the cache may not show yet. */
  private readonly claimed = new Set<string>();
  private scheduling: Promise<unknown> = Promise.resolve();
  /**
   * Acquire results this process could not write yet (the API server was
   * away, say), by Lease UID and launch attempt. The machine exists; the next
   * pass records it instead of taking the Lease for an interrupted launch.
   * A crash loses this, and then the launch is released as interrupted.
   */
  private readonly unrecorded = new Map<string, { attempt: number; fields: Partial<LeaseStatus> }>();
  /**
   * When each Ready or Idle Lease is next due for a probe, by UID, and what
   * the probe saw of the Lease (generation, activity annotation). Kept in
   * memory only: after a restart every Lease is probed once.
   */
  private readonly nextCheck = new Map<string, { at: number; inputs: string }>();

  constructor(private readonly deps: LeaseReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.random = deps.random ?? Math.random;
  }

  async reconcile(key: string): Promise<ReconcileResult | void> {
    const { namespace, name } = splitKey(key);
    let lease = this.deps.leases.get(namespace, name);
    if (!lease) return;
    let requeueAfter: number | undefined;
    // An effect's result is the next event; a pass ends when nothing more happens.
    for (let i = 0; i < 8; i++) {
      const phase = phaseOf(lease);
      const obs = phase === 'Pending' ? await this.schedule(lease) : await this.observe(lease, phase);
      requeueAfter = obs.requeueAfter;
      if (!obs.event) {
        if (obs.status) lease = await this.record(lease, obs.status);
        return requeueAfter === undefined ? undefined : { requeueAfter };
      }
      const next = step(restore(phase, contextOf(lease)), obs.event);
      if (!next.accepted) {
        if (obs.event.type === 'OFFER_CHOSEN') this.claimed.delete(lease.metadata?.uid ?? '');
        return requeueAfter === undefined ? undefined : { requeueAfter };
      }
      const effectResult = await this.apply(lease, next, obs);
      if (!effectResult) return requeueAfter === undefined ? undefined : { requeueAfter };
      lease = effectResult.lease;
      if (effectResult.done) return effectResult.requeueAfter === undefined ? undefined : { requeueAfter: effectResult.requeueAfter };
    }
    return { requeueAfter: 1000 };
  }

  // ---- Pending: choose an Offer, within maxLeases ----

  private schedule(lease: Lease): Promise<Observation> {
    // Scheduling decisions are serialized so that two Leases cannot both
    // take the last slot under maxLeases.
    const run = this.scheduling.then(() => this.scheduleOne(lease));
    this.scheduling = run.catch(() => undefined);
    return run;
  }

  private async scheduleOne(lease: Lease): Promise<Observation> {
    if (lease.metadata?.deletionTimestamp) return { event: { type: 'DELETE_REQUESTED', message: 'deleted before a machine was rented' } };
    const parsed = parseWhere(lease.spec.where);
    if (!parsed.ok) return { event: { type: 'UNSCHEDULABLE', reason: 'InvalidSpec', message: `spec.where: ${parsed.error}` } };
    // Admission checks the shape of each key line, not its key data: a key the
    // machine could never be given is refused before anything is rented.
    const badKey = invalidSshKey(lease.spec.sshKeys ?? []);
    if (badKey) return { event: { type: 'UNSCHEDULABLE', reason: 'InvalidSpec', message: `${badKey}; fix or remove it and the Lease is scheduled` } };
    const candidates = this.deps.offers.list().flatMap(candidatesOf);
    const choice = chooseOffer(parsed.value, lease.spec.where, candidates, lease.spec.offer, this.random);
    if (!choice.ok && choice.noCapacity) {
      return { event: { type: 'REFUSED', reason: 'NoCapacity', message: `${choice.message}; Leasehold does not wait for capacity` } };
    }
    if (!choice.ok) return { event: { type: 'UNSCHEDULABLE', reason: 'NoMatchingOffer', message: choice.message } };
    const uid = lease.metadata!.uid!;
    const active = this.activeCount(uid);
    if (active >= this.deps.settings.maxLeases) {
      return {
        event: {
          type: 'UNSCHEDULABLE',
          reason: 'MaxLeases',
          message: `${active} leases are active, the controller's maxLeases is ${this.deps.settings.maxLeases}; waiting for one to end (raise maxLeases in the Helm values to allow more)`,
        },
      };
    }
    const chosen = choice.candidate;
    const offer = this.deps.offers.get(undefined, chosen.offer)!;
    const now = this.now();
    const price = chosen.pricePerHour;
    // The slot is taken now, inside the serialized decision: another Lease
    // scheduled while this one's intent is being written must count it.
    // apply() gives it back if the intent write fails.
    this.claimed.add(uid);
    const leaseID = uid.replace(/-/g, '').slice(0, 8);
    const attempt = (lease.status?.launch?.attempt ?? 0) + 1;
    return {
      event: {
        type: 'OFFER_CHOSEN',
        offer: chosen.offer,
        message: `leasing ${chosen.name}${chosen.region ? ` in ${chosen.region}` : ''}${price === undefined ? '' : ` at $${price.toFixed(2)}/h`}`,
      },
      status: {
        offer: chosen.offer,
        ...(price === undefined ? {} : { pricePerHour: price }),
        ...(chosen.instanceType ? { instanceType: chosen.instanceType } : {}),
        ...(chosen.region ? { region: chosen.region } : {}),
        leaseID,
        machineName: `leasehold-${leaseID}`,
        launch: { attempt, startedAt: rfc3339(now), offerGeneration: offer.metadata?.generation },
        release: offer.spec.lambda
          ? { provider: 'lambda', lambda: { apiKeySecretRef: offer.spec.lambda.apiKeySecretRef, endpoint: offer.spec.lambda.endpoint } }
          : { provider: 'command', command: offer.spec.command!.release },
        idleTimeout: offer.spec.idleTimeout ?? DEFAULT_IDLE_TIMEOUT,
        expiresAt: rfc3339(new Date(now.getTime() + parseDuration(offer.spec.maxLifetime ?? DEFAULT_MAX_LIFETIME))),
      } as Partial<LeaseStatus>,
    };
  }

  /** Active Leases, counting slots claimed here that the cache may not show yet; `except` (the Lease being scheduled) is left out. */
  private activeCount(except: string): number {
    const uids = new Set(this.claimed);
    for (const l of this.deps.leases.list()) {
      const uid = l.metadata?.uid ?? '';
      if (ACTIVE_PHASES.includes(phaseOf(l))) uids.add(uid);
      else if (phaseOf(l) !== 'Pending') uids.delete(uid);
    }
    uids.delete(except);
    return uids.size;
  }

  // ---- Launching, Ready, Idle, Releasing, Released, Failed ----

  private async observe(lease: Lease, phase: Phase): Promise<Observation> {
    const st = lease.status ?? {};
    const now = this.now().getTime();
    const deleting = Boolean(lease.metadata?.deletionTimestamp);
    switch (phase) {
      case 'Launching': {
        if (deleting) return { event: { type: 'DELETE_REQUESTED', message: 'deleted while launching; releasing the machine' } };
        const started = Date.parse(st.launch?.startedAt ?? '') || now;
        if (now - started > this.deps.settings.acquireTimeoutMs) {
          return { event: { type: 'LAUNCH_FAILED', reason: 'AcquireTimeout', message: `acquire and agent readiness took longer than acquireTimeout (${Math.round(this.deps.settings.acquireTimeoutMs / 1000)}s); releasing` } };
        }
        const uid = lease.metadata?.uid ?? '';
        const pending = this.unrecorded.get(uid);
        if (st.providerState) this.unrecorded.delete(uid);
        else if (pending && pending.attempt === (st.launch?.attempt ?? 0)) {
          return { status: pending.fields, requeueAfter: 100 };
        }
        if (!st.providerState) {
          // Launching with no recorded result, and no acquire running in this
          // pass: a previous controller stopped mid-acquire. Whatever it may
          // have made is found by lease ID and released.
          return { event: { type: 'LAUNCH_FAILED', reason: 'LaunchInterrupted', message: 'the controller stopped while acquire was running; releasing whatever it may have made' } };
        }
        const check = await this.deps.driver.prepare(lease);
        return this.fromPrepare(check, started, lease);
      }
      case 'Ready':
      case 'Idle': {
        if (deleting) return { event: { type: 'DELETE_REQUESTED', message: 'deleted; releasing the machine' } };
        // maxLifetime ends the Lease whatever a probe would say: no probe first.
        const lifetime = verdict({ now, expiresAt: st.expiresAt, idleTimeoutMs: Infinity, lastActivityMs: now });
        if (lifetime.kind === 'expired') return { event: { type: 'EXPIRED', reason: lifetime.reason, message: lifetime.message } };
        // A pass that comes back early with nothing new (typically this
        // process's own Ready or Idle write returning through the informer)
        // waits for the check already scheduled instead of probing again.
        const uid = lease.metadata?.uid ?? '';
        const inputs = checkInputsOf(lease);
        const planned = this.nextCheck.get(uid);
        if (planned && planned.inputs === inputs && now < planned.at) return { requeueAfter: planned.at - now };
        const check = await this.deps.driver.check(lease);
        // The probe takes time (seconds on a slow link): judge and schedule the
        // next check from when it answered, not from before it started, or every
        // check would come one probe late and the release a probe later still.
        const at = this.now().getTime();
        if (check.kind === 'mismatch') return { event: { type: 'LAUNCH_FAILED', reason: check.reason, message: check.message } };
        const busy = check.kind === 'ok' ? check.busy : undefined;
        // What the probe installed: the next check rewrites keys only when spec.sshKeys differs from it.
        const keysStatus: Partial<LeaseStatus> = check.kind === 'ok' ? { installedKeysHash: check.keysHash } : {};
        const activityStatus: Partial<LeaseStatus> = { ...keysStatus, ...(busy ? { lastActivityAt: rfc3339(new Date(at)) } : {}) };
        const idleTimeoutMs = parseDuration(st.idleTimeout ?? DEFAULT_IDLE_TIMEOUT);
        const last = Math.max(lastActivity({ readyAt: st.readyAt, lastActivityAt: st.lastActivityAt, annotation: (lease.metadata?.annotations as Record<string, string> | undefined)?.[ACTIVITY_ANNOTATION] }), busy ? at : 0);
        const v = verdict({ now: at, expiresAt: st.expiresAt, idleTimeoutMs, lastActivityMs: last, busy });
        const expires = Date.parse(st.expiresAt ?? '') || Infinity;
        const requeueAfter = nextCheckIn(at, this.deps.settings.checkIntervalMs, [expires, last + idleTimeoutMs]);
        if (v.kind === 'expired' || check.kind === 'unreachable') this.nextCheck.delete(uid);
        else this.nextCheck.set(uid, { at: at + requeueAfter, inputs });
        if (v.kind === 'expired') return { event: { type: 'EXPIRED', reason: v.reason, message: v.message } };
        if (v.kind === 'busy') return { event: { type: 'BUSY', message: `${busy} job(s) running` }, status: activityStatus, requeueAfter };
        const unreachable = check.kind === 'unreachable' ? ` (unreachable: ${check.message})` : '';
        return {
          event: { type: 'IDLE', message: `idle; released at ${new Date(v.releaseAt).toISOString()} unless work starts${unreachable}` },
          status: { ...keysStatus, idleSince: st.idleSince && phase === 'Idle' ? st.idleSince : rfc3339(new Date(at)) },
          requeueAfter,
        };
      }
      case 'Releasing':
        return this.release(lease);
      case 'Released':
      case 'Failed':
        return this.ended(lease);
      default:
        return {};
    }
  }

  private fromPrepare(check: MachineCheck, startedMs: number, lease?: Lease): Observation {
    if (check.kind === 'mismatch') return { event: { type: 'LAUNCH_FAILED', reason: check.reason, message: check.message } };
    if (check.kind === 'unreachable') {
      // Machines take a while to boot: keep trying until acquireTimeout.
      const left = startedMs + this.deps.settings.acquireTimeoutMs - this.now().getTime();
      return { status: { message: `waiting for the machine's agent: ${check.message}` }, requeueAfter: Math.max(100, Math.min(2000, left)) };
    }
    const nowMs = this.now().getTime();
    const now = rfc3339(new Date(nowMs));
    if (lease) {
      // The prepare probe has just looked at the machine, and nothing can be
      // running on a machine not yet handed over: the first check comes one
      // check interval (or a deadline) after Ready, not at once.
      const st = lease.status ?? {};
      const deadlines = [Date.parse(st.expiresAt ?? '') || Infinity, nowMs + parseDuration(st.idleTimeout ?? DEFAULT_IDLE_TIMEOUT)];
      this.nextCheck.set(lease.metadata?.uid ?? '', { at: nowMs + nextCheckIn(nowMs, this.deps.settings.checkIntervalMs, deadlines), inputs: checkInputsOf(lease) });
      const created = Date.parse(lease.metadata?.creationTimestamp as unknown as string);
      if (created) this.deps.metrics?.ready(lease.status?.release?.provider ?? 'command', Math.max(0, (this.now().getTime() - created) / 1000));
    }
    return {
      event: { type: 'MACHINE_READY', message: `ready (${describeFacts(check.facts)})` },
      status: { facts: check.facts, readyAt: now, lastActivityAt: now, installedKeysHash: check.keysHash, machine: check.machine } as Partial<LeaseStatus>,
    };
  }

  private async release(lease: Lease): Promise<Observation> {
    const st = lease.status ?? {};
    const attempts = (st.releaseAttempts ?? 0) + 1;
    this.nextCheck.delete(lease.metadata?.uid ?? '');
    try {
      await this.deps.driver.release(lease);
      return { event: { type: 'RELEASE_CONFIRMED', message: 'released: the provider confirmed the machine is gone' }, status: { releasedAt: rfc3339(this.now()), releaseAttempts: attempts } };
    } catch (err) {
      const text = errorText(err);
      this.deps.metrics?.releaseFailed(st.release?.provider ?? 'command');
      return {
        event: { type: 'RELEASE_FAILED', message: `release attempt ${attempts} failed: ${text}; retrying in ${Math.round(this.deps.settings.checkIntervalMs / 1000)}s` },
        status: { releaseAttempts: attempts, lastReleaseError: text },
        requeueAfter: this.deps.settings.checkIntervalMs,
      };
    }
  }

  private async ended(lease: Lease): Promise<Observation> {
    const { historyLimit = 32, historyMaxAgeMs = 7 * 24 * 3600_000 } = this.deps.settings;
    this.claimed.delete(lease.metadata?.uid ?? '');
    this.nextCheck.delete(lease.metadata?.uid ?? '');
    if (lease.metadata?.finalizers?.includes(RELEASE_FINALIZER)) await this.deps.writer.removeFinalizer(lease);
    const ns = lease.metadata!.namespace!;
    const ended = this.deps.leases
      .list()
      .filter((l) => l.metadata?.namespace === ns && (phaseOf(l) === 'Released' || phaseOf(l) === 'Failed'))
      .map((l) => ({ name: l.metadata!.name!, namespace: ns, endedAt: endedAt(l) }));
    const now = this.now().getTime();
    // Every Lease past the limit goes now, not only this one: an older ended
    // Lease may not be reconciled again until its own max age.
    const prune = leasesToPrune(ended, now, historyLimit, historyMaxAgeMs);
    for (const p of prune) await this.deps.writer.delete(ns, p.name);
    if (prune.some((p) => p.name === lease.metadata!.name)) return {};
    // Capped: a timer past 2^31 ms would fire at once.
    return { requeueAfter: Math.min(3600_000, Math.max(1000, endedAt(lease) + historyMaxAgeMs - now)) };
  }

  // ---- writing status, then running effects ----

  private async apply(lease: Lease, next: Step, obs: Observation): Promise<{ lease: Lease; done?: boolean; requeueAfter?: number } | undefined> {
    const now = this.now();
    const generation = lease.metadata?.generation;
    const acquiring = next.effects.includes('acquire');
    // Until the intent is written the Lease stays Pending: a failure gives back the slot scheduling claimed for it.
    const unclaim = (err: unknown) => {
      if (acquiring) this.claimed.delete(lease.metadata?.uid ?? '');
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
    if (next.phase === 'Pending') {
      const parsed = parseWhere(lease.spec.where);
      if (parsed.ok) status.parsedWhere = parsed.value as LeaseStatus['parsedWhere'];
    }
    if (next.phase === 'Failed' && next.context.failure) {
      status.reason = next.context.failure.reason;
      status.message = next.context.failure.message;
    }
    // Intent before effect: a conflict here throws, and no effect runs.
    const written = await this.deps.status.write(LEASE_RESOURCE, lease, status).catch(unclaim);
    if (written !== lease && next.effects.includes('announce')) {
      const warning = next.phase === 'Pending' || next.phase === 'Failed' || next.context.failure !== undefined || obs.event?.type === 'RELEASE_FAILED';
      await this.deps.events.record(written, warning ? 'Warning' : 'Normal', status.reason ?? next.phase, status.message ?? '');
    }
    lease = written;
    if (next.effects.includes('acquire')) {
      this.claimed.add(lease.metadata!.uid!);
      return { lease: await this.acquire(lease) };
    }
    if (next.effects.includes('release')) return { lease };
    if (next.effects.includes('finish')) {
      if (lease.metadata?.finalizers?.includes(RELEASE_FINALIZER)) lease = await this.deps.writer.removeFinalizer(lease);
      this.claimed.delete(lease.metadata?.uid ?? '');
      return { lease, done: true };
    }
    return { lease, done: true, requeueAfter: obs.requeueAfter };
  }

  /** Runs acquire and records what it made; on failure the next pass releases. */
  private async acquire(lease: Lease): Promise<Lease> {
    // The latest stderr line also shows in status.message while acquire runs
    // (throttled; acquire never waits for these writes). What they write is
    // kept as the Lease the result is recorded on.
    let current = lease;
    const progress = new ProgressThrottle(PROGRESS_INTERVAL_MS, async (line) => {
      current = await this.writeProgress(current, `acquiring from ${current.status?.offer ?? 'the offer'}: ${line}`);
    });
    const result = await this.deps.driver.acquire(lease, (line) => {
      void this.deps.events.record(lease, 'Normal', 'Provider', line);
      progress.push(line);
    });
    await progress.stop();
    lease = current;
    if (result.kind === 'launched') {
      const fields = { providerState: result.state, machine: result.machine, message: 'machine acquired; installing the agent' } as Partial<LeaseStatus>;
      try {
        return await this.record(lease, fields);
      } catch (err) {
        this.unrecorded.set(lease.metadata?.uid ?? '', { attempt: lease.status?.launch?.attempt ?? 0, fields });
        throw err;
      }
    }
    const next = step(restore('Launching', contextOf(lease)), { type: 'LAUNCH_FAILED', reason: result.reason, message: result.message });
    const applied = await this.apply(lease, next, { status: result.state ? { providerState: result.state } : {} });
    return applied!.lease;
  }

  /** A progress message for a launch still running; a lost race reads the Lease again and skips this line. */
  private async writeProgress(lease: Lease, message: string): Promise<Lease> {
    try {
      return await this.deps.status.write(LEASE_RESOURCE, lease, { ...lease.status, message } as LeaseStatus);
    } catch (err) {
      this.deps.log.debug({ err: errorText(err), lease: lease.metadata?.name }, 'acquire progress not recorded');
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

/** Why one of spec.sshKeys cannot go into authorized_keys, naming it, or undefined when all can. */
export function invalidSshKey(keys: readonly string[]): string | undefined {
  for (const [i, key] of keys.entries()) {
    const parsed = parsePublicKey(key);
    if (!parsed.ok) return `spec.sshKeys[${i}] is not an OpenSSH public key: ${parsed.error}`;
  }
  return undefined;
}

function phaseOf(lease: Lease): Phase {
  return (lease.status?.phase ?? 'Pending') as Phase;
}

function contextOf(lease: Lease) {
  return {
    reason: lease.status?.reason ?? 'Created',
    message: lease.status?.message ?? '',
    attempt: lease.status?.launch?.attempt ?? 0,
    ...(lease.status?.phase === 'Releasing' && failureOf(lease) ? { failure: failureOf(lease) } : {}),
  };
}

/** A Lease releasing because its launch failed keeps that failure in its Ready condition. */
function failureOf(lease: Lease): { reason: string; message: string } | undefined {
  const ready = lease.status?.conditions?.find((c) => c.type === 'Ready');
  return ready?.reason && ready.reason.startsWith('Failed:') ? { reason: ready.reason.slice(7), message: ready.message ?? '' } : undefined;
}

function conditionsFor(prev: LeaseStatus['conditions'], next: Step, generation: number | undefined, now: Date) {
  const scheduled =
    next.phase === 'Pending'
      ? { type: 'Scheduled', status: 'False' as const, reason: next.context.reason, message: next.context.message }
      : { type: 'Scheduled', status: 'True' as const, reason: 'OfferChosen', message: 'an Offer was chosen and a machine requested' };
  let conditions = setCondition(prev, scheduled, generation, now);
  const f = next.context.failure;
  const ready =
    next.phase === 'Ready' || next.phase === 'Idle'
      ? { type: 'Ready', status: 'True' as const, reason: next.phase === 'Ready' ? 'MachineReady' : 'MachineIdle', message: next.context.message }
      : f
        ? { type: 'Ready', status: 'False' as const, reason: `Failed:${f.reason}`, message: f.message }
        : { type: 'Ready', status: 'False' as const, reason: next.phase, message: next.context.message };
  if (next.phase !== 'Pending' || prev?.some((c) => c.type === 'Ready')) conditions = setCondition(conditions, ready, generation, now);
  return conditions as LeaseStatus['conditions'];
}

function endedAt(lease: Lease): number {
  return Date.parse(lease.status?.releasedAt ?? '') || Date.parse(lease.metadata?.creationTimestamp as unknown as string) || 0;
}

function describeFacts(f: NonNullable<LeaseStatus['facts']>): string {
  const gpus = f.gpus ? `, ${f.gpus}x ${f.gpuModel ?? 'GPU'}${f.vramGiB ? ` (${f.vramGiB} GiB)` : ''}` : '';
  return `${f.os}/${f.arch}, ${f.cpus} cpu, ${f.memoryGiB} GiB${gpus}`;
}

