// Status against the controller's record: pure functions. A pass of the
// reconciler sees the Lease with the record's values in place of whatever
// status says for them (sealedLease), writes status only through
// sealedStatus (so a controller write also repairs tampering), and reports
// the fields someone else changed (tamperedFields).
import { canonical } from '../../../src/kube/canonical.js';
import type { Lease, LeaseStatus } from '../../../src/api/index.js';
import type { LeaseRecord } from '../../../src/kube/leaserecords.js';

/** The status fields the record holds and the controller acts on. launch.startedAt is held too (acquireTimeout counts from it). */
const SEALED = ['offer', 'leaseID', 'machineName', 'release', 'expiresAt', 'idleTimeout', 'providerState', 'machine'] as const;
type Sealed = (typeof SEALED)[number];

/** The record a launch writes before the provider is called, from the status the scheduling decision produced. */
export function recordOf(lease: Lease, status: Partial<LeaseStatus>): LeaseRecord {
  return {
    uid: lease.metadata!.uid!,
    namespace: lease.metadata!.namespace!,
    name: lease.metadata!.name!,
    offer: status.offer ?? '',
    leaseID: status.leaseID ?? '',
    machineName: status.machineName ?? '',
    release: normalized('release', status.release) as LeaseRecord['release'],
    expiresAt: status.expiresAt,
    idleTimeout: status.idleTimeout,
    launchStartedAt: status.launch?.startedAt,
    ...(status.providerState === undefined ? {} : { providerState: status.providerState }),
    ...(status.machine === undefined ? {} : { machine: normalized('machine', status.machine) as LeaseRecord['machine'] }),
  };
}

/** The record with an acquire's result (providerState, machine) from `fields`; undefined when it already holds them. */
export function withResult(record: LeaseRecord, fields: Partial<LeaseStatus>): LeaseRecord | undefined {
  const next = { ...record };
  if (fields.providerState !== undefined) next.providerState = fields.providerState;
  if (fields.machine !== undefined) next.machine = normalized('machine', fields.machine) as LeaseRecord['machine'];
  return canonical(next.providerState) === canonical(record.providerState) && canonical(next.machine) === canonical(record.machine) ? undefined : next;
}

/**
 * `status` with the sealed fields exactly as the record has them: a field
 * the record lacks is dropped. Without a record (nothing was launched, or
 * the status was not written by this controller) all of them are dropped.
 */
export function sealedStatus(status: LeaseStatus, record: LeaseRecord | undefined): LeaseStatus {
  const out: Record<string, unknown> = { ...status };
  for (const f of SEALED) {
    const v = record?.[f];
    if (v === undefined) delete out[f];
    else out[f] = v;
  }
  if (status.launch) out['launch'] = { ...status.launch, ...(record?.launchStartedAt ? { startedAt: record.launchStartedAt } : {}) };
  return out as LeaseStatus;
}

/** The Lease as a pass must see it: status with the record's values. */
export function sealedLease(lease: Lease, record: LeaseRecord | undefined): Lease {
  return { ...lease, status: sealedStatus(lease.status ?? {}, record) };
}

/**
 * The status fields (as field paths) that hold something other than the
 * record: written by someone else. A field missing from status is not
 * counted: status may lag the record, and nothing reads it from there.
 */
export function tamperedFields(status: LeaseStatus | undefined, record: LeaseRecord): string[] {
  const st = status ?? {};
  const changed: string[] = SEALED.filter((f) => st[f] !== undefined && canonical(normalized(f, st[f])) !== canonical(normalized(f, record[f]))).map((f) => `status.${f}`);
  const started = st.launch?.startedAt;
  if (started !== undefined && record.launchStartedAt !== undefined && started !== record.launchStartedAt) changed.push('status.launch.startedAt');
  return changed;
}

/** A Lease carrying only what releasing the record's machine needs (its own Lease may be gone). */
export function leaseOfRecord(record: LeaseRecord): Lease {
  return {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: { name: record.name, namespace: record.namespace, uid: record.uid },
    spec: { where: '*' },
    status: sealedStatus({}, record),
  } as Lease;
}

/** The API server fills schema defaults into status; the record holds them filled in too, so that both compare equal. */
function normalized(field: Sealed, value: unknown): unknown {
  if (value === undefined || value === null) return value;
  if (field === 'machine') {
    const m = value as NonNullable<LeaseStatus['machine']>;
    return m.ssh ? { ...m, ssh: { ...m.ssh, port: m.ssh.port ?? 22 } } : m;
  }
  if (field === 'release') {
    const r = value as NonNullable<LeaseStatus['release']>;
    return r.lambda ? { ...r, lambda: { ...r.lambda, apiKeySecretRef: { ...r.lambda.apiKeySecretRef, key: r.lambda.apiKeySecretRef.key ?? 'apiKey' } } } : r;
  }
  return value;
}

