// What stands between a Lease's status and what the controller does: every
// status write carries the record's values for the fields the record holds;
// status that differs from the record is reported (StatusTampered, once per
// tampering) and restored; a record on a Lease whose status says it holds no
// machine is released from the record; vanished Leases are swept.
import type { Logger } from 'pino';
import { ACTIVE_PHASES, LEASE_RESOURCE, type Lease, type LeaseStatus } from '../../src/api/index.js';
import type { ObjectCache, ReconcileResult } from '../../src/kube/cache.js';
import type { EffectRunner } from '../../src/kube/effects.js';
import type { EventRecorder } from '../../src/kube/events.js';
import { INSTALLATION_ANNOTATION } from '../../src/kube/installation.js';
import { objectKey } from '../../src/kube/resource.js';
import type { StatusWriter } from '../../src/kube/status.js';
import type { LeaseDriver } from './driver.js';
import type { Phase } from './machine.js';
import type { LeaseEffectResult, LeaseSettings } from './decision.js';
import { RecordKeeper } from './record-keeper.js';
import type { LeaseRecord, RecordStore } from '../../src/kube/leaserecords.js';
import { phaseOf } from './status.js';
import { sealedStatus, tamperedFields, withResult } from './policy/trust.js';

/** The work queue key of the sweep for machines whose Lease vanished (no Lease key has a dot in its namespace). */
export const RECORD_SWEEP_KEY = 'leasehold.dev/lease-records';

export interface LeaseGuardDeps {
  records: RecordStore;
  recordScope?: { namespace: string; watchNamespace?: string | undefined } | undefined;
  leases: ObjectCache<Lease>;
  writer: { get(namespace: string, name: string): Promise<Lease | undefined> };
  status: StatusWriter;
  driver: LeaseDriver;
  effects: EffectRunner<LeaseEffectResult>;
  events: EventRecorder;
  settings: LeaseSettings;
  log: Logger;
  now: () => number;
}

export class LeaseGuard {
  /** The tampering last reported per Lease UID, so that each is reported once. */
  private readonly tampered = new Map<string, string>();
  /** Lease UIDs reported as taken on by no installation, so that each is reported once. */
  private readonly notTakenOn = new Set<string>();
  private readonly keeper: RecordKeeper;
  private adoption: Promise<void> | undefined;

  constructor(private readonly deps: LeaseGuardDeps) {
    this.keeper = new RecordKeeper({
      records: deps.records,
      namespace: deps.recordScope?.namespace ?? '',
      watchNamespace: deps.recordScope?.watchNamespace,
      leases: deps.leases,
      getLease: (ns, name) => deps.writer.get(ns, name),
      driver: deps.driver,
      effects: deps.effects,
      events: deps.events,
      log: deps.log,
      now: deps.now,
    });
  }

  forget(uid: string): void {
    this.tampered.delete(uid);
    this.notTakenOn.delete(uid);
    this.deps.records.evict(uid);
  }

  /** Releases the machines of Leases that vanished without their release; the work queue runs it every check interval. */
  async sweep(settled: () => void): Promise<ReconcileResult> {
    await this.adopted();
    await this.keeper.sweep(settled);
    return { requeueAfter: this.deps.settings.checkIntervalMs };
  }

  /** Before any Lease is acted on, Leases from before records existed get theirs (once per installation). */
  adopted(): Promise<void> {
    // Then one list of every record: each Lease's first pass after a start
    // reads its record from memory, not with a GET of its own.
    this.adoption ??= this.keeper.adoptLegacyLeases().then(() => this.deps.records.list()).then(() => undefined, (err: unknown) => {
      this.adoption = undefined;
      throw err;
    });
    return this.adoption;
  }

