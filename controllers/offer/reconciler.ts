// The Offer reconciler: takes a Lambda Offer's listing when one is due and
// writes the status status.ts builds from it and the Leases that use the Offer.
import type { Lease, Offer } from '../../src/api/index.js';
import type { LambdaOffers, Listing } from './lambda.js';
import { OFFER_RESOURCE } from '../../src/api/resources.js';
import type { StatusWriter } from '../../src/kube/status.js';
import type { ObjectCache } from '../../src/kube/cache.js';
import { offerStatus } from './status.js';

export interface OfferReconcilerDeps {
  offers: ObjectCache<Offer>;
  leases: ObjectCache<Lease>;
  status: StatusWriter;
  lambda?: LambdaOffers;
  now?: () => Date;
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
