// The Offer reconciler: a Ready condition and the count of active Leases.
// Only command Offers can serve today; a Lambda Offer says so.
import type { Lease, Offer, OfferStatus } from '../../src/api/index.js';
import { OFFER_RESOURCE } from '../../src/api/resources.js';
import { setCondition } from '../../src/kube/conditions.js';
import type { StatusWriter } from '../../src/kube/status.js';
import type { ObjectCache } from '../lease/reconciler.js';

const ACTIVE = new Set(['Launching', 'Ready', 'Idle', 'Releasing']);

export interface OfferReconcilerDeps {
  offers: ObjectCache<Offer>;
  leases: ObjectCache<Lease>;
  status: StatusWriter;
  now?: () => Date;
}

/** Pure: the status an Offer should have, given the Leases that use it. */
export function offerStatus(offer: Offer, leases: readonly Lease[], now: Date): OfferStatus {
  const name = offer.metadata?.name;
  const active = leases.filter((l) => l.status?.offer === name && ACTIVE.has(l.status?.phase ?? '')).length;
  const ready = offer.spec.command
    ? { type: 'Ready', status: 'True' as const, reason: 'CommandConfigured', message: `acquire ${offer.spec.command.acquire[0]} serves Leases` }
    : { type: 'Ready', status: 'False' as const, reason: 'LambdaNotSupported', message: 'this controller version cannot rent from Lambda yet; use spec.command' };
  return {
    ...offer.status,
    observedGeneration: offer.metadata?.generation,
    activeLeases: active,
    conditions: setCondition(offer.status?.conditions as never, ready, offer.metadata?.generation, now) as OfferStatus['conditions'],
  };
}

export class OfferReconciler {
  constructor(private readonly deps: OfferReconcilerDeps) {}

  async reconcile(key: string): Promise<void> {
    const offer = this.deps.offers.get(undefined, key);
    if (!offer) return;
    const status = offerStatus(offer, this.deps.leases.list(), (this.deps.now ?? (() => new Date()))());
    await this.deps.status.write(OFFER_RESOURCE, offer, status);
  }
}
