// Which Offer serves a Lease: a pure policy of (where, offers, rng).
// Only offers whose shape matches win; the cheapest does, an offer with a
// price (even 0) before one without, and equal offers in random order.
import { matchShape, type ParsedWhere, type MachineShape } from '../../src/api/where.js';

export interface OfferCandidate {
  /** Offer name (for Lambda offers: offer/instance-type). */
  name: string;
  shape: MachineShape;
  pricePerHour?: number;
  /** Set when the offer exists but cannot serve now (e.g. no capacity, not Ready). */
  unavailable?: string;
}

export type Choice =
  | { ok: true; candidate: OfferCandidate }
  | { ok: false; message: string };

export function chooseOffer(
  where: ParsedWhere,
  rawWhere: string,
  candidates: readonly OfferCandidate[],
  onlyOffer: string | undefined,
  random: () => number = Math.random,
): Choice {
  const scoped = onlyOffer ? candidates.filter((c) => c.name === onlyOffer || c.name.startsWith(`${onlyOffer}/`)) : candidates;
  if (scoped.length === 0) {
    return {
      ok: false,
      message: onlyOffer
        ? `spec.offer names ${onlyOffer}, which does not exist; list offers with kubectl get offers.leasehold.dev, or remove spec.offer`
        : `no Offer exists to lease ${rawWhere} from; a platform admin creates one (kubectl get offers.leasehold.dev)`,
    };
  }
  const reasons: string[] = [];
  const matching: OfferCandidate[] = [];
  for (const c of scoped) {
    if (c.unavailable) {
      reasons.push(`${c.name}: ${c.unavailable}`);
      continue;
    }
    const m = matchShape(where, c.shape);
    if (m.ok) matching.push(c);
    else reasons.push(`${c.name}: ${m.lacks.join(', ')}`);
  }
  if (matching.length === 0) {
    return { ok: false, message: `no Offer matches ${rawWhere}: ${reasons.join('; ')}` };
  }
  // Shuffle first so that the stable sort leaves equal offers in random order.
  const shuffled = matching.map((c) => ({ c, k: random() })).sort((a, b) => a.k - b.k).map((x) => x.c);
  shuffled.sort((a, b) => priceRank(a) - priceRank(b));
  return { ok: true, candidate: shuffled[0]! };
}

function priceRank(c: OfferCandidate): number {
  return c.pricePerHour === undefined ? Number.POSITIVE_INFINITY : c.pricePerHour;
}
