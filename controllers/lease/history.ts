// Ended Leases stay listed as objects, the most recent 32 per namespace, for
// at most 7 days. A pure choice of which ended Leases to delete, and the
// pass that deletes them.
import { ENDED_PHASES, type Lease } from '../../src/api/index.js';
import { endedAt } from './status.js';

export interface Ended {
  name: string;
  uid: string;
  namespace: string;
  endedAt: number;
}

export function leasesToPrune(ended: readonly Ended[], now: number, keep = 32, maxAgeMs = 7 * 24 * 3600_000): Ended[] {
  const byNamespace = new Map<string, Ended[]>();
  for (const e of ended) byNamespace.set(e.namespace, [...(byNamespace.get(e.namespace) ?? []), e]);
  const prune: Ended[] = [];
  for (const list of byNamespace.values()) {
    list.sort((a, b) => b.endedAt - a.endedAt || a.name.localeCompare(b.name));
    list.forEach((e, i) => {
      if (i >= keep || now - e.endedAt > maxAgeMs) prune.push(e);
    });
  }
  return prune;
}

/**
 * Deletes the ended Leases of `lease`'s namespace that are past the limits
 * (every one, not only this one: an older ended Lease may not be reconciled
 * again until its own max age), and says when to look at `lease` again.
 */
export async function pruneHistory(
  lease: Lease,
  all: readonly Lease[],
  now: number,
  keep: number,
  maxAgeMs: number,
  remove: (namespace: string, name: string, uid: string) => Promise<void>,
): Promise<{ requeueAfter: number } | undefined> {
  const ns = lease.metadata!.namespace!;
  const ended = all
    .filter((l) => l.metadata?.namespace === ns && ENDED_PHASES.includes(l.status?.phase ?? 'Pending'))
    .map((l) => ({ name: l.metadata!.name!, uid: l.metadata!.uid ?? '', namespace: ns, endedAt: endedAt(l) }));
  const prune = leasesToPrune(ended, now, keep, maxAgeMs);
  for (const p of prune) await remove(ns, p.name, p.uid);
  if (prune.some((p) => p.name === lease.metadata!.name)) return undefined;
  // Capped: a timer past 2^31 ms would fire at once.
  return { requeueAfter: Math.min(3600_000, Math.max(1000, endedAt(lease) + maxAgeMs - now)) };
}
