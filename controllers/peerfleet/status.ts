// The status a PeerFleet reconcile writes: the verdict on its peer and, after
// a lending pass, the hosts, plan, ledger and accounting. Parts that did not
// change keep the objects already stored, so a quiet fleet's write is a no-op.
import type { PeerFleet, PeerFleetStatus } from '../../src/api/index.js';
import { deepEqual, mergePatch } from '../../src/kube/mergepatch.js';
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
  return pass ? { ...status, ...lendingStatus(fleet, pass) } : status;
}

type LendingPart = Pick<PeerFleetStatus, 'hosts' | 'summary' | 'plan' | 'ledger' | 'accounting'>;

/** The part of the status a lending pass writes. */
function lendingStatus(fleet: PeerFleet, pass: FleetPass): LendingPart {
  const part: LendingPart = { hosts: pass.hosts, summary: pass.summary, ledger: pass.ledger ?? fleet.status?.ledger, plan: pass.plan };
  const acc = pass.accounting ?? fleet.status?.accounting;
  // Only a change of the numbers is written: a quiet fleet costs no writes.
  if (acc) part.accounting = sameAccounting(acc, fleet.status?.accounting) ? fleet.status!.accounting! : acc;
  // By node: this runs for every pass, at a thousand nodes too.
  const before = new Map((fleet.status?.hosts ?? []).map((p) => [p.node, p.lent]));
  for (const h of part.hosts!) {
    const had = before.get(h.node);
    if (h.lent && had && sameAccounting(h.lent, had)) h.lent = had;
  }
  return part;
}

function sameAccounting(a: PeerFleetStatus['accounting'], b: PeerFleetStatus['accounting']): boolean {
  if (!a || !b) return false;
  const strip = ({ lastComputedAt: _, ...rest }: NonNullable<PeerFleetStatus['accounting']>) => rest;
  // Structural, key order aside: this runs for every host at every pass.
  return deepEqual(strip(a), strip(b));
}

/**
 * What a pass would change in the lending part of the status (hosts,
 * summary, plan, ledger, accounting): `none`, `change`, or `drain` when a
 * node begins to drain (the one change reported without waiting for a batch).
 */
export function lendingChange(fleet: PeerFleet, pass: FleetPass): 'none' | 'change' | 'drain' {
  const before = new Map((fleet.status?.hosts ?? []).map((h) => [h.node, h.state]));
  if (pass.hosts.some((h) => h.state === 'Draining' && before.get(h.node) !== 'Draining')) return 'drain';
  const was = fleet.status ?? {};
  return mergePatch({ hosts: was.hosts, summary: was.summary, plan: was.plan, ledger: was.ledger, accounting: was.accounting }, lendingStatus(fleet, pass)) === undefined ? 'none' : 'change';
}

/**
 * A PeerFleet writes the lending part of its status (the intent of new
 * claims, the ledger before mirrors go, the hosts) at most this often: a
 * pass that would change it sooner waits for the end of the batch, with its
 * effects, and goes out with what changed meanwhile, as the Job controller
 * batches its syncs. A pass that changes nothing there runs at once, and so
 * does one that starts a drain or a session.
 */
export const STATUS_BATCH_MS = 1_000;

/**
 * The part of a held pass that the written status already covers: claims
 * of Jobs their node set aside (recorded in its session), and write-backs,
 * which need no intent. Undefined when there is none. The rest of the pass
 * (new intents, ledger entries before deletions, session changes) waits for
 * the batch, and is decided again then.
 */
export function covered(fleet: PeerFleet, pass: FleetPass): FleetPass | undefined {
  const recorded = new Map((fleet.status?.hosts ?? []).map((h) => [h.node, new Set(h.session?.claims ?? [])]));
  const effects = pass.effects.filter((e) =>
    (e.kind === 'claim' && recorded.get(e.node)?.has(e.job.metadata?.uid ?? '')) || (e.kind === 'writeBack' && !e.lost));
  if (effects.length === 0) return undefined;
  return { ...pass, effects, notes: [], drains: [], sessionsStarted: 0, again: false };
}
