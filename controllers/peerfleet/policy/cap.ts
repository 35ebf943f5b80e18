// How many PeerFleets one namespace may have served at once. Each served
// PeerFleet holds a watch of its peer and what that watch caches (up to the
// peer budget), so a team that may write PeerFleets could otherwise multiply
// that memory by writing more of them. The oldest are served first: a new
// PeerFleet never takes the place of one that already lends.
import type { PeerFleet } from '../../../src/api/index.js';

export interface FleetCap {
  /** PeerFleets served per namespace; 0: no cap. */
  max: number;
}

const created = (f: PeerFleet) => Date.parse(String(f.metadata?.creationTimestamp ?? '')) || 0;
const order = (a: PeerFleet, b: PeerFleet) => created(a) - created(b) || (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? '');

/** Why `fleet` is past the cap among the PeerFleets of its namespace; undefined when it is served. */
export function capRefusal(fleet: PeerFleet, all: readonly PeerFleet[], cap: FleetCap): string | undefined {
  if (cap.max <= 0) return undefined;
  const namespace = fleet.metadata?.namespace ?? '';
  const mates = all.filter((f) => (f.metadata?.namespace ?? '') === namespace).sort(order);
  const rank = mates.findIndex((f) => f.metadata?.name === fleet.metadata?.name);
  if (rank < cap.max) return undefined;
  const served = mates.slice(0, cap.max).map((f) => f.metadata?.name ?? '');
  return `namespace ${namespace} has ${mates.length} PeerFleets and at most ${cap.max} are served in one namespace (${served.join(', ')} are, being the oldest); this one is not: no Secret is read and its peer is not watched; delete a PeerFleet of this namespace that is no longer needed, or ask an admin to raise the cap (chart value peerFleet.maxPerNamespace, controller flag --max-peerfleets-per-namespace)`;
}
