// Machines that only the controller's record still accounts for: the Lease
// vanished (its finalizer stripped, then deleted), or its status claims no
// machine (Pending, Released, Failed) while the record holds one. Each is
// released from the record, as an effect off the reconcile workers, and the
// record deleted once the provider confirms. Also: Leases made before
// records existed are given one, once.
import type { Logger } from 'pino';
import { ACTIVE_PHASES, type Lease } from '../../src/api/index.js';
import type { ObjectCache } from '../../src/kube/cache.js';
import type { EffectRunner } from '../../src/kube/effects.js';
import { errorText } from '../../src/kube/errors.js';
import type { EventRecorder } from '../../src/kube/events.js';
import type { LeaseDriver } from './driver.js';
import type { LeaseEffectResult } from './decision.js';
import { recordSecretName, type LeaseRecord, type RecordStore } from '../../src/kube/leaserecords.js';
import { phaseOf } from './status.js';
import { leaseOfRecord, recordOf } from './policy/trust.js';

export interface RecordKeeperDeps {
  records: RecordStore;
  /** The namespace the record Secrets live in (events about a vanished Lease go on its record). */
  namespace: string;
  leases: ObjectCache<Lease>;
  /** The one namespace this controller watches, if it watches one: records of other namespaces belong to other installations. */
  watchNamespace?: string | undefined;
  /** A fresh read of a Lease, to be sure it is gone before its machine is released. */
  getLease: (namespace: string, name: string) => Promise<Lease | undefined>;
  driver: LeaseDriver;
  effects: EffectRunner<LeaseEffectResult>;
  events: EventRecorder;
  log: Logger;
  now: () => number;
}

export type RecordRelease = { state: 'running' } | { state: 'released' } | { state: 'failed'; error: string };

export class RecordKeeper {
  /** UIDs of vanished Leases whose machines a sweep is releasing. */
  private readonly vanished = new Map<string, LeaseRecord>();

  constructor(private readonly deps: RecordKeeperDeps) {}

  /**
   * Releases the record's machine and then deletes the record, as an effect
   * (`settled` runs when it ends). Call again to learn how it went: a failed
   * release is reported once and started again by the next call.
   */
  release(record: LeaseRecord, settled: () => void): RecordRelease {
    const owner = ownerOf(record.uid);
    const effect = this.deps.effects.get(owner);
    if (effect?.state === 'running') return { state: 'running' };
    if (effect?.state === 'done') {
      this.deps.effects.take(owner);
      const result = effect.result;
      if (result.kind === 'release' && result.error !== undefined) return { state: 'failed', error: result.error };
      return { state: 'released' };
    }
    this.deps.effects.start(owner, 'release/record', (signal) => this.releaseNow(record, signal), settled);
    return { state: 'running' };
  }

  private async releaseNow(record: LeaseRecord, signal: AbortSignal): Promise<LeaseEffectResult> {
    try {
      await this.deps.driver.release(leaseOfRecord(record), signal);
      await this.deps.records.delete(record.uid);
      return { kind: 'release', at: this.deps.now() };
    } catch (err) {
      return { kind: 'release', error: errorText(err), at: this.deps.now() };
    }
  }

  /**
   * Releases the machines of Leases that are gone from the cache (which has
   * synced: sweeps run on reconcile workers) and, read afresh, from the API.
   */
  async sweep(settled: () => void): Promise<void> {
    for (const [uid, record] of this.vanished) {
      const outcome = this.release(record, settled);
      if (outcome.state === 'running') continue;
      const what = `the machine ${record.machineName} of Lease ${record.namespace}/${record.name} (UID ${uid})`;
      if (outcome.state === 'released') {
        this.vanished.delete(uid);
        this.deps.log.info({ lease: `${record.namespace}/${record.name}`, uid }, 'released the machine of a vanished Lease from its record');
        await this.deps.events.record(this.secretOf(record), 'Normal', 'ReleasedFromRecord', `released ${what}, whose Lease was deleted without its release; record deleted`);
      } else {
        this.deps.log.warn({ lease: `${record.namespace}/${record.name}`, uid, err: outcome.error }, 'releasing the machine of a vanished Lease failed; retrying');
        await this.deps.events.record(this.secretOf(record), 'Warning', 'ReleaseFailed', `releasing ${what} failed: ${outcome.error}; retrying`);
        this.release(record, settled);
      }
    }
    for (const record of await this.deps.records.list()) {
      if (this.vanished.has(record.uid) || this.inCache(record)) continue;
      // An acquire of the Lease may still be running: released now, the
      // machine it is about to make would outlive its record. A sweep after
      // the acquire ends releases it by the same name.
      if (this.deps.effects.get(record.uid)?.state === 'running') continue;
      if (this.deps.watchNamespace !== undefined && record.namespace !== this.deps.watchNamespace) continue;
      const fresh = await this.deps.getLease(record.namespace, record.name);
      if (fresh?.metadata?.uid === record.uid) continue;
      this.vanished.set(record.uid, record);
      this.deps.log.warn({ lease: `${record.namespace}/${record.name}`, uid: record.uid }, 'Lease vanished without its release (finalizer removed by hand?); releasing its machine from the record');
      await this.deps.events.record(
        this.secretOf(record),
        'Warning',
        'LeaseVanished',
        `Lease ${record.namespace}/${record.name} (UID ${record.uid}) was deleted without its release; releasing machine ${record.machineName} from this record`,
      );
      this.release(record, settled);
    }
  }

  /**
   * Gives a record to every Lease that may hold a machine but has none: a
   * Lease made before this controller kept records. Their status is trusted
   * this once; the marker written afterwards ends that trust, so a Lease
   * without a record later is one whose status the controller never wrote.
   */
  async adoptLegacyLeases(): Promise<void> {
    const { records, leases, log } = this.deps;
    if (await records.adopted()) return;
    const held = new Set((await records.list()).map((r) => r.uid));
    for (const lease of leases.list()) {
      const uid = lease.metadata?.uid ?? '';
      if (held.has(uid) || !ACTIVE_PHASES.includes(phaseOf(lease)) || !lease.status?.release) continue;
      await records.put(recordOf(lease, lease.status));
      log.info({ lease: `${lease.metadata?.namespace}/${lease.metadata?.name}`, uid }, 'Lease made before lease records: its record was written from its status');
    }
    await records.markAdopted();
  }

  private inCache(record: LeaseRecord): boolean {
    return this.deps.leases.get(record.namespace, record.name)?.metadata?.uid === record.uid;
  }

  private secretOf(record: LeaseRecord) {
    return { apiVersion: 'v1', kind: 'Secret', metadata: { name: recordSecretName(record.uid), namespace: this.deps.namespace }, spec: undefined };
  }
}

const ownerOf = (uid: string) => `record/${uid}`;
