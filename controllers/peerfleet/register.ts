// Wires the PeerFleet controller (readiness only, for now): an informer on
// PeerFleets in the watched namespace, one reconcile per fleet, and one peer
// client per fleet, kept while its origin, token and CA stay the same.
import { createHash } from 'node:crypto';
import { PEERFLEET_RESOURCE, type PeerFleet } from '../../src/api/index.js';
import type { Manager } from '../../src/kube/manager.js';
import { objectKey, resourcePath } from '../../src/kube/resource.js';
import { secretDataReader } from '../../src/kube/secrets.js';
import { KubePeerQueue } from '../../src/providers/peerqueue/kube.js';
import { PeerFleetReconciler, type PeerAccess, type PeerProbe } from './reconciler.js';

export function registerPeerFleetController(mgr: Manager): PeerFleetReconciler {
  const fleets = mgr.informer<PeerFleet>(resourcePath(PEERFLEET_RESOURCE, mgr.watchNamespace));
  const peers = new Map<string, { fingerprint: string; queue: PeerProbe }>();
  const peer = (access: PeerAccess): PeerProbe => {
    // A hash, so that no token is kept beside the client that already holds it.
    const fingerprint = createHash('sha256').update(JSON.stringify([access.origin, access.namespace, access.token, access.caPEM ?? ''])).digest('hex');
    const kept = peers.get(access.fleetKey);
    if (kept?.fingerprint === fingerprint) return kept.queue;
    const queue = new KubePeerQueue({
      name: `peer:${access.fleetKey}`,
      server: access.origin,
      token: access.token,
      caPEM: access.caPEM,
      namespace: access.namespace,
      metrics: mgr.metrics,
    });
    peers.set(access.fleetKey, { fingerprint, queue });
    return queue;
  };
  const reconciler = new PeerFleetReconciler({
    fleets,
    secrets: secretDataReader(mgr.core),
    peer,
    forget: (key) => peers.delete(key),
    status: mgr.status,
    events: mgr.events,
  });
  const queue = mgr.add({ name: 'peerfleet', concurrency: 2, reconcile: (key) => reconciler.reconcile(key) });
  const enqueue = (f: PeerFleet) => queue.add(objectKey(f));
  fleets.on('add', enqueue);
  fleets.on('update', enqueue);
  fleets.on('delete', enqueue);
  return reconciler;
}
