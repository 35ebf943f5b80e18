// Wires the Offer reconciler: an Offer is reconciled when it changes and
// when a Lease that uses it changes phase.
import type { Lease, Offer } from '../../src/api/index.js';
import { LEASE_RESOURCE, OFFER_RESOURCE } from '../../src/api/resources.js';
import type { Manager } from '../../src/kube/manager.js';
import { resourcePath } from '../../src/kube/resource.js';
import { OfferReconciler } from './reconciler.js';
import type { LambdaOffers } from './lambda.js';

export function registerOfferController(mgr: Manager, opts: { lambda?: LambdaOffers } = {}): void {
  const offers = mgr.informer<Offer>(resourcePath(OFFER_RESOURCE));
  const leases = mgr.informer<Lease>(resourcePath(LEASE_RESOURCE, mgr.watchNamespace));
  if (opts.lambda) opts.lambda.leases = () => leases.list();
  const reconciler = new OfferReconciler({ offers, leases, status: mgr.status, ...(opts.lambda ? { lambda: opts.lambda } : {}) });
  const queue = mgr.add({ name: 'offer', concurrency: 1, reconcile: (key) => reconciler.reconcile(key) });
  offers.on('add', (o: Offer) => queue.add(o.metadata!.name!));
  offers.on('update', (o: Offer) => queue.add(o.metadata!.name!));
  offers.on('delete', (o: Offer) => queue.add(o.metadata!.name!));
  const byLease = (l: Lease) => {
    if (l.status?.offer) queue.add(l.status.offer);
  };
  leases.on('add', byLease);
  leases.on('update', byLease);
  leases.on('delete', byLease);
}
