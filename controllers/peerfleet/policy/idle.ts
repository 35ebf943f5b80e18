// Whether a lendable node is idle: none of our pods bound to it, and none of
// our pending pods that its placement rules would let onto it. DaemonSet
// pods and the mirror pods of lent Jobs are not our work: they run on every
// node, or they are the lending itself. Static pods (seen through their
// mirror pods) are: they are what a control-plane or system node is for, and
// a node running them must not look idle.
import type { V1Job, V1Node, V1Pod } from '@kubernetes/client-node';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { NODE_LABEL, PEER_JOB_UID_LABEL, PEERFLEET_LABEL } from '../labels.js';
import { mirrorName } from './mirror.js';
import { placementRefusal } from './placement.js';

const terminal = (pod: V1Pod) => pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
const key = (pod: V1Pod) => `${pod.metadata?.namespace}/${pod.metadata?.name}`;

/** A mirror Job the pass takes as lending: the node it is pinned to and the peer Job it mirrors. */
export interface LentMirror {
  node: string;
  peerJobUID: string;
}

/** The mirror Jobs whose pods are lent work, by `namespace/name/uid`. */
export type LentJobs = ReadonlyMap<string, LentMirror>;

/**
 * The mirror Jobs a pass may take as lending. Every team can put our labels
 * on its own Jobs and pods, and work that passes for lending makes its node
 * look idle, gets it lent and loses the drain's protection. So a Job counts
 * only where the controller lends: in a namespace that holds the PeerFleet
 * its label names (`peerFleets`: `namespace/name` of every PeerFleet), and
 * named from its peer Job uid as the controller names mirrors.
 */
export function lentJobs(mirrors: readonly V1Job[], peerFleets: ReadonlySet<string>): LentJobs {
  const lent = new Map<string, LentMirror>();
  for (const m of mirrors) {
    const { namespace, name, uid, labels } = m.metadata ?? {};
    const fleet = labels?.[PEERFLEET_LABEL];
    const peerJobUID = labels?.[PEER_JOB_UID_LABEL] ?? '';
    if (!namespace || !name || !uid || !fleet || !peerFleets.has(`${namespace}/${fleet}`)) continue;
    if (!peerJobUID || name !== mirrorName(peerJobUID)) continue;
    lent.set(`${namespace}/${name}/${uid}`, { node: labels?.[NODE_LABEL] ?? '', peerJobUID });
  }
  return lent;
}

/**
 * The lent mirror Job a pod belongs to: its controlling owner is one of
 * `lent` (same namespace, name and uid; a pod's labels prove nothing), and
 * it is not bound to another node than the one its mirror is pinned to.
 */
export function lentMirrorOf(pod: V1Pod, lent: LentJobs): LentMirror | undefined {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller);
  if (!owner || owner.kind !== 'Job' || owner.apiVersion !== 'batch/v1') return undefined;
  const mirror = lent.get(`${pod.metadata?.namespace}/${owner.name}/${owner.uid}`);
  if (!mirror || (pod.spec?.nodeName && pod.spec.nodeName !== mirror.node)) return undefined;
  return mirror;
}

/** Pods that are our own work and not finished. */
export function isOurWork(pod: V1Pod, lent: LentJobs): boolean {
  if (terminal(pod)) return false;
  if (pod.metadata?.ownerReferences?.some((o) => o.kind === 'DaemonSet' && o.controller)) return false;
  return lentMirrorOf(pod, lent) === undefined;
}

export type Occupancy =
  | { kind: 'idle' }
  /** Our pods are bound to the node (a terminating one still holds it). */
  | { kind: 'busy'; pods: V1Pod[]; message: string }
  /** Our pods wait to be scheduled and the node would admit them. */
  | { kind: 'wanted'; pods: V1Pod[]; message: string };

export function occupancy(node: V1Node, pods: readonly V1Pod[], lent: LentJobs): Occupancy {
  const name = node.metadata?.name ?? '';
  const ours = pods.filter((p) => isOurWork(p, lent));
  const bound = ours.filter((p) => p.spec?.nodeName === name);
  if (bound.length > 0) return { kind: 'busy', pods: bound, message: `our pod ${key(bound[0]!)}${more(bound)} runs on node ${name}` };
  const wanting = ours.filter((p) => !p.spec?.nodeName && placementRefusal(p.spec, node) === undefined);
  if (wanting.length > 0) return { kind: 'wanted', pods: wanting, message: `our pending pod ${key(wanting[0]!)}${more(wanting)} could run on node ${name}` };
  return { kind: 'idle' };
}

const more = (pods: readonly V1Pod[]) => (pods.length > 1 ? ` (and ${pods.length - 1} more)` : '');

export interface IdleClock {
  /** When the node became idle (RFC 3339), kept across passes; absent while it is not idle. */
  idleSince?: string;
  /** When the idle window ends, in ms since the epoch; absent while it is not idle. */
  windowEndsAt?: number;
  /** Whether the node has been idle for the whole window. */
  elapsed: boolean;
}

/**
 * The idle-window clock. It starts when a pass first sees the node idle and
 * restarts whenever our work comes back, so a node lends only after a whole
 * window without our work. An idleSince in the future (a clock that moved
 * back) restarts it at now rather than lending early or never.
 */
export function idleClock(idle: boolean, previousSince: string | undefined, now: number, windowMs: number): IdleClock {
  if (!idle) return { elapsed: false };
  const prev = Date.parse(previousSince ?? '');
  const idleSince = Number.isFinite(prev) && prev <= now ? previousSince! : rfc3339(new Date(now));
  // The window counts from the second status records, so every pass agrees on its end.
  const since = Date.parse(idleSince);
  return { idleSince, windowEndsAt: since + windowMs, elapsed: now >= since + windowMs };
}
