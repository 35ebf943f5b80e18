// The status a PeerFleet reconcile writes: the verdict on its peer and, after
// a lending pass, the hosts, plan, ledger and accounting. Parts that did not
// change keep the objects already stored, so a quiet fleet's write is a no-op.
import type { PeerFleet, PeerFleetStatus } from '../../src/api/index.js';
import { canonical } from '../../src/kube/canonical.js';
import { rfc3339, setCondition } from '../../src/kube/conditions.js';
import type { FleetPass } from './policy/lending.js';
import { readyCondition, type Verdict } from './policy/verdict.js';

export function fleetStatus(fleet: PeerFleet, verdict: Verdict, pass: FleetPass | undefined, now: Date): PeerFleetStatus {
  const generation = fleet.metadata?.generation;
  const before = fleet.status?.verdict;
  const status: PeerFleetStatus = {
    ...fleet.status,
    observedGeneration: generation,
    verdict: {
      ready: verdict.ready,
      code: verdict.code,
      reasons: verdict.reasons,
      ...(verdict.failureClass ? { failureClass: verdict.failureClass } : {}),
      ...(before?.code === verdict.code && before.checkedAt ? { checkedAt: before.checkedAt } : { checkedAt: rfc3339(now) }),
    },
    conditions: setCondition(fleet.status?.conditions, readyCondition(verdict), generation, now),
  };
  if (pass) {
    status.hosts = pass.hosts;
    status.summary = pass.summary;
    if (pass.ledger) status.ledger = pass.ledger;
    if (pass.plan) status.plan = pass.plan;
    else delete status.plan;
    const acc = pass.accounting;
    // Only a change of the numbers is written: a quiet fleet costs no writes.
    if (acc) status.accounting = sameAccounting(acc, fleet.status?.accounting) ? fleet.status!.accounting! : acc;
    for (const h of status.hosts) {
      const had = fleet.status?.hosts?.find((p) => p.node === h.node)?.lent;
      if (h.lent && had && sameAccounting(h.lent, had)) h.lent = had;
    }
  }
  return status;
}

function sameAccounting(a: PeerFleetStatus['accounting'], b: PeerFleetStatus['accounting']): boolean {
  if (!a || !b) return false;
  const strip = ({ lastComputedAt: _, ...rest }: NonNullable<PeerFleetStatus['accounting']>) => rest;
  return canonical(strip(a)) === canonical(strip(b));
}
