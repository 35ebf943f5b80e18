import { afterEach, describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { Manager } from './manager.js';
import { clusterClients, remoteKubeConfig } from './clients.js';
import { Metrics } from './metrics.js';
import { waitFor } from './testing/wait.js';

// Nothing listens on port 1: every list fails, so no informer here ever syncs.
function unreachable(name: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name, server: 'http://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name }],
    contexts: [{ name, cluster: name, user: name }],
    currentContext: name,
  });
  return kc;
}

const managers: Manager[] = [];
function manager(): Manager {
  const mgr = new Manager({ kubeConfig: unreachable('local'), log: pino({ level: 'silent' }), identity: 'test', metricsAddr: '127.0.0.1:0' });
  managers.push(mgr);
  return mgr;
}
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.stop()));
});

const until = (cond: () => boolean, what: string) => waitFor(what, async () => cond(), 20_000, 20);

describe('Manager informers', () => {
  it('a remote cluster that never answers holds back neither readiness nor the workers', async () => {
    const mgr = manager();
    const peer = clusterClients('peer', remoteKubeConfig({ name: 'peer', server: 'https://127.0.0.1:1', token: 't' }), new Metrics({ defaultMetrics: false }));
    const remote = mgr.informer('/apis/batch/v1/namespaces/q/jobs', { cluster: peer, labelSelector: 'leasehold.dev/lendable=true' });
    const seen: string[] = [];
    const queue = mgr.add({ name: 'test', concurrency: 1, reconcile: async (key) => void seen.push(key) });
    await mgr.start();
    queue.add('a/b');
    await until(() => seen.includes('a/b'), 'the reconcile of a/b');
    expect(mgr.synced()).toBe(true);
    expect(remote.hasSynced()).toBe(false);
  });

  it('an informer on our own cluster gates readiness until it syncs', async () => {
    const mgr = manager();
    const nodes = mgr.informer('/api/v1/nodes');
    const seen: string[] = [];
    const queue = mgr.add({ name: 'test', concurrency: 1, reconcile: async (key) => void seen.push(key) });
    // Without leader election start() leads at once, then waits for the gating informers.
    void mgr.start();
    queue.add('a/b');
    await until(() => nodes.stats.restarts > 0, 'a failed list of nodes');
    expect(mgr.synced()).toBe(false);
    expect(seen).toEqual([]);
  });

  it('shares one informer per cluster, path and selectors, and starts one asked for after start', async () => {
    const mgr = manager();
    const a = mgr.informer('/api/v1/nodes', { labelSelector: 'x=1', gates: false });
    expect(mgr.informer('/api/v1/nodes', { labelSelector: 'x=1', gates: false })).toBe(a);
    expect(mgr.informer('/api/v1/nodes', { labelSelector: 'x=2', gates: false })).not.toBe(a);
    await mgr.start();
    const late = mgr.informer('/api/v1/pods', { gates: false });
    await until(() => late.stats.lists + late.stats.restarts > 0, 'the late informer to try a list');
    await mgr.dropInformer(late);
    expect(mgr.informer('/api/v1/pods', { gates: false })).not.toBe(late);
  });
});
