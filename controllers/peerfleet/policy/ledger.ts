// Our own ledger of the peer Jobs our nodes ran, from the mirror Jobs alone:
// the peer owns its Job records and may edit or delete them, so accounting
// checks those records against what our cluster saw run. Entries are keyed
// by the peer Job's UID, so a mirror seen complete in many passes (or again
// after a restart) is recorded once.
import type { V1Job } from '@kubernetes/client-node';
import type { Accounting, LedgerEntry, PeerLedger } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { amountUSD, measure, type account } from './accounting.js';
import { GPU, jobRequests } from './fit.js';
import { groupBy } from './group.js';
import type { PeerHost } from './plan.js';
import { NODE_LABEL, PEER_JOB_ANNOTATION, PEER_JOB_UID_LABEL } from '../labels.js';

/** Entries the ledger keeps; older ones are folded into per-node totals. */
export const LEDGER_KEPT = 256;
/** Per-node totals the ledger keeps; past them, the nodes with the fewest jobs are summed under OTHER_NODES. */
export const EARLIER_KEPT = 1024;
/** The node name of the totals of nodes folded together (no Node can be named so). */
export const OTHER_NODES = '*';
/** How many differing jobs accounting lists. */
export const MISMATCHED_LISTED = 32;
/** GPU-seconds a peer record may differ by per GPU: both sides write whole seconds. */
const SECOND = 1;

const complete = (job: V1Job) => job.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') ?? false;

export const entryGPUSeconds = (e: LedgerEntry) => e.gpus * ((Date.parse(e.completedAt) - Date.parse(e.startedAt)) / 1000);

/** The entry for a mirror our cluster ran to completion; undefined for one that has not, or cannot be measured. */
export function ledgerEntry(mirror: V1Job): LedgerEntry | undefined {
  const uid = mirror.metadata?.labels?.[PEER_JOB_UID_LABEL];
  if (!uid || !complete(mirror)) return undefined;
  const start = Date.parse(String(mirror.status?.startTime ?? ''));
  const end = Date.parse(String(mirror.status?.completionTime ?? ''));
  if (!Number.isFinite(start) || !Number.isFinite(end) || end < start) return undefined;
  const requests = jobRequests(mirror);
  if (!requests.ok) return undefined;
  return {
    uid,
    job: (mirror.metadata?.annotations?.[PEER_JOB_ANNOTATION] ?? '').split('/').pop() || uid,
    node: mirror.metadata?.labels?.[NODE_LABEL] ?? '',
    gpus: Number(requests.requests[GPU] ?? 0n) / 1000,
    startedAt: rfc3339(new Date(start)),
    completedAt: rfc3339(new Date(end)),
  };
}

/**
 * The ledger with every completed mirror not yet in it; the same object
 * when nothing is new. An entry whose mirror still exists is never folded
 * away, or the next pass would record it again; so where more mirrors
 * completed than the bound holds, the newest wait (their mirrors are kept,
 * see `unrecorded`) until deleted ones make room: the status must stay
 * within the bound its schema sets, or no write of it would pass.
 */
export function recordLedger(ledger: PeerLedger | undefined, mirrors: readonly V1Job[], kept = LEDGER_KEPT): PeerLedger | undefined {
  const have = new Set((ledger?.entries ?? []).map((e) => e.uid));
  const fresh = mirrors.map(ledgerEntry).filter((e): e is LedgerEntry => !!e && !have.has(e.uid) && !!have.add(e.uid));
  if (fresh.length === 0) return ledger;
  const byEnd = (a: LedgerEntry, b: LedgerEntry) => Date.parse(a.completedAt) - Date.parse(b.completedAt) || a.uid.localeCompare(b.uid);
  const live = new Set(mirrors.map((m) => m.metadata?.labels?.[PEER_JOB_UID_LABEL]));
  const folding = (ledger?.entries ?? []).filter((e) => !live.has(e.uid)).length;
  const room = Math.max(0, kept - ((ledger?.entries.length ?? 0) - folding));
  const taken = fresh.sort(byEnd).slice(0, room);
  if (taken.length === 0) return ledger;
  const entries = [...(ledger?.entries ?? []), ...taken].sort(byEnd);
  const earlier = new Map((ledger?.earlier ?? []).map((t) => [t.node, { ...t }]));
  const keep: LedgerEntry[] = [];
  let excess = entries.length - kept;
  for (const e of entries) {
    if (excess > 0 && !live.has(e.uid)) {
      const t = earlier.get(e.node) ?? { node: e.node, gpuSeconds: 0, jobs: 0 };
      earlier.set(e.node, { node: e.node, gpuSeconds: t.gpuSeconds + entryGPUSeconds(e), jobs: t.jobs + 1 });
      excess--;
    } else keep.push(e);
  }
  return { entries: keep, ...(earlier.size > 0 ? { earlier: withinEarlierBound([...earlier.values()]) } : {}) };
}

