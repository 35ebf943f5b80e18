// A node lends to one PeerFleet at a time. A coordination.k8s.io/v1 Lease
// per node names the PeerFleet that holds it (`<namespace>/<name>`); the
// holder renews it every poll while it lends and clears it when its session
// ends. Expiry alone never hands a node over while another PeerFleet's
// mirror still runs there: after a controller outage every Lease has
// expired, and the mirrors, found by label, are the truth.
import { createHash } from 'node:crypto';
import type { V1Lease } from '@kubernetes/client-node';

const PREFIX = 'leasehold-peer-';

/** On every holder Lease, so that the controller watches those and not its leader-election Lease. */
export const HOLDER_LABEL = 'leasehold.dev/peer-holder';

/** The name of the node's coordination Lease; a node name too long to prefix is hashed instead. */
export function holderLeaseName(node: string): string {
  const name = `${PREFIX}${node}`;
  return name.length <= 253 ? name : `${PREFIX}${createHash('sha256').update(node).digest('hex').slice(0, 32)}`;
}

export type Holding =
  | { kind: 'mine' }
  /** No one holds the node: take the Lease (with its resourceVersion, so one PeerFleet wins). */
  | { kind: 'free' }
  | { kind: 'held'; by: string; message: string };

export interface HoldingInput {
  lease: V1Lease | undefined;
  /** This PeerFleet, `<namespace>/<name>`. */
  me: string;
  node: string;
  /** PeerFleets (`<namespace>/<name>`) with an unfinished mirror on the node. */
  lendingTo: readonly string[];
  now: number;
}

export function holding({ lease, me, node, lendingTo, now }: HoldingInput): Holding {
  const held = (by: string): Holding => ({ kind: 'held', by, message: `node ${node} lends to PeerFleet ${by}; this PeerFleet waits until that session ends` });
  const other = lendingTo.find((f) => f !== me);
  if (other) return held(other);
  const holder = lease?.spec?.holderIdentity ?? '';
  if (holder === me) return { kind: 'mine' };
  if (!holder) return { kind: 'free' };
  const renewed = new Date(lease?.spec?.renewTime ?? lease?.spec?.acquireTime ?? 0).getTime();
  const expires = renewed + (lease?.spec?.leaseDurationSeconds ?? 0) * 1000;
  return now < expires ? held(holder) : { kind: 'free' };
}
