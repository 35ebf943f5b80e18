// After a restart or a failover, claims and mirrors are found again by label
// and paired by the peer Job's uid; each pair says what to do so that no peer
// Job runs twice and none is lost. Only a fresh, complete list of our claims
// on the peer may be judged: a peer that did not answer proves nothing, and
// while it is away running mirrors simply keep running.
import type { V1Job } from '@kubernetes/client-node';
import { CLAIMED_BY_ANNOTATION } from '../../../src/providers/peerqueue/types.js';
import { nodeOf } from './accounting.js';
import { PEER_JOB_UID_LABEL } from '../labels.js';

export type Recovery =
  /** The mirror runs or ran: bring the peer's status up to it. */
  | { kind: 'writeBack'; peerJob: V1Job; mirror: V1Job }
  /** The mirror finished and the peer has its final status: the mirror may go. */
  | { kind: 'deleteMirror'; mirror: V1Job; message: string }
  /** Claimed, never started (the claim was written, the mirror was not): start it now. */
  | { kind: 'start'; peerJob: V1Job; node: string }
  /** The peer shows it claimed by us, but our record never named it: reported, never run. */
  | { kind: 'forged'; peerJob: V1Job; message: string }
  /** Claimed, never started, and the node may no longer take it: give it back to the queue. */
  | { kind: 'release'; peerJob: V1Job; message: string }
  /** Started here, its mirror is gone before it finished: report it failed rather than run it twice. */
  | { kind: 'reportLost'; peerJob: V1Job; message: string }
  /** A mirror whose peer Job is gone or no longer ours: left to finish, never reported. */
  | { kind: 'orphan'; mirror: V1Job; message: string };

const terminal = (job: V1Job | undefined) => job?.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ?? false;
const name = (job: V1Job) => `${job.metadata?.namespace ?? ''}/${job.metadata?.name ?? ''}`;

export interface RecoveryInput {
  /** Every peer Job whose claim names this PeerFleet (`<cluster id>/<PeerFleet>/`). */
  claims: readonly V1Job[];
  /** Every mirror Job labelled with this PeerFleet. */
  mirrors: readonly V1Job[];
  /** Whether the node may take this Job now (lending, not draining, and it fits). */
  mayStart: (node: string, job: V1Job) => boolean;
  /** Whether our own record (the PeerFleet status, written before the claim) names this Job's claim on this node. */
  recorded: (node: string, job: V1Job) => boolean;
}

export function recover({ claims, mirrors, mayStart, recorded }: RecoveryInput): Recovery[] {
  const byUID = new Map(mirrors.map((m) => [m.metadata?.labels?.[PEER_JOB_UID_LABEL] ?? '', m]));
  const claimed = new Set<string>();
  const out: Recovery[] = [];
  for (const peerJob of claims) {
    if (!peerJob.metadata?.annotations?.[CLAIMED_BY_ANNOTATION]) continue;
    const uid = peerJob.metadata.uid ?? '';
    claimed.add(uid);
    const mirror = byUID.get(uid);
    if (mirror) {
      if (terminal(mirror) && terminal(peerJob)) out.push({ kind: 'deleteMirror', mirror, message: `peer Job ${name(peerJob)} has its final status` });
      else out.push({ kind: 'writeBack', peerJob, mirror });
      continue;
    }
    if (terminal(peerJob)) continue;
    const node = nodeOf(peerJob);
    // A startTime on the peer means a mirror of ours ran it: starting another
    // would run it twice, so the peer hears it failed and decides.
    if (peerJob.status?.startTime) {
      out.push({ kind: 'reportLost', peerJob, message: `the mirror of peer Job ${name(peerJob)} on node ${node} is gone before it finished` });
    } else if (!recorded(node, peerJob)) {
      // Anyone who may write the peer's Jobs can write our claim on one: only
      // a claim we recorded before writing it is ours to run.
      out.push({ kind: 'forged', peerJob, message: `peer Job ${name(peerJob)} carries a claim by us on node ${node} that we never recorded; it is not run` });
    } else if (mayStart(node, peerJob)) {
      out.push({ kind: 'start', peerJob, node });
    } else {
      out.push({ kind: 'release', peerJob, message: `node ${node} may no longer run peer Job ${name(peerJob)}; giving it back to the queue` });
    }
  }
  for (const mirror of mirrors) {
    const uid = mirror.metadata?.labels?.[PEER_JOB_UID_LABEL] ?? '';
    if (claimed.has(uid)) continue;
    if (terminal(mirror)) out.push({ kind: 'deleteMirror', mirror, message: `mirror ${name(mirror)} finished and its peer Job is gone or no longer ours` });
    else out.push({ kind: 'orphan', mirror, message: `mirror ${name(mirror)} runs, but its peer Job is gone or no longer ours; it is left to finish` });
  }
  return out;
}
