// Wires the Lease reconciler to the manager: which watches enqueue which keys.
import type { Lease, Offer } from '../../src/api/index.js';
import { LEASE_RESOURCE, OFFER_RESOURCE } from '../../src/api/resources.js';
import { isNotFound } from '../../src/kube/client.js';
import type { Manager } from '../../src/kube/manager.js';
import { objectKey, resourcePath } from '../../src/kube/resource.js';
import type { LeaseDriver } from './driver.js';
import { LeaseReconciler, RELEASE_FINALIZER, type LeaseSettings, type LeaseWriter } from './reconciler.js';

export interface LeaseControllerOptions {
  concurrency: number;
  settings: LeaseSettings;
  driver: LeaseDriver;
}

export function registerLeaseController(mgr: Manager, opts: LeaseControllerOptions): LeaseReconciler {
  const leases = mgr.informer<Lease>(resourcePath(LEASE_RESOURCE, mgr.watchNamespace));
  const offers = mgr.informer<Offer>(resourcePath(OFFER_RESOURCE));
  const { group, version, plural } = LEASE_RESOURCE;
  const writer: LeaseWriter = {
    addFinalizer: (l) => mgr.finalizers.add(LEASE_RESOURCE, l, RELEASE_FINALIZER),
    removeFinalizer: (l) => mgr.finalizers.remove(LEASE_RESOURCE, l, RELEASE_FINALIZER),
    async get(namespace, name) {
      try {
        return (await mgr.custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as Lease;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    async delete(namespace, name) {
      try {
        await mgr.custom.deleteNamespacedCustomObject({ group, version, plural, namespace, name });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    },
  };
  mgr.metrics.leaseSource = () => leases.list() as never;
  const reconciler = new LeaseReconciler({
    metrics: {
      ready: (provider, seconds) => mgr.metrics.timeToReady.observe({ provider }, seconds),
      releaseFailed: (provider) => mgr.metrics.releaseFailures.inc({ provider }),
    },
    leases,
    offers,
    status: mgr.status,
    writer,
    events: mgr.events,
    driver: opts.driver,
    settings: opts.settings,
    log: mgr.log.child({ controller: 'lease' }),
  });
  const queue = mgr.add({ name: 'lease', concurrency: opts.concurrency, reconcile: (key) => reconciler.reconcile(key) });
  const enqueue = (l: Lease) => queue.add(objectKey(l));
  leases.on('add', enqueue);
  leases.on('update', enqueue);
  // A Lease that ended frees a slot under maxLeases: wake the waiting ones.
  leases.on('delete', () => wakeWaiting());
  const wakeWaiting = () => {
    for (const l of leases.list()) {
      if ((l.status?.phase ?? 'Pending') === 'Pending') queue.add(objectKey(l));
    }
  };
  leases.on('update', (l: Lease) => {
    if (l.status?.phase === 'Released' || l.status?.phase === 'Failed') wakeWaiting();
  });
  // A new or changed Offer may serve Leases that are waiting for one.
  offers.on('add', wakeWaiting);
  offers.on('update', wakeWaiting);
  offers.on('delete', wakeWaiting);
  return reconciler;
}
