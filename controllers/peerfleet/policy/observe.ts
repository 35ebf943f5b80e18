// One node's observation turned into the one event its machine gets. The
// order is the safety order: a node with a mirror running only drains or
// claims more (Draining stays Draining until its mirrors finish; a peer that
// is not Ready gets no new claim, and its running mirrors go on); a node
// without one is Unlisted, Busy, Waiting or Available, and only an
// Available node starts a session, after its whole idle window, from a Ready
// peer, holding the node's Lease, and never in a dry run. A Lending node
// whose last mirror just finished claims the next Job at once: the idle
// window guards the start of lending, when our own work may still come
// back, not the step from one peer Job to the next; our work, a drain, a
// peer that is not Ready or an empty queue still end the session.
import type { DrainDecision } from './drain.js';
import type { Choice } from './fit.js';
import type { Holding } from './holder.js';
import type { IdleClock, Occupancy } from './idle.js';
import type { HostEvent, PeerHostState } from '../machine.js';
import type { Verdict } from './verdict.js';

export interface HostObservation {
  state: PeerHostState;
  node: string;
  /** Mirrors of this PeerFleet on the node that have not finished. */
  mirrorsRunning: number;
  occupancy: Occupancy;
  clock: IdleClock;
  drain: DrainDecision;
  verdict: Pick<Verdict, 'ready' | 'code'>;
  holding: Holding;
  /** The Job this node would claim next, from the peer queue. */
  choice: Choice;
  dryRun: boolean;
}

const UNLISTING = new Set(['Deleted', 'Unlisted', 'NodeUnlisted']);

/** The event for the node's machine, or undefined when nothing changes. */
export function hostEvent(o: HostObservation): HostEvent | undefined {
  if (o.mirrorsRunning > 0) return sessionEvent(o);
  const { drain, node } = o;
  if (drain.drain && UNLISTING.has(drain.reason)) return { type: 'UNLISTED', reason: drain.reason as 'Deleted' | 'Unlisted' | 'NodeUnlisted', message: drain.message };
  if (o.occupancy.kind !== 'idle') return { type: 'BUSY', message: o.occupancy.message };
  if (drain.drain) return { type: 'IDLE', message: `node ${node} is idle but lends nothing: ${drain.message}` };
  if (o.state === 'Lending' && o.verdict.ready && !o.dryRun && o.holding.kind !== 'held' && o.choice.kind === 'claim') {
    return { type: 'CLAIM', job: o.choice.job.metadata?.name ?? '', message: `node ${node} claims peer Job ${o.choice.job.metadata?.name ?? ''}, the next in its session` };
  }
  if (!o.clock.elapsed) {
    const from = o.clock.windowEndsAt === undefined ? '' : `; it may lend from ${new Date(o.clock.windowEndsAt).toISOString()}`;
    return { type: 'IDLE', message: `node ${node} is idle since ${o.clock.idleSince}${from}` };
  }
  if (!o.verdict.ready) return { type: 'IDLE', message: `node ${node} is idle, but the PeerFleet is not Ready (${o.verdict.code}); see its Ready condition` };
  if (o.holding.kind === 'held') return { type: 'IDLE', message: o.holding.message };
  if (o.choice.kind === 'none') return { type: 'AVAILABLE', message: `node ${node} may lend: ${o.choice.message}` };
  const job = o.choice.job.metadata?.name ?? '';
  if (o.dryRun) return { type: 'AVAILABLE', message: `dry run: node ${node} would claim peer Job ${job}` };
  // The machine claims only from Available: a node just out of its window
  // becomes Available first, and the next pass (at once) claims.
  if (o.state !== 'Available') return { type: 'AVAILABLE', message: `node ${node} may lend: peer Job ${job} fits` };
  return { type: 'CLAIM', job, message: `node ${node} claims peer Job ${job}` };
}

function sessionEvent(o: HostObservation): HostEvent | undefined {
  if (o.state === 'Draining') return o.drain.drain ? { type: 'DRAIN', reason: o.drain.reason, message: o.drain.message } : undefined;
  if (o.drain.drain) return { type: 'DRAIN', reason: o.drain.reason, message: o.drain.message };
  if (!o.verdict.ready || o.dryRun || o.holding.kind === 'held' || o.choice.kind === 'none') return undefined;
  const job = o.choice.job.metadata?.name ?? '';
  return { type: 'CLAIM', job, message: `node ${o.node} claims peer Job ${job} beside the ${o.mirrorsRunning} it runs` };
}