  /**
   * A record of a machine not confirmed released, on a Lease whose status
   * says it holds none (Pending, Released, Failed): the phase was written by
   * someone else. The machine is released from the record before the Lease
   * goes on (is scheduled again, or lets go of its finalizer); until then
   * the pass waits (the release's end enqueues the Lease again).
   */
  async unaccounted(lease: Lease, phase: Phase, record: LeaseRecord | undefined, settled: () => void): Promise<ReconcileResult | undefined> {
    if (!record || record.releasedAt || ACTIVE_PHASES.includes(phase)) return undefined;
    const uid = lease.metadata!.uid!;
    // An acquire still running records its machine when it ends.
    if (this.deps.effects.get(uid)?.state === 'running') return { requeueAfter: 1000 };
    // The phase is the informer's, which may not show this controller's own
    // latest writes yet: a Pending that is only the cache lagging behind the
    // Launching write (a quick acquire may have ended meanwhile) must not
    // release the machine just made, nor schedule the Lease again over its
    // record. A fresh read decides; the cache's update enqueues it again.
    const fresh = await this.deps.writer.get(lease.metadata!.namespace!, lease.metadata!.name!);
    if (fresh?.metadata?.uid === uid && ACTIVE_PHASES.includes(phaseOf(fresh))) return { requeueAfter: 1000 };
    // A launch whose Launching write failed left a record but never called the provider: scheduling again replaces it.
    if (phase === 'Pending' && record.providerState === undefined && record.machine === undefined) return undefined;
    const outcome = this.keeper.release(record, settled);
    if (outcome.state === 'released') return undefined;
    this.report(lease, `status.phase (${phase})`, `the controller's record says machine ${record.machineName} was never released, so it is released from the record`);
    if (outcome.state === 'failed') {
      void this.deps.events.record(lease, 'Warning', 'ReleaseFailed', `releasing machine ${record.machineName} from the controller's record failed: ${outcome.error}; retrying`);
      return { requeueAfter: this.deps.settings.checkIntervalMs };
    }
    return {};
  }

  /**
   * Status that differs from the record is reported once and written back
   * from the record; status that lags it (an acquire's result whose status
   * write failed) is brought up to it.
   */
  async check(lease: Lease, record: LeaseRecord): Promise<Lease> {
    const fields = tamperedFields(lease.status, record);
    if (fields.length) this.report(lease, fields.join(', '), 'they were ignored and restored from the record');
    else this.tampered.delete(record.uid);
    return this.deps.status.write(LEASE_RESOURCE, lease, sealedStatus(lease.status ?? {}, record));
  }

  /** An acquire's result (providerState, machine) goes to the record before status: the record is what releases it. */
  async sealResult(lease: Lease, fields: Partial<LeaseStatus>): Promise<void> {
    const record = await this.deps.records.get(lease.metadata!.uid!);
    const next = record && withResult(record, fields);
    if (next) await this.deps.records.put(next);
  }

  /** Every status write carries the record's values for the fields it holds, so a write also undoes tampering. */
  async writeStatus(lease: Lease, status: LeaseStatus): Promise<Lease> {
    const record = await this.deps.records.get(lease.metadata!.uid!);
    return this.deps.status.write(LEASE_RESOURCE, lease, sealedStatus(status, record));
  }

  /**
   * A Lease another installation took on, or one that says it holds a
   * machine (or ended) with no installation's stamp and no record here:
   * nothing is written for it and nothing released. A machine-holding one is
   * reported once, since its status may have been written by hand.
   */
  leftAlone(lease: Lease, phase: Phase, stamp: string | undefined): undefined {
    const uid = lease.metadata!.uid!;
    if (stamp !== undefined || !ACTIVE_PHASES.includes(phase) || this.notTakenOn.has(uid)) return undefined;
    this.notTakenOn.add(uid);
    void this.deps.events.record(
      lease,
      'Warning',
      'NotTakenOn',
      `status.phase says ${phase}, but the Lease has no annotation ${INSTALLATION_ANNOTATION} and installation ${this.deps.settings.installationID} holds no record of it: left to the installation that holds its record; if none does, its status was not written by a controller and nothing will be probed or released`,
    );
    return undefined;
  }

  /** The stamp named another installation while this one's record holds the Lease's machine: it was stamped back. */
  restamped(lease: Lease, stamp: string): void {
    this.deps.log.warn({ lease: objectKey(lease), stamp }, 'Lease stamped with another installation while this installation holds its record');
    void this.deps.events.record(
      lease,
      'Warning',
      'InstallationConflict',
      `annotation ${INSTALLATION_ANNOTATION} named installation ${stamp}, but installation ${this.deps.settings.installationID} holds the record of this Lease's machine; it was set back. Only the controller sets this annotation`,
    );
  }

  private report(lease: Lease, fields: string, what: string): void {
    const uid = lease.metadata!.uid!;
    if (this.tampered.get(uid) === fields) return;
    this.tampered.set(uid, fields);
    this.deps.log.warn({ lease: objectKey(lease), fields }, 'Lease status changed by someone other than the controller');
    void this.deps.events.record(lease, 'Warning', 'StatusTampered', `${fields} changed by someone other than the controller; ${what}. Only the controller may write a Lease's status`);
  }
}
