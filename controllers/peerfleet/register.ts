// Wires the PeerFleet controller: informers on PeerFleets, our nodes, pods,
// mirror Jobs and the nodes' holder Leases; per PeerFleet one peer client
// and one watch of its peer queue, kept while the origin, token and CA stay
// the same. Any change on either side enqueues the PeerFleets it may concern.
import { createHash } from 'node:crypto';
import type { KubernetesObject, V1Job, V1Lease, V1Namespace, V1NetworkPolicy, V1Node, V1Pod } from '@kubernetes/client-node';
import { PEERFLEET_RESOURCE, type PeerFleet } from '../../src/api/index.js';
import { clusterClients, remoteKubeConfig, type RemoteCluster } from '../../src/kube/clients.js';
import { formatSize, type OverBudgetError } from '../../src/kube/holdbudget.js';
import { DEFAULT_LIST_WATCH_LIMITS } from '../../src/kube/listwatch.js';
import { projectPeerJob } from '../../src/providers/peerqueue/projection.js';
import { capRefusal } from './policy/cap.js';
import type { ResilientInformer } from '../../src/kube/informer.js';
import type { Manager } from '../../src/kube/manager.js';
import type { ControllerOptions } from '../../src/kube/registration.js';
import { objectKey, resourcePath } from '../../src/kube/resource.js';
import { secretDataReader } from '../../src/kube/secrets.js';
import type { EndpointPolicy } from '../../src/providers/endpoints.js';
import { KubePeerQueue } from '../../src/providers/peerqueue/kube.js';
import { checkPeerJob } from '../../src/providers/peerqueue/schema.js';
import { LENDABLE_LABEL } from '../../src/providers/peerqueue/types.js';
import { holderLeaseName, HOLDER_LABEL } from './policy/holder.js';
import { PEERFLEET_LABEL } from './labels.js';
import { PeerFleetMetrics } from './metrics.js';
import type { LendingPolicy } from './policy/mirror.js';
import { lendableNodes, nodeChangeMatters, notOptedInNodes, sharedNodes } from './policy/nodes.js';
import { egressRefusal } from './policy/egress.js';
import { LendingEffects } from './effects.js';
import type { PeerAccess } from './peerreading.js';
import { LENDING_FINALIZER, PeerFleetReconciler, type LendingDeps, type PeerFleetEffect } from './reconciler.js';
import { POD_SECURITY_LABEL } from './policy/verdict.js';

/** installationID is the first part of every claim on a peer Job; the nodes' holder Leases live in controllerNamespace; concurrency is --peerfleet-concurrency. */
export interface PeerFleetControllerOptions extends ControllerOptions {
  /** The peer origins a PeerFleet may send its token to (--allowed-peer-origins). */
  origins: EndpointPolicy;
  /** What an admin allows every PeerFleet's mirrors (chart values peerFleet.*). */
  policy: LendingPolicy;
  /** False: readiness verdicts only, and no read of nodes or pods (an install whose RBAC leaves lending out). */
  lending?: boolean;
  /** Probes and lending effects running at once across every PeerFleet, off the workers (--peerfleet-effect-concurrency); default 4. */
  effectConcurrency?: number;
  /** What the watch of one peer queue may hold, and how long a peer cut off past it waits (--peer-budget-*); default DEFAULT_PEER_BUDGET. */
  peerBudget?: PeerBudget;
  /** PeerFleets served per namespace, the oldest first (--max-peerfleets-per-namespace); 0 or absent: no cap. */
  maxPerNamespace?: number;
}

export interface PeerBudget {
  bytes: number;
  objects: number;
  retryMs: number;
}

export const DEFAULT_PEER_BUDGET: PeerBudget = { bytes: 32 * 1024 * 1024, objects: 5000, retryMs: 10 * 60_000 };

interface Peer {
  fingerprint: string;
  queue: KubePeerQueue;
  /** The watch of the peer queue; absent when lending is off, or while the peer is cut off. */
  jobs?: ResilientInformer<V1Job>;
  /** Set while the watch is cut off past the budget: why, and when the peer is watched again. */
  cutOff?: { message: string; until: number };
}

