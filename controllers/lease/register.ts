// Wires the Lease controller into the manager: its informers, metrics, the
// machine driver (providers + SSH agent), the reconciler, and which watches
// enqueue which keys.
import { PatchStrategy, setHeaderOptions, type V1Namespace } from '@kubernetes/client-node';
import type { Lease, Offer } from '../../src/api/index.js';
import { ENDED_PHASES, LEASE_RESOURCE, OFFER_RESOURCE } from '../../src/api/index.js';
import type { ObjectCache } from '../../src/kube/cache.js';
import { isConflict, isNotFound } from '../../src/kube/client.js';
import type { Manager } from '../../src/kube/manager.js';
import type { ControllerOptions } from '../../src/kube/registration.js';
import type { WorkQueue } from '../../src/kube/workqueue.js';
import { objectKey, resourcePath } from '../../src/kube/resource.js';
import { KeptKeys, loadOrCreateControllerKey } from '../../src/machine/controller-key.js';
import { compareFacts } from '../../src/machine/facts.js';
import type { LambdaAccounts } from '../../src/providers/lambda/accounts.js';
import type { LeaseDriver } from './driver.js';
import { MachineDriver } from './machine-driver.js';
import { LeaseMetrics } from './metrics.js';
import type { LeaseEffectResult } from './decision.js';
import { claimOf, offerChangedForScheduling } from './offers.js';
import { endedNow } from './history.js';
import { LeaseReconciler, RECORD_SWEEP_KEY, RELEASE_FINALIZER, type LeaseSettings, type LeaseWriter } from './reconciler.js';
import { adoptedMarkerFor, KubeRecordStore } from '../../src/kube/leaserecords.js';
import { INSTALLATION_ANNOTATION, stampedBy } from './policy/ownership.js';
import { sshAgent } from './ssh-agent.js';

/** The controller's own SSH key Secret and its Lease records live in controllerNamespace. */
export interface LeaseControllerOptions extends ControllerOptions {
  settings: Omit<LeaseSettings, 'installationID'>;
  /** The installation ID Secret (in controllerNamespace): the records' adoption is noted there. */
  installationSecret: string;
  /** Lambda accounts, shared with the Offer controller so that each account has one launch pacer. */
  lambda?: { accounts: LambdaAccounts; pollMs: number; launchSettleMs?: number };
  /** Replaces the driver built from providers and SSH (tests). */
  driver?: LeaseDriver;
}

export function registerLeaseController(mgr: Manager, opts: LeaseControllerOptions): LeaseReconciler {
  const settings: LeaseSettings = { ...opts.settings, installationID: opts.installationID };
  const leases = mgr.informer<Lease>(resourcePath(LEASE_RESOURCE, mgr.watchNamespace));
  const offers = mgr.informer<Offer>(resourcePath(OFFER_RESOURCE));
  // Namespace labels decide which Offers a namespace may lease from; a
  // namespaced install watches its one namespace only.
  const namespaces = mgr.informer<V1Namespace>('/api/v1/namespaces', mgr.watchNamespace ? { fieldSelector: `metadata.name=${mgr.watchNamespace}` } : {});
  const metrics = new LeaseMetrics(mgr.metrics.registry, () => leases.list().filter((l) => stampedBy(l, opts.installationID)));
  let queue: WorkQueue | undefined;
  const records = leaseRecords(mgr, opts);
  const reconciler = new LeaseReconciler({
    effects: mgr.effects<LeaseEffectResult>('lease'),
    enqueue: (key) => queue?.add(key),
    metrics: {
      ready: (provider, seconds) => metrics.timeToReady.observe({ provider }, seconds),
      releaseFailed: (provider) => metrics.releaseFailures.inc({ provider }),
    },
    leases,
    offers,
    namespaces,
    status: mgr.status,
    writer: leaseWriter(mgr),
    events: mgr.events,
    driver: opts.driver ?? machineDriver(mgr, opts, offers, metrics),
    records,
    recordScope: { namespace: opts.controllerNamespace, watchNamespace: mgr.watchNamespace },
    settings,
    log: mgr.log.child({ controller: 'lease' }),
  });
  queue = mgr.add({ name: 'lease', concurrency: opts.concurrency, reconcile: (key) => reconciler.reconcile(key) });
  const enqueue = (l: Lease) => queue!.add(objectKey(l));
  // The sweep for machines whose Lease vanished runs once the leader's cache
  // has synced, then every check interval (it requeues itself).
  queue.add(RECORD_SWEEP_KEY);
  leases.on('add', enqueue);
  leases.on('update', enqueue);
  let wakePending = false;
  // Wakes come in bursts (a relist, the Offer controller's first pass over
  // every Offer): they are folded into one walk over the Leases a turn.
  const wakeWaiting = () => {
    if (wakePending) return;
    wakePending = true;
    setImmediate(() => {
      wakePending = false;
      for (const l of leases.list()) {
        if ((l.status?.phase ?? 'Pending') === 'Pending') queue!.add(objectKey(l));
      }
    });
  };
  // A Lease that ended frees a slot under maxLeases: wake the waiting ones.
  leases.on('delete', (l: Lease) => {
    reconciler.forget(l);
    // One that had ended gave its slot back then; pruning history frees nothing.
    if (!ENDED_PHASES.includes(l.status?.phase ?? 'Pending')) wakeWaiting();
    // A Lease deleted without its release (finalizer removed by hand) has its machine released from its record now, not at the next sweep.
    queue!.add(RECORD_SWEEP_KEY);
  });
  leases.on('update', (l: Lease, old: Lease) => {
    if (endedNow(l, old)) wakeWaiting();
  });
  // A namespace labelled anew may now be selected by an Offer.
  namespaces.on('add', wakeWaiting);
  namespaces.on('update', wakeWaiting);
  // A new or changed Offer may serve Leases that are waiting for one; a
  // status write that changes nothing a decision reads wakes nobody.
  offers.on('add', wakeWaiting);
  offers.on('update', (o: Offer, old: Offer) => {
    if (offerChangedForScheduling(o, old)) wakeWaiting();
  });
  offers.on('delete', wakeWaiting);
  return reconciler;
}

