// What a pass reports beside its effects: a dry run's step per node, and the
// one-line summary of the hosts by state.
import { GPU, jobRequests, type chooseJob } from './fit.js';
import type { drainDecision } from './drain.js';
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

export function summarize(hosts: readonly PeerHost[]): string {
  const counts = new Map<string, number>();
  for (const h of hosts) counts.set(h.state, (counts.get(h.state) ?? 0) + 1);
  const order = ['Lending', 'Draining', 'Available', 'Waiting', 'Busy', 'Unlisted'];
  return order.filter((s) => counts.has(s)).map((s) => `${counts.get(s)} ${s}`).join(', ') || 'no lendable nodes';
}
