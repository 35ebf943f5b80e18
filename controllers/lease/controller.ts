// Wires the Lease reconciler to the manager: which watches enqueue which keys.
import type { Lease, Offer } from '../../src/api/index.js';
import { LEASE_RESOURCE, OFFER_RESOURCE } from '../../src/api/resources.js';
import type { Manager } from '../../src/kube/manager.js';
import { objectKey, resourcePath } from '../../src/kube/resource.js';
import { LeaseReconciler } from './reconciler.js';

export interface LeaseControllerOptions {
  concurrency: number;
}

export function registerLeaseController(mgr: Manager, opts: LeaseControllerOptions): LeaseReconciler {
  const leases = mgr.informer<Lease>(resourcePath(LEASE_RESOURCE, mgr.watchNamespace));
  const offers = mgr.informer<Offer>(resourcePath(OFFER_RESOURCE));
  const reconciler = new LeaseReconciler({
    leases,
    offers,
    status: mgr.status,
    events: mgr.events,
    log: mgr.log.child({ controller: 'lease' }),
  });
  const queue = mgr.add({ name: 'lease', concurrency: opts.concurrency, reconcile: (key) => reconciler.reconcile(key) });
  const enqueue = (l: Lease) => queue.add(objectKey(l));
  leases.on('add', enqueue);
  leases.on('update', enqueue);
  leases.on('delete', enqueue);
  // A new or changed Offer may serve Leases that are waiting for one.
  const wakeWaiting = () => {
    for (const l of leases.list()) {
      if ((l.status?.phase ?? 'Pending') === 'Pending') queue.add(objectKey(l));
    }
  };
  offers.on('add', wakeWaiting);
  offers.on('update', wakeWaiting);
  offers.on('delete', wakeWaiting);
  return reconciler;
}
