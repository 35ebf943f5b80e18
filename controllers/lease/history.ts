// Ended Leases stay listed as objects, the most recent 32 per namespace, for
// at most 7 days. A pure choice of which ended Leases to delete, and the
// pass that deletes them.
import { ENDED_PHASES, type Lease } from '../../src/api/index.js';
import type { CacheIndex } from '../../src/kube/cache.js';
import { stampedBy } from './policy/ownership.js';
import { endedAt } from './status.js';

export interface Ended {
  name: string;
  uid: string;
  namespace: string;
  endedAt: number;
}

/** Whether an update is the one that ended the Lease (not a later one, nor a resync of an ended Lease). */
export function endedNow(lease: Lease, old: Lease): boolean {
  return ENDED_PHASES.includes(lease.status?.phase ?? 'Pending') && !ENDED_PHASES.includes(old.status?.phase ?? 'Pending');
}

export function leasesToPrune(ended: readonly Ended[], now: number, keep = 32, maxAgeMs = 7 * 24 * 3600_000): Ended[] {
  const byNamespace = new Map<string, Ended[]>();
  for (const e of ended) {
    const list = byNamespace.get(e.namespace);
    if (list) list.push(e);
    else byNamespace.set(e.namespace, [e]);
  }
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
 * This installation's ended Leases, by namespace, kept from the cache's
 * changes: history pruning at each Lease's end reads its namespace's
 * entries, never the whole cache.
 */
export class EndedLeases implements CacheIndex<Lease> {
  private readonly byNamespace = new Map<string, Map<string, Ended>>();

  constructor(private readonly installationID: string) {}

  observe(lease: Lease): void {
    if (!stampedBy(lease, this.installationID) || !ENDED_PHASES.includes(lease.status?.phase ?? 'Pending')) return this.gone(lease);
    const namespace = lease.metadata?.namespace ?? '';
    const uid = lease.metadata?.uid ?? '';
    let here = this.byNamespace.get(namespace);
    if (!here) this.byNamespace.set(namespace, (here = new Map()));
    here.set(uid, { name: lease.metadata?.name ?? '', uid, namespace, endedAt: endedAt(lease) });
  }

  gone(lease: Lease): void {
    const namespace = lease.metadata?.namespace ?? '';
    const here = this.byNamespace.get(namespace);
    if (!here?.delete(lease.metadata?.uid ?? '')) return;
    if (here.size === 0) this.byNamespace.delete(namespace);
  }

  in(namespace: string): Ended[] {
    return [...(this.byNamespace.get(namespace)?.values() ?? [])];
  }
}

/**
 * Deletes the ended Leases of `lease`'s namespace that are past the limits
 * (every one, not only this one: an older ended Lease may not be reconciled
 * again until its own max age), and says when to look at `lease` again.
 * `ended` is the namespace's ended Leases, `lease` among them.
 */
export async function pruneHistory(
  lease: Lease,
  ended: readonly Ended[],
  now: number,
  keep: number,
  maxAgeMs: number,
  remove: (namespace: string, name: string, uid: string) => Promise<void>,
): Promise<{ requeueAfter: number } | undefined> {
  const ns = lease.metadata!.namespace!;
  const prune = leasesToPrune(ended, now, keep, maxAgeMs);
  for (const p of prune) await remove(ns, p.name, p.uid);
  if (prune.some((p) => p.name === lease.metadata!.name)) return undefined;
  // Capped: a timer past 2^31 ms would fire at once.
  return { requeueAfter: Math.min(3600_000, Math.max(1000, endedAt(lease) + maxAgeMs - now)) };
}
