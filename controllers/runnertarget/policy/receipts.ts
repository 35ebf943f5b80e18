// Receipts: the intent of each provider change, recorded in status before
// the change is made, so that a check that dies mid-change is continued by
// the next one (a Launch reuses its requestId, which Compute Engine
// deduplicates). Only finished receipts are trimmed: an Intended one is the
// only trace of a change that may have happened.
import { createHash } from 'node:crypto';
import { RECEIPTS_KEPT, type Receipt } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';

export type { Receipt };
export type ReceiptAction = Receipt['action'];

/** An identifier unique within the target: the action, the hosts and the instant, hashed. */
export function receiptID(action: ReceiptAction, hosts: readonly string[], now: number): string {
  const digest = createHash('sha256').update(`${action}\n${hosts.join(',')}\n${now}`).digest('hex').slice(0, 12);
  return `${action.toLowerCase()}-${digest}`;
}

/**
 * The Compute Engine requestId of a receipt: a UUID derived from the target
 * and the receipt (name-based, as RFC 4122 version 5), so a retry of the
 * same receipt, by this check or a later one, is the same request.
 */
export function requestIdFor(targetUID: string, id: string): string {
  const b = createHash('sha1').update(`${targetUID}/${id}`).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export type Intent = Omit<Receipt, 'id' | 'phase' | 'at'>;

/** A new Intended receipt for `intent`; Launch and Delete get their Compute Engine requestId from the target's UID. */
export function receiptFor(intent: Intent, now: number, targetUID?: string): Receipt {
  const id = receiptID(intent.action, intent.hosts, now);
  const compute = intent.action === 'Launch' || intent.action === 'Delete';
  return { id, phase: 'Intended', at: rfc3339(new Date(now)), ...intent, ...(compute && targetUID ? { requestId: requestIdFor(targetUID, id) } : {}) };
}

/** The list with `receipt` appended, newest last, at most RECEIPTS_KEPT, dropping the oldest finished first. */
export function withReceipt(receipts: readonly Receipt[] | undefined, receipt: Receipt, keep = RECEIPTS_KEPT): Receipt[] {
  const list = [...(receipts ?? []).filter((r) => r.id !== receipt.id), receipt];
  let excess = list.length - keep;
  const out: Receipt[] = [];
  for (const r of list) {
    if (excess > 0 && r.phase !== 'Intended') {
      excess--;
      continue;
    }
    out.push(r);
  }
  // More than `keep` Intended receipts: the oldest go too, since the API refuses a longer list.
  return out.slice(Math.max(0, out.length - keep));
}

/** The list with receipt `id` finished (Done or Failed); undefined when no such receipt is there. */
export function settled(receipts: readonly Receipt[] | undefined, id: string, phase: 'Done' | 'Failed', message?: string): Receipt[] | undefined {
  const list = receipts ?? [];
  if (!list.some((r) => r.id === id)) return undefined;
  return list.map((r) => (r.id === id ? { ...r, phase, ...(message !== undefined ? { message } : {}) } : r));
}

/** Receipts whose change may or may not have happened: the next check continues them. */
export function openReceipts(receipts: readonly Receipt[] | undefined): Receipt[] {
  return (receipts ?? []).filter((r) => r.phase === 'Intended');
}

/** Hosts a Launch is still Intended for: their VM may not exist yet, and their runner may register any time. */
export function launchingHosts(receipts: readonly Receipt[] | undefined): Set<string> {
  return new Set(openReceipts(receipts).filter((r) => r.action === 'Launch').flatMap((r) => r.hosts));
}
