// The status an Offer should have: a Ready condition, the count of active
// Leases that use it and, for a Lambda Offer, the candidates of its last
// listing. The reconciler writes it whole.
import { ACTIVE_PHASES, fitText, LAST_LIST_ERROR_MAX_CHARS, type Lease, type Offer, type OfferStatus } from '../../src/api/index.js';
import { rfc3339, setCondition } from '../../src/kube/conditions.js';
import type { Listing } from './lambda.js';

/** Pure: the status an Offer should have, given the Leases that use it and, for Lambda, its last listing. */
export function offerStatus(offer: Offer, leases: readonly Lease[], now: Date, listing?: Listing): OfferStatus {
  const name = offer.metadata?.name;
  const active = leases.filter((l) => l.status?.offer === name && ACTIVE_PHASES.includes(l.status?.phase ?? 'Pending')).length;
  const extra: Partial<OfferStatus> = {};
  let ready;
  if (offer.spec.command) {
    ready = { type: 'Ready', status: 'True' as const, reason: 'CommandConfigured', message: `acquire ${offer.spec.command.acquire[0]} serves Leases` };
  } else if (!listing) {
    ready = { type: 'Ready', status: 'False' as const, reason: 'NotListed', message: 'the instance types have not been listed yet' };
  } else if (listing.ok) {
    const available = listing.candidates.filter((c) => c.available);
    const cheapest = available[0];
    ready = {
      type: 'Ready',
      status: 'True' as const,
      reason: 'Listed',
      message: `${available.length} of ${listing.candidates.length} instance types can be rented now${cheapest ? `; cheapest ${cheapest.name} at $${cheapest.pricePerHour.toFixed(2)}/h in ${cheapest.region}` : ''}`,
    };
    extra.candidates = listing.candidates;
    extra.lastListTime = rfc3339(new Date(listing.at));
    extra.lastListError = undefined;
  } else {
    ready = { type: 'Ready', status: 'False' as const, reason: listing.reason, message: fitText(listing.message) };
    extra.lastListError = fitText(listing.message, LAST_LIST_ERROR_MAX_CHARS);
  }
  const status: OfferStatus = {
    ...offer.status,
    ...extra,
    observedGeneration: offer.metadata?.generation,
    activeLeases: active,
    conditions: setCondition(offer.status?.conditions, ready, offer.metadata?.generation, now) as OfferStatus['conditions'],
  };
  if (status.lastListError === undefined) delete status.lastListError;
  return status;
}
