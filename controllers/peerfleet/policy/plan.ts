// What a pass reports beside its effects: a dry run's step per node, the
// one-line summary of the hosts by state, and which nodes it reports on.
import { GPU, jobRequests, type chooseJob } from './fit.js';
import type { drainDecision } from './drain.js';
import type { V1Node } from '@kubernetes/client-node';
import type { PeerFleet } from '../../../src/api/index.js';

export type PeerHost = NonNullable<NonNullable<PeerFleet['status']>['hosts']>[number];
export type PlanStep = NonNullable<NonNullable<PeerFleet['status']>['plan']>[number];

export function planStep(
  node: string,
  ready: boolean,
  occ: string,
  clock: { elapsed: boolean; windowEndsAt?: number },
  drain: ReturnType<typeof drainDecision>,
  held: string | undefined,
  choice: ReturnType<typeof chooseJob> | { kind: 'none'; message: string },
): PlanStep {
  if (drain.drain) return { node, action: 'Drain', message: drain.message };
  if (occ !== 'idle') return { node, action: 'None', message: `node ${node} has our work` };
  if (!clock.elapsed) return { node, action: 'Wait', message: `node ${node} is within its idle window until ${new Date(clock.windowEndsAt ?? 0).toISOString()}` };
  if (!ready) return { node, action: 'Wait', message: 'the PeerFleet is not Ready; see its Ready condition' };
  if (held) return { node, action: 'Wait', message: held };
  if (choice.kind === 'claim') {
    const job = choice.job.metadata?.name ?? '';
    const gpus = jobRequests(choice.job);
    const n = gpus.ok ? Number(gpus.requests[GPU] ?? 0n) / 1000 : 0;
    return { node, action: 'Claim', job, message: `would claim peer Job ${job} (${n} GPU)` };
  }
  return { node, action: 'None', message: choice.message };
}

/** The most nodes one PeerFleet lends: its status holds a host entry for each, and its schema allows no more. */
export const MAX_HOSTS = 1024;

/**
 * The nodes a pass lends, in name order, and how many selected ones it
 * leaves alone. A status past its schema's bound is refused whole, so a
 * PeerFleet selecting more nodes than its status can hold would stop
 * writing, and with it every effect. Nodes it already reports on come
 * first: their entries carry sessions a running peer Job depends on, so a
 * node added later never pushes one out.
 */
export function withinHostBound(nodes: readonly V1Node[], reported: ReadonlyMap<string, unknown>, max = MAX_HOSTS): { lent: V1Node[]; beyond: number } {
  const name = (n: V1Node) => n.metadata?.name ?? '';
  const sorted = [...nodes].sort((a, b) => name(a).localeCompare(name(b)));
  if (sorted.length <= max) return { lent: sorted, beyond: 0 };
  const first = sorted.filter((n) => reported.has(name(n))).slice(0, max);
  const rest = sorted.filter((n) => !reported.has(name(n))).slice(0, max - first.length);
  return { lent: [...first, ...rest].sort((a, b) => name(a).localeCompare(name(b))), beyond: sorted.length - first.length - rest.length };
}

export function summarize(hosts: readonly PeerHost[], beyond = 0): string {
  const counts = new Map<string, number>();
  for (const h of hosts) counts.set(h.state, (counts.get(h.state) ?? 0) + 1);
  const order = ['Lending', 'Draining', 'Available', 'Waiting', 'Busy', 'Unlisted'];
  const states = order.filter((s) => counts.has(s)).map((s) => `${counts.get(s)} ${s}`).join(', ') || 'no lendable nodes';
  if (beyond === 0) return states;
  return `${states}; ${beyond} more selected node(s) left alone: one PeerFleet lends at most ${MAX_HOSTS} (narrow spec.lendableNodes or split the nodes among PeerFleets)`;
}
