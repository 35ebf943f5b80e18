// The Offer reconciler: a Ready condition and the count of active Leases,
// and for a Lambda Offer the candidates of its last listing.
import { ACTIVE_PHASES, fitText, LAST_LIST_ERROR_MAX_CHARS, type Lease, type Offer, type OfferStatus } from '../../src/api/index.js';
import { rfc3339 } from '../../src/kube/conditions.js';
import type { LambdaOffers, Listing } from './lambda.js';
import { OFFER_RESOURCE } from '../../src/api/resources.js';
import { setCondition } from '../../src/kube/conditions.js';
import type { StatusWriter } from '../../src/kube/status.js';
import type { ObjectCache } from '../../src/kube/cache.js';


export interface OfferReconcilerDeps {
  offers: ObjectCache<Offer>;
  leases: ObjectCache<Lease>;
  status: StatusWriter;
  lambda?: LambdaOffers;
  now?: () => Date;
}

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

export class OfferReconciler {
  constructor(private readonly deps: OfferReconcilerDeps) {}

  async reconcile(key: string): Promise<{ requeueAfter?: number } | void> {
    const offer = this.deps.offers.get(undefined, key);
    if (!offer) {
      this.deps.lambda?.forget(key);
      return;
    }
    const now = this.deps.now ?? (() => new Date());
    let listing: Listing | undefined;
    if (offer.spec.lambda && this.deps.lambda) listing = (await this.deps.lambda.listing(offer)).listing;
    const status = offerStatus(offer, this.deps.leases.list(), now(), listing);
    // Only the leader writes Offer status, and every write carries all of it,
    // so a stale cache is no reason to fail: write without the resourceVersion.
    await this.deps.status.write(OFFER_RESOURCE, offer, status, { unconditional: true });
    if (listing && this.deps.lambda) return { requeueAfter: Math.max(1000, this.deps.lambda.dueAt(listing) - now().getTime()) };
  }
}