export function registerPeerFleetController(mgr: Manager, opts: PeerFleetControllerOptions): PeerFleetReconciler {
  const fleets = mgr.informer<PeerFleet>(resourcePath(PEERFLEET_RESOURCE, mgr.watchNamespace));
  const peers = new Map<string, Peer>();
  let enqueueFleet: (key: string) => void = () => {};
  const lend = opts.lending ?? true;
  const budget = opts.peerBudget ?? DEFAULT_PEER_BUDGET;

  const watchQueue = (access: PeerAccess, entry: Peer, remote: RemoteCluster) => {
    // The queue is watched, never polled: an idle fleet costs the peer one open watch.
    const cluster = clusterClients(remote.name, remoteKubeConfig(remote), mgr.metrics, 'peer');
    const jobs = mgr.informer<V1Job>(`/apis/batch/v1/namespaces/${access.namespace}/jobs`, {
      cluster,
      labelSelector: `${LENDABLE_LABEL}=true`,
      gates: false,
      check: checkPeerJob,
      transform: (job) => projectPeerJob(job as V1Job),
      // A page larger than the whole budget could never be held.
      limits: { listBodyBytes: Math.min(DEFAULT_LIST_WATCH_LIMITS.listBodyBytes, budget.bytes) },
      budget: { bytes: budget.bytes, objects: budget.objects },
      onOverBudget: (err) => {
        // Only the watch that is current for the fleet cuts it off; a replaced one was dropped already.
        if (entry.jobs !== jobs) return;
        const until = Date.now() + budget.retryMs;
        entry.cutOff = { message: overBudgetMessage(access, err, budget, until), until };
        entry.jobs = undefined;
        mgr.metrics.objectsDropped.inc({ cluster: remote.name, reason: 'over_budget' });
        void mgr.dropInformer(jobs as unknown as ResilientInformer<KubernetesObject>);
        enqueueFleet(access.fleetKey);
      },
    });
    const wake = () => enqueueFleet(access.fleetKey);
    jobs.on('add', wake).on('update', wake).on('delete', wake);
    entry.jobs = jobs;
  };

  const peer = (access: PeerAccess): Peer => {
    // A hash, so that no token is kept beside the client that already holds it.
    const fingerprint = createHash('sha256').update(JSON.stringify([access.origin, access.namespace, access.token, access.caPEM ?? ''])).digest('hex');
    const kept = peers.get(access.fleetKey);
    if (kept?.fingerprint === fingerprint) {
      // A peer cut off past its budget is watched again once its wait is over.
      if (kept.cutOff && Date.now() >= kept.cutOff.until) {
        kept.cutOff = undefined;
        watchQueue(access, kept, remoteOf(access));
      }
      return kept;
    }
    if (kept?.jobs) void mgr.dropInformer(kept.jobs as unknown as ResilientInformer<KubernetesObject>);
    const remote = remoteOf(access);
    const entry: Peer = { fingerprint, queue: new KubePeerQueue({ ...remote, namespace: access.namespace, metrics: mgr.metrics }) };
    peers.set(access.fleetKey, entry);
    if (lend) watchQueue(access, entry, remote);
    return entry;
  };

  const reconciler = new PeerFleetReconciler({
    fleets,
    secrets: secretDataReader(mgr.core),
    origins: opts.origins,
    peer: (access) => peer(access).queue,
    ...(opts.maxPerNamespace ? { overCap: (fleet: PeerFleet) => capRefusal(fleet, fleets.list(), { max: opts.maxPerNamespace! }) } : {}),
    forget: (key) => {
      const kept = peers.get(key);
      if (kept?.jobs) void mgr.dropInformer(kept.jobs as unknown as ResilientInformer<KubernetesObject>);
      peers.delete(key);
    },
    status: mgr.status,
    events: mgr.events,
    ...(lend ? { lending: lendingDeps(mgr, opts, fleets, peer, (key) => enqueueFleet(key)) } : {}),
    // Every call to a peer runs here, off the workers: a slow peer holds a slot, never a worker.
    effects: { runner: mgr.effects<PeerFleetEffect>('peerfleet'), concurrency: opts.effectConcurrency ?? 4, requeue: (key) => enqueueFleet(key) },
  });
  const queue = mgr.add({ name: 'peerfleet', concurrency: opts.concurrency, reconcile: (key) => reconciler.reconcile(key) });
  enqueueFleet = (key) => queue.add(key);
  const enqueue = (f: PeerFleet) => queue.add(objectKey(f));
  fleets.on('add', enqueue).on('update', enqueue).on('delete', enqueue);
  return reconciler;
}

