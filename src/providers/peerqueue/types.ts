// The peer queue: batch/v1 Jobs in one namespace of another cluster, which
// that cluster's own Job controller leaves to us (spec.managedBy). This is
// the whole of what the PeerFleet controller may do there: list what is
// queued, read one Job, claim it with its resourceVersion (so of two lenders
// exactly one wins), give a claim back, refuse a Job, and write status back.
// Nothing here knows HTTP; errors are typed in errors.ts.
import type { V1Job, V1JobStatus } from '@kubernetes/client-node';

/** spec.managedBy of every lendable Job: the peer's Job controller leaves such Jobs alone. */
export const PEER_LENDING_MANAGER = 'leasehold.dev/peer-lending';
/** Label of every lendable Job, set by the peer. */
export const LENDABLE_LABEL = 'leasehold.dev/lendable';
/** `<cluster id>/<PeerFleet>/<node>` of the lender that runs the Job. */
export const CLAIMED_BY_ANNOTATION = 'leasehold.dev/claimed-by';
/** Why a lender will never run the Job (it cannot be made safe). */
export const REFUSED_ANNOTATION = 'leasehold.dev/refused';
/** The node that ran the Job, `<cluster id>/<node>`, written with the status. */
export const HOST_ANNOTATION = 'leasehold.dev/host';
/** The exit code of the Job's container, written once the Job finished. */
export const EXIT_CODE_ANNOTATION = 'leasehold.dev/exit-code';

/** Who claims: the same string the annotation carries. */
export function claimant(clusterID: string, peerFleet: string, node: string): string {
  return `${clusterID}/${peerFleet}/${node}`;
}

/** The claimant split back into its parts; undefined when the annotation is not one. */
export function parseClaimant(value: string | undefined): { clusterID: string; peerFleet: string; node: string } | undefined {
  const parts = (value ?? '').split('/');
  if (parts.length !== 3 || parts.some((p) => p === '')) return undefined;
  const [clusterID = '', peerFleet = '', node = ''] = parts;
  return { clusterID, peerFleet, node };
}

/** A claim either holds, or another lender (or the peer) changed the Job first. */
export type ClaimResult = { kind: 'claimed'; job: V1Job } | { kind: 'conflict'; message: string };

/** What a lender writes back: the status, and the annotations that go with it. */
export interface StatusWrite {
  status: V1JobStatus;
  annotations: Record<string, string>;
}

export interface PeerQueue {
  /**
   * Lendable Jobs that no one has claimed or refused and that have not
   * finished, in no particular order.
   */
  listQueued(signal?: AbortSignal): Promise<V1Job[]>;
  /** Every Job this claimant prefix (`<cluster id>/` or `<cluster id>/<PeerFleet>/`) has claimed, finished or not. */
  listClaimed(prefix: string, signal?: AbortSignal): Promise<V1Job[]>;
  /** One Job; a PeerQueueError NotFound when it does not exist. */
  get(name: string, signal?: AbortSignal): Promise<V1Job>;
  /** Claims the Job if it is still at resourceVersion and unclaimed; a lost race is a conflict, never an error. */
  claim(name: string, resourceVersion: string, by: string, signal?: AbortSignal): Promise<ClaimResult>;
  /** Removes our claim at resourceVersion; a conflict when the Job changed or is not ours. */
  release(name: string, resourceVersion: string, by: string, signal?: AbortSignal): Promise<ClaimResult>;
  /** Marks the Job as one we will never run, with why; a conflict when it changed first. */
  refuse(name: string, resourceVersion: string, reason: string, signal?: AbortSignal): Promise<ClaimResult>;
  /** Writes the Job's status (the status subresource) and annotations; the Job as the peer now has it. */
  writeStatus(name: string, write: StatusWrite, signal?: AbortSignal): Promise<V1Job>;
}