type NodeTotal = NonNullable<PeerLedger['earlier']>[number];

/**
 * The per-node totals, at most EARLIER_KEPT of them: nodes come and go
 * under new names (an autoscaled pool), and a list that grew past its
 * schema's bound would have every status write refused. The nodes with
 * the fewest jobs are summed together, so the fleet's total never changes.
 */
export function withinEarlierBound(totals: NodeTotal[], kept = EARLIER_KEPT): NodeTotal[] {
  const byName = (a: NodeTotal, b: NodeTotal) => a.node.localeCompare(b.node);
  if (totals.length <= kept) return totals.sort(byName);
  const other = totals.find((t) => t.node === OTHER_NODES) ?? { node: OTHER_NODES, gpuSeconds: 0, jobs: 0 };
  const named = totals.filter((t) => t.node !== OTHER_NODES).sort((a, b) => a.jobs - b.jobs || byName(a, b));
  const folded = named.slice(0, named.length - (kept - 1));
  const sum = folded.reduce((a, t) => ({ node: OTHER_NODES, gpuSeconds: a.gpuSeconds + t.gpuSeconds, jobs: a.jobs + t.jobs }), other);
  return [...named.slice(folded.length), sum].sort(byName);
}

/** Completed mirrors whose entry the ledger does not hold yet (past its bound): they are not deleted until it does. */
export function unrecorded(ledger: PeerLedger | undefined, mirrors: readonly V1Job[]): Set<string> {
  const have = new Set((ledger?.entries ?? []).map((e) => e.uid));
  return new Set(mirrors.map(ledgerEntry).flatMap((e) => (e && !have.has(e.uid) ? [e.uid] : [])));
}

export interface Mismatch {
  job: string;
  uid: string;
  node: string;
  ledgerGPUSeconds: number;
  peerGPUSeconds?: number;
  reason: string;
}

/**
 * The ledger's entries whose peer record is gone, cannot be measured, or
 * measures other than our mirror ran. A peer record not finished yet is
 * given graceMs after our mirror completed, for the write-back to reach it.
 */
export function ledgerMismatches(entries: readonly LedgerEntry[], peerJobs: readonly V1Job[], now: number, graceMs: number): Mismatch[] {
  const byUID = new Map(peerJobs.map((j) => [j.metadata?.uid ?? '', j]));
  const out: Mismatch[] = [];
  for (const e of entries) {
    const ledgerGPUSeconds = entryGPUSeconds(e);
    const base = { job: e.job, uid: e.uid, node: e.node, ledgerGPUSeconds };
    const peer = byUID.get(e.uid);
    if (!peer) {
      out.push({ ...base, reason: 'the peer Job is gone from the peer namespace' });
      continue;
    }
    const m = measure(peer);
    if (m.kind === 'unfinished') {
      if (now - Date.parse(e.completedAt) > graceMs) out.push({ ...base, reason: 'the peer Job is not Complete, though our mirror completed' });
    } else if (m.kind === 'unmeasured') {
      out.push({ ...base, reason: `the peer record cannot be measured: ${m.reason}` });
    } else if (Math.abs(m.gpuSeconds - ledgerGPUSeconds) > SECOND * Math.max(1, e.gpus)) {
      const s = peer.status ?? {};
      out.push({
        ...base,
        peerGPUSeconds: m.gpuSeconds,
        reason: `the peer record says ${m.gpus} GPU from ${rfc3339(new Date(String(s.startTime)))} to ${rfc3339(new Date(String(s.completionTime)))}; our mirror ran ${e.gpus} GPU from ${e.startedAt} to ${e.completedAt}`,
      });
    }
  }
  return out;
}

