// Which installation acts on a Lease. Several installations may watch one
// namespace (two releases there, or one watching all namespaces), so each
// stamps the Leases it takes on with its ID before it does anything for
// them, and leaves the others' alone. The stamp is an annotation a tenant
// can edit; the controller's record, which a tenant cannot, outranks it.
import type { Lease } from '../../../src/api/index.js';
import { INSTALLATION_ANNOTATION } from '../../../src/kube/installation.js';
import type { Phase } from '../machine.js';
import type { LeaseRecord } from '../../../src/kube/leaserecords.js';

export { INSTALLATION_ANNOTATION };

export type Ownership =
  /** Stamped with this installation's ID, or held by its record: act on it. */
  | { kind: 'ours' }
  /** Not stamped (or stamped wrongly while this installation's record holds it): stamp it before anything else. */
  | { kind: 'stamp'; conflict?: string }
  /** Another installation's, or a machine-holding Lease no installation took on here: nothing is written for it. */
  | { kind: 'others'; stamp?: string };

export function ownershipOf(lease: Lease, phase: Phase, record: LeaseRecord | undefined, installationID: string): Ownership {
  const stamp = stampOf(lease);
  if (stamp === installationID) return { kind: 'ours' };
  if (record) {
    // A record from before records were stamped names no installation: a stamp by another installation wins over it.
    if (stamp !== undefined && record.installation === undefined) return { kind: 'others', stamp };
    return stamp === undefined ? { kind: 'stamp' } : { kind: 'stamp', conflict: stamp };
  }
  if (stamp !== undefined) return { kind: 'others', stamp };
  // A Lease nobody took on yet is taken on by the first installation whose
  // stamp lands; one that says it holds a machine or ended without any
  // installation's stamp or this one's record belongs to an installation
  // from before stamps (which holds its record) or was written by hand.
  return phase === 'Pending' ? { kind: 'stamp' } : { kind: 'others' };
}

/** The installation ID a Lease is stamped with, if any. */
export const stampOf = (lease: Lease): string | undefined => (lease.metadata?.annotations as Record<string, string> | undefined)?.[INSTALLATION_ANNOTATION];

/** Whether a Lease is stamped by this installation: what its history and metrics count. */
export const stampedBy = (lease: Lease, installationID: string) => stampOf(lease) === installationID;
