// Wires the Offer controller: an Offer is reconciled when it changes and
// when a Lease that uses it changes phase; Lambda Offers are listed and their
// account swept for orphans.
import type { Lease, Offer } from '../../src/api/index.js';
import { LEASE_RESOURCE, OFFER_RESOURCE } from '../../src/api/index.js';
import type { RecordStore } from '../../src/kube/leaserecords.js';
import type { Manager } from '../../src/kube/manager.js';
import type { ControllerOptions } from '../../src/kube/registration.js';
import { objectKey, resourcePath } from '../../src/kube/resource.js';
import type { LambdaAccounts } from '../../src/providers/lambda/accounts.js';
import { LambdaOffers } from './lambda.js';
import { OfferReconciler } from './reconciler.js';

export interface OfferControllerOptions extends ControllerOptions {
  /** Lambda Offers listed and their accounts swept; only instances named under installationID are ever swept. */
  lambda?: {
    accounts: LambdaAccounts;
    listIntervalMs: number;
    orphanGraceMs: number;
    /** What to do with an instance of this installation no Lease owns; report unless told to terminate. */
    orphans?: 'terminate' | 'report' | undefined;
    /** This installation's Lease records: the orphan sweep counts a machine owned when a record names it. */
    records: Pick<RecordStore, 'list'>;
  };
}

export function registerOfferController(mgr: Manager, opts: OfferControllerOptions): OfferReconciler {
  const offers = mgr.informer<Offer>(resourcePath(OFFER_RESOURCE));
  const leases = mgr.informer<Lease>(resourcePath(LEASE_RESOURCE, mgr.watchNamespace));
  const lambda = opts.lambda
    ? new LambdaOffers({
        accounts: opts.lambda.accounts,
        events: mgr.events,
        log: mgr.log.child({ controller: 'offer' }),
        listIntervalMs: opts.lambda.listIntervalMs,
        orphanGraceMs: opts.lambda.orphanGraceMs,
        installationID: opts.installationID,
        // Terminating is a choice an admin makes: a machine whose Lease was
        // lost (restored cluster, renamed namespace) is reported, not ended.
        orphans: opts.lambda.orphans ?? 'report',
      })
    : undefined;
  if (lambda) {
    const records = opts.lambda!.records;
    lambda.ownedMachines = async () => new Set((await records.list()).map((r) => r.machineName));
  }
  const reconciler = new OfferReconciler({ offers, leases, status: mgr.status, ...(lambda ? { lambda } : {}) });
  const queue = mgr.add({ name: 'offer', concurrency: opts.concurrency, reconcile: (key) => reconciler.reconcile(key) });
  const enqueue = (o: Offer) => queue.add(objectKey(o));
  offers.on('add', enqueue).on('update', enqueue).on('delete', enqueue);
  const byLease = (l: Lease) => {
    if (l.status?.offer) queue.add(l.status.offer);
  };
  leases.on('add', byLease).on('update', byLease).on('delete', byLease);
  return reconciler;
}