function lendingDeps(
  mgr: Manager,
  opts: PeerFleetControllerOptions,
  fleets: ResilientInformer<PeerFleet>,
  peer: (access: PeerAccess) => Peer,
  enqueueFleet: (key: string) => void,
): LendingDeps {
  const ns = mgr.watchNamespace;
  const nodes = mgr.informer<V1Node>('/api/v1/nodes');
  const pods = mgr.informer<V1Pod>('/api/v1/pods');
  const mirrors = mgr.informer<V1Job>(ns ? `/apis/batch/v1/namespaces/${ns}/jobs` : '/apis/batch/v1/jobs', { labelSelector: PEERFLEET_LABEL });
  const holders = mgr.informer<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${opts.controllerNamespace}/leases`, { labelSelector: HOLDER_LABEL });
  const namespaces = mgr.informer<V1Namespace>('/api/v1/namespaces', ns ? { fieldSelector: `metadata.name=${ns}` } : {});
  const policies = mgr.informer<V1NetworkPolicy>(ns ? `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies` : '/apis/networking.k8s.io/v1/networkpolicies');
  // Our side changed: every PeerFleet may see a node become busy, idle or free.
  const all = () => {
    for (const f of fleets.list()) enqueueFleet(objectKey(f));
  };
  for (const informer of [pods, mirrors, holders, namespaces, policies] as ResilientInformer<KubernetesObject>[]) {
    informer.on('add', all).on('update', all).on('delete', all);
  }
  nodes.on('add', all).on('delete', all).on('update', (n, old) => {
    if (nodeChangeMatters(n, old)) all();
  });
  // A PeerFleet that comes, goes or selects other nodes changes which nodes
  // are shared: the others give up the holder Leases they kept there.
  fleets.on('add', all).on('delete', all).on('update', (f, old) => {
    if (f.metadata?.generation !== old.metadata?.generation) all();
  });
  return {
    world: (fleet) => {
      const namespace = fleet.metadata?.namespace ?? '';
      const all = nodes.list();
      const selected = lendableNodes(all, fleet.spec.lendableNodes, namespace, opts.policy.tolerate);
      const notOptedIn = notOptedInNodes(all, fleet.spec.lendableNodes, namespace, opts.policy.tolerate);
      const held = new Map<string, V1Lease>();
      for (const n of selected) {
        const lease = holders.get(opts.controllerNamespace, holderLeaseName(n.metadata?.name ?? ''));
        if (lease) held.set(n.metadata?.name ?? '', lease);
      }
      // A dry-run or deleted PeerFleet starts no session: it takes no node from anyone.
      const others = fleets.list().filter((f) => objectKey(f) !== objectKey(fleet) && !f.spec.dryRun && !f.metadata?.deletionTimestamp);
      const shared = sharedNodes(selected, others.map((f) => ({ selector: f.spec.lendableNodes, namespace: f.metadata?.namespace ?? '' })), opts.policy.tolerate);
      return { clusterID: opts.installationID, nodes: selected, notOptedIn, pods: pods.list(), mirrors: mirrors.list(), holders: held, shared };
    },
    podSecurity: (namespace) => {
      const found = namespaces.get(undefined, namespace);
      if (!found) return namespaces.hasSynced() ? null : undefined;
      return found.metadata?.labels?.[POD_SECURITY_LABEL] ?? null;
    },
    egress: (fleet) => {
      const namespace = fleet.metadata?.namespace ?? '';
      // Until the policies were listed, none is known to deny anything.
      if (!policies.hasSynced()) return `the NetworkPolicies of namespace ${namespace} have not been read yet; lending waits for a default deny of egress`;
      return egressRefusal(namespace, fleet.metadata?.name ?? '', policies.list());
    },
    queue: (access) => peer(access).queue,
    peerJobs: (access) => {
      const jobs = peer(access).jobs;
      return jobs?.hasSynced() ? jobs.list() : undefined;
    },
    peerCutOff: (access) => peer(access).cutOff?.message,
    operations: new LendingEffects({ batch: mgr.batch, core: mgr.core, coordination: mgr.coordination, leaseNamespace: opts.controllerNamespace }, opts.policy),
    finalizers: {
      add: (fleet) => mgr.finalizers.add(PEERFLEET_RESOURCE, fleet, LENDING_FINALIZER),
      remove: (fleet) => mgr.finalizers.remove(PEERFLEET_RESOURCE, fleet, LENDING_FINALIZER),
    },
    metrics: new PeerFleetMetrics(mgr.metrics.registry, () => fleets.list()),
  };
}

/** The verdict's message for a peer cut off past its budget: what it held, the budget, what follows, and the fixes. */
export function overBudgetMessage(access: Pick<PeerAccess, 'origin' | 'namespace'>, err: OverBudgetError, budget: PeerBudget, until: number): string {
  return (
    `the watch of the lendable Jobs in namespace ${access.namespace} at ${access.origin} was cut off: ${err.message} ` +
    `(the budget of one peer: ${formatSize(budget.bytes)} and ${budget.objects} Jobs, chart values peerFleet.peerBudget.bytes and .objects); ` +
    `what it held was dropped, nothing more is claimed from this peer and running mirror Jobs finish; it is watched again at ${new Date(until).toISOString().replace(/\.\d{3}Z$/, 'Z')}; ` +
    'keep fewer or smaller lendable Jobs in the peer namespace, or ask an admin to raise the budget'
  );
}

/** The peer's API server as a remote cluster: its name (metrics, logs) is the PeerFleet's key. */
function remoteOf(access: PeerAccess): RemoteCluster {
  return { name: `peer:${access.fleetKey}`, server: access.origin, token: access.token, caPEM: access.caPEM };
}
