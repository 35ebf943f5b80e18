// The leader election record kept on a real coordination.k8s.io/v1 Lease.
import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { isConflict, isNotFound } from './client.js';
import type { LeaderElectionRecord, LeaseStore, StoredRecord } from './leaderelection.js';

/** LeaseStore on a real coordination.k8s.io/v1 Lease through client-node. */
export class KubeLeaseStore implements LeaseStore {
  private last?: V1Lease;

  constructor(
    private readonly api: CoordinationV1Api,
    private readonly namespace: string,
    private readonly name: string,
  ) {}

  describe(): string {
    return `${this.namespace}/${this.name}`;
  }

  async get(): Promise<StoredRecord | undefined> {
    try {
      return this.remember(await this.api.readNamespacedLease({ namespace: this.namespace, name: this.name }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async create(record: LeaderElectionRecord): Promise<StoredRecord> {
    const body: V1Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { namespace: this.namespace, name: this.name }, spec: toSpec(record) };
    return this.remember(await this.api.createNamespacedLease({ namespace: this.namespace, body }));
  }

  async update(record: LeaderElectionRecord, resourceVersion: string): Promise<StoredRecord> {
    // Keep whatever else the Lease carries (labels, preferredHolder, strategy); replace only the record.
    const base = this.last ?? { metadata: { namespace: this.namespace, name: this.name } };
    const body: V1Lease = {
      ...base,
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { ...base.metadata, resourceVersion },
      spec: { ...base.spec, ...toSpec(record) },
    };
    return this.remember(await this.api.replaceNamespacedLease({ namespace: this.namespace, name: this.name, body }));
  }

  private remember(lease: V1Lease): StoredRecord {
    this.last = lease;
    const spec = lease.spec ?? {};
    return {
      resourceVersion: lease.metadata?.resourceVersion ?? '',
      record: {
        holderIdentity: spec.holderIdentity ?? '',
        leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
        acquireTime: toDate(spec.acquireTime),
        renewTime: toDate(spec.renewTime),
        leaseTransitions: spec.leaseTransitions ?? 0,
      },
    };
  }
}

// client-node hands MicroTime fields back as the wire strings, and sends a
// plain Date with millisecond precision, which the API server refuses for a
// MicroTime: V1MicroTime writes the six fractional digits it requires.
function toSpec(r: LeaderElectionRecord): NonNullable<V1Lease['spec']> {
  return {
    holderIdentity: r.holderIdentity,
    leaseDurationSeconds: r.leaseDurationSeconds,
    leaseTransitions: r.leaseTransitions,
    acquireTime: r.acquireTime ? new V1MicroTime(r.acquireTime.getTime()) : undefined,
    renewTime: r.renewTime ? new V1MicroTime(r.renewTime.getTime()) : undefined,
  };
}

function toDate(v: Date | string | undefined): Date | undefined {
  if (v === undefined || v === null) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d;
}
