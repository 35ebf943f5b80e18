// What one lending pass takes in (the world as the informers hold it) and
// gives back (the status to write and the effects to run after it), apart
// from the pass itself (lending.ts) so that the reconciler and the effects
// can name them without the pass's workings.
import type { V1Job, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Accounting, PeerFleet, PeerLedger } from '../../../src/api/index.js';
import type { StatusWrite } from '../../../src/providers/peerqueue/types.js';
import type { DrainReason } from './drain.js';
import type { PeerHost, PlanStep } from './plan.js';
import type { Verdict } from './verdict.js';

export interface FleetWorld {
  fleet: PeerFleet;
  /** This installation's id: the first part of every claim. */
  clusterID: string;
  /** Our nodes that lendableNodes selects. */
  nodes: readonly V1Node[];
  /** Every pod of our cluster (idleness and free room need all of them). */
  pods: readonly V1Pod[];
  /** Every mirror Job of every PeerFleet this controller runs. */
  mirrors: readonly V1Job[];
  /** `namespace/name` of every PeerFleet this controller watches, deleted ones included: only their mirrors' pods are lent work. */
  peerFleets: ReadonlySet<string>;
  /** The nodes' holder Leases, by node. */
  holders: ReadonlyMap<string, V1Lease>;
  /**
   * The nodes above that another PeerFleet's selector also picks. Only there
   * does a holder Lease exclude anyone, so only there is it given up when a
   * session ends; elsewhere it is kept, and the next session writes none.
   */
  shared: ReadonlySet<string>;
  /**
   * Nodes lendableNodes would select that an admin opted in for lending but
   * not for this PeerFleet's namespace, by name, with why: reported as
   * Unlisted hosts, never lent.
   */
  notOptedIn?: ReadonlyMap<string, string>;
  /** The peer's lendable Jobs as the watch holds them; undefined until its first list. */
  peerJobs: readonly V1Job[] | undefined;
  verdict: Pick<Verdict, 'ready' | 'code'>;
  now: number;
}

export type LendEffect =
  /** Hold the node, claim the peer Job with its resourceVersion, start its mirror (or refuse the Job). */
  | { kind: 'claim'; node: string; job: V1Job }
  /** The Job is claimed and has no mirror yet (a restart between the two): start it. */
  | { kind: 'start'; node: string; job: V1Job }
  | { kind: 'release'; job: V1Job; message: string }
  | { kind: 'writeBack'; job: V1Job; write: StatusWrite; lost?: boolean }
  | { kind: 'deleteMirror'; mirror: V1Job }
  /** Give the node's holder Lease up: no session there, and another PeerFleet may want the node (or this one is deleted). */
  | { kind: 'freeNode'; node: string };

export interface HostNote {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /** A standing condition, seen again every pass: recorded when it first appears, not at every pass. */
  standing?: boolean;
  /** The node a Claimed note is about. */
  node?: string;
}

export interface FleetPass {
  hosts: PeerHost[];
  summary: string;
  plan?: PlanStep[];
  accounting?: Accounting;
  /** Our ledger with the mirrors that completed since the last pass. */
  ledger?: PeerLedger;
  effects: LendEffect[];
  notes: HostNote[];
  drains: DrainReason[];
  sessionsStarted: number;
  /** Mirrors of this PeerFleet that have not finished, and claims that wait for one. */
  unfinished: number;
  /** A node became Available with a Job that fits: run the next pass at once. */
  again?: boolean;
  /** When a node's idle window or session ends next: the pass to run then. */
  wakeAt?: number;
  /** Peer Jobs claimed in our name that our record never named: reported, never run. */
  forged: number;
}
