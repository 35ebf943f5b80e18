// Ended Leases stay listed as objects, the most recent 32 per namespace, for
// at most 7 days. A pure choice of which ended Leases to delete.

export interface Ended {
  name: string;
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