/** The peer-record accounting with our ledger's totals and the differences beside it. */
export function withLedger(acc: Accounting, entries: readonly LedgerEntry[], earlier: { gpuSeconds: number; jobs: number } | undefined, mismatches: readonly Mismatch[], pricePerGPUHour: number, listed = MISMATCHED_LISTED): Accounting {
  const gpuSeconds = entries.reduce((sum, e) => sum + entryGPUSeconds(e), earlier?.gpuSeconds ?? 0);
  const { mismatched: _m, mismatchedJobs: _l, ...rest } = acc;
  return {
    ...rest,
    ledger: { gpuSeconds, amountUSD: amountUSD(gpuSeconds, pricePerGPUHour), jobs: entries.length + (earlier?.jobs ?? 0) },
    ...(mismatches.length > 0 ? { mismatched: mismatches.length } : {}),
    ...(mismatches.length > 0 && listed > 0 ? { mismatchedJobs: mismatches.slice(0, listed).map((m) => ({ ...m, reason: m.reason.slice(0, 256) })) } : {}),
  };
}

/** The Warning a difference raises, once while it stands. */
export function mismatchMessage(m: Mismatch, e: LedgerEntry): string {
  return `peer Job ${m.job} (uid ${m.uid}) ran on node ${m.node} from ${e.startedAt} to ${e.completedAt}, ${m.ledgerGPUSeconds} GPU-seconds by our ledger, but ${m.reason}: status.accounting.ledger counts it as our cluster saw it, status.accounting.gpuSeconds as the peer's records say; settle the difference with the peer from status.ledger`;
}

/**
 * The PeerFleet's accounting, and each host's (set on it as `lent`): the
 * peer's records with our ledger's totals and every difference beside them,
 * and the Warning each difference raises. Indexed by node once, so that a
 * status with many nodes costs no scan of the ledger per node.
 */
export function settleAccounts(
  hosts: PeerHost[],
  fromPeer: ReturnType<typeof account>,
  ledger: PeerLedger | undefined,
  peerJobs: readonly V1Job[],
  pricePerGPUHour: number,
  now: number,
  graceMs: number,
): { accounting: Accounting; warnings: string[] } {
  const entries = ledger?.entries ?? [];
  const earlier = ledger?.earlier ?? [];
  const mismatches = ledgerMismatches(entries, peerJobs, now, graceMs);
  const sum = (list: readonly { gpuSeconds: number; jobs: number }[]) => list.length === 0 ? undefined : list.reduce((a, t) => ({ gpuSeconds: a.gpuSeconds + t.gpuSeconds, jobs: a.jobs + t.jobs }), { gpuSeconds: 0, jobs: 0 });
  const empty = (): Accounting => ({ gpuSeconds: 0, amountUSD: 0, jobs: 0, unmeasured: 0, lastComputedAt: rfc3339(new Date(now)) });
  const byNode = (x: { node: string }) => x.node;
  const entriesOn = groupBy(entries, byNode);
  const earlierOn = groupBy(earlier, byNode);
  const mismatchesOn = groupBy(mismatches, byNode);
  for (const h of hosts) {
    const own = entriesOn.get(h.node) ?? [];
    const peerSide = fromPeer.hosts.get(h.node);
    if (!peerSide && own.length === 0 && !earlierOn.has(h.node)) continue;
    // Per node the count only: status.accounting lists the Jobs, and a status with many nodes stays small.
    h.lent = withLedger(peerSide ?? empty(), own, sum(earlierOn.get(h.node) ?? []), mismatchesOn.get(h.node) ?? [], pricePerGPUHour, 0);
  }
  const byUID = new Map(entries.map((e) => [e.uid, e]));
  return { accounting: withLedger(fromPeer.total, entries, sum(earlier), mismatches, pricePerGPUHour), warnings: mismatches.map((m) => mismatchMessage(m, byUID.get(m.uid)!)) };
}
