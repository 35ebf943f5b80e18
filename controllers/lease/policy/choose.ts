// Which Offer serves a Lease: a pure policy of (where, offers, rng).
// Only offers whose shape matches win; the cheapest does, an offer with a
// price (even 0) before one without, and equal offers in random order.
import { matchShape, type MatchResult, type ParsedWhere, type MachineShape } from '../../../src/api/where.js';

export interface OfferCandidate {
  /** Offer name (for Lambda offers: offer/instance-type). */
  name: string;
  /** The Offer the candidate belongs to. */
  offer: string;
  shape: MachineShape;
  pricePerHour?: number | undefined;
  /** Lambda: the instance type and the region it would launch in. */
  instanceType?: string | undefined;
  region?: string | undefined;
  /** Set when the offer exists but cannot serve now (e.g. no capacity, over the price cap, not Ready). */
  unavailable?: string | undefined;
  /** True when capacity is all it lacks: a Lease only it could serve fails at once instead of waiting. */
  noCapacity?: boolean | undefined;
  /** A policy that keeps it from this Lease now, as the Pending reason it gives. */
  blockedBy?: BlockReason | undefined;
}

export type BlockReason = 'OverPriceCap' | 'NamespaceNotAllowed' | 'MaxLeasesPerNamespace' | 'NamespacePriceCap';

export type Choice =
  | { ok: true; candidate: OfferCandidate }
  | { ok: false; message: string; noCapacity?: boolean; reason?: BlockReason };

/**
 * At most this many candidates are named in a refusal, those that match but
 * are unavailable first. The message is stored in every waiting Lease's
 * status and condition: naming all of a few hundred Offers made each Lease
 * kilobytes larger, in etcd and in the controller's cache.
 */
export const MAX_REASONS = 5;

/** `reasons` and `unshown` more not formatted. */
function listReasons(reasons: string[], unshown = 0): string {
  const more = reasons.length + unshown - MAX_REASONS;
  const shown = reasons.slice(0, MAX_REASONS).join('; ');
  return more > 0 ? `${shown}; and ${more} more (kubectl get offers.leasehold.dev)` : shown;
}

export function chooseOffer(
  where: ParsedWhere,
  rawWhere: string,
  candidates: readonly OfferCandidate[],
  onlyOffer: string | undefined,
  random: () => number = Math.random,
): Choice {
  const scoped = onlyOffer ? candidates.filter((c) => c.offer === onlyOffer || c.name === onlyOffer) : candidates;
  if (scoped.length === 0) {
    return {
      ok: false,
      message: onlyOffer
        ? `spec.offer names ${onlyOffer}, which does not exist; list offers with kubectl get offers.leasehold.dev, or remove spec.offer`
        : `no Offer exists to lease ${rawWhere} from; a platform admin creates one (kubectl get offers.leasehold.dev)`,
    };
  }
  // Only the first few are named in a refusal: each is formatted only if shown.
  const lacking: { c: OfferCandidate; lacks: string[] }[] = [];
  const matching: OfferCandidate[] = [];
  const blocked: OfferCandidate[] = [];
  for (const c of scoped) {
    const m = matchOnce(where, rawWhere, c.shape);
    if (!m.ok) lacking.push({ c, lacks: m.lacks });
    else if (c.unavailable) blocked.push(c);
    else matching.push(c);
  }
  if (matching.length === 0) {
    // What could serve it exists but has no capacity anywhere wanted: say so now rather than wait.
    const noCapacity = blocked.length > 0 && blocked.every((c) => c.noCapacity);
    const shown = Math.max(0, MAX_REASONS - blocked.length);
    const reasons = [...blocked.map((c) => `${c.name}: ${c.unavailable}`), ...lacking.slice(0, shown).map((l) => `${l.c.name}: ${l.lacks.join(', ')}`)];
    const unshown = lacking.length - Math.min(shown, lacking.length);
    // One policy is all that keeps the rest from serving it: that is the reason to wait for (or the setting to change).
    const policies = new Set(blocked.filter((c) => !c.noCapacity).map((c) => c.blockedBy));
    const [policy] = policies;
    const reason = !noCapacity && policies.size === 1 && policy ? { reason: policy } : {};
    return { ok: false, message: `no Offer matches ${rawWhere}: ${listReasons(reasons, unshown)}`, ...(noCapacity ? { noCapacity } : {}), ...reason };
  }
  // Shuffle first so that the stable sort leaves equal offers in random order.
  const shuffled = matching.map((c) => ({ c, k: random() })).sort((a, b) => a.k - b.k).map((x) => x.c);
  shuffled.sort((a, b) => priceRank(a) - priceRank(b));
  return { ok: true, candidate: shuffled[0]! };
}

/**
 * matchShape, remembered per shape object and where-expression: an Offer's
 * candidates (and their shapes) are made once per change of the Offer, and
 * thousands of waiting Leases share a few where-expressions. Each shape
 * remembers a bounded number of expressions.
 */
function matchOnce(where: ParsedWhere, rawWhere: string, shape: MachineShape): MatchResult {
  let known = matches.get(shape);
  if (!known) matches.set(shape, (known = new Map()));
  let m = known.get(rawWhere);
  if (!m) {
    m = matchShape(where, shape);
    if (known.size >= MAX_REMEMBERED_WHERES) known.clear();
    known.set(rawWhere, m);
  }
  return m;
}

const matches = new WeakMap<MachineShape, Map<string, MatchResult>>();
const MAX_REMEMBERED_WHERES = 256;

function priceRank(c: OfferCandidate): number {
  return c.pricePerHour === undefined ? Number.POSITIVE_INFINITY : c.pricePerHour;
}