/** This installation's records of Lease machines, as the Lease controller and the Offer controller's orphan sweep read them. */
export function leaseRecords(mgr: Manager, opts: Pick<LeaseControllerOptions, 'installationID' | 'controllerNamespace' | 'installationSecret'>): KubeRecordStore {
  return new KubeRecordStore(mgr.core, opts.controllerNamespace, {
    id: opts.installationID,
    secret: opts.installationSecret,
    legacyMarker: adoptedMarkerFor(mgr.watchNamespace),
  });
}

function leaseWriter(mgr: Manager): LeaseWriter {
  const { group, version, plural } = LEASE_RESOURCE;
  return {
    async stamp(lease, installationID) {
      const body = { metadata: { annotations: { [INSTALLATION_ANNOTATION]: installationID }, resourceVersion: lease.metadata?.resourceVersion } };
      const opts = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
      return (await mgr.custom.patchNamespacedCustomObject({ group, version, plural, namespace: lease.metadata!.namespace!, name: lease.metadata!.name!, body }, opts)) as Lease;
    },
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
    async delete(namespace, name, uid) {
      try {
        await mgr.custom.deleteNamespacedCustomObject({ group, version, plural, namespace, name, body: { preconditions: { uid } } });
      } catch (err) {
        // Gone, or a new Lease of the same name (409: the UID precondition failed): neither is ours to delete.
        if (!isNotFound(err) && !isConflict(err)) throw err;
      }
    },
  };
}

function machineDriver(mgr: Manager, opts: LeaseControllerOptions, offers: ObjectCache<Offer>, metrics: LeaseMetrics): MachineDriver {
  const keys = new KeptKeys(() => loadOrCreateControllerKey(mgr.core, opts.controllerNamespace));
  return new MachineDriver({
    ...(opts.lambda ? { lambda: opts.lambda.accounts, lambdaPollMs: opts.lambda.pollMs, lambdaLaunchSettleMs: opts.lambda.launchSettleMs } : {}),
    metrics: {
      launched: (provider, result, seconds) => metrics.launchDuration.observe({ provider, result }, seconds),
      commandCall: (operation, code) => mgr.metrics.providerRequests.inc({ provider: 'command', operation, code }),
    },
    offers,
    key: () => keys.get(),
    agent: sshAgent(),
    compare: (lease, measured) => {
      const claim = claimOf(offers.get(undefined, lease.status?.offer ?? ''), lease);
      if (!claim) return [];
      const verdict = compareFacts(claim, measured);
      return verdict.ok ? [] : verdict.differences;
    },
    acquireTimeoutMs: opts.settings.acquireTimeoutMs,
    releaseTimeoutMs: 5 * 60_000,
    log: mgr.log,
  });
}
