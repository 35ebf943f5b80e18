import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { makeCountingClient } from './client.js';
import { Metrics } from './metrics.js';

/** An API server that answers every GET with an empty Secret and counts the connections it accepted. */
async function countingServer(): Promise<{ server: Server; url: string; connections: () => number; open: () => number }> {
  let connections = 0;
  let open = 0;
  const server = createServer((req, res) => {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'x', namespace: 'ns' } }));
  });
  // Like kube-apiserver (90 s), the server keeps idle connections for longer than the client does.
  server.keepAliveTimeout = 90_000;
  server.on('connection', (socket) => {
    connections++;
    open++;
    socket.on('close', () => open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections, open: () => open };
}

function kubeConfig(server: string, clientKey: string): KubeConfig {
  const kc = new KubeConfig();
  loadInto(kc, server, clientKey);
  return kc;
}

function loadInto(kc: KubeConfig, server: string, clientKey: string): void {
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't', keyData: Buffer.from(clientKey).toString('base64'), certData: Buffer.from('cert').toString('base64') }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
}

describe('makeCountingClient', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
    server = undefined;
  });

  it('sends its requests over one kept-alive connection, not one connection per request', async () => {
    const api = await countingServer();
    server = api.server;
    const metrics = new Metrics({ defaultMetrics: false });
    const core = makeCountingClient(kubeConfig(api.url, 'key-1'), CoreV1Api, metrics);
    for (let i = 0; i < 5; i++) await core.readNamespacedSecret({ namespace: 'ns', name: 'x' });
    await Promise.all(Array.from({ length: 3 }, () => core.readNamespacedSecret({ namespace: 'ns', name: 'x' })));
    expect(api.connections()).toBeLessThanOrEqual(3);
    const requests = await metrics.registry.getSingleMetricAsString('leasehold_kube_requests_total');
    expect(requests).toContain('leasehold_kube_requests_total{client="controller",verb="GET"} 8');
  });

  it('opens a new connection when the kubeconfig\'s client credentials change', async () => {
    const api = await countingServer();
    server = api.server;
    const kc = kubeConfig(api.url, 'key-1');
    const core = makeCountingClient(kc, CoreV1Api, new Metrics({ defaultMetrics: false }));
    await core.readNamespacedSecret({ namespace: 'ns', name: 'x' });
    await core.readNamespacedSecret({ namespace: 'ns', name: 'x' });
    expect(api.connections()).toBe(1);
    loadInto(kc, api.url, 'key-2');
    await core.readNamespacedSecret({ namespace: 'ns', name: 'x' });
    await core.readNamespacedSecret({ namespace: 'ns', name: 'x' });
    expect(api.connections()).toBe(2);
  });

  it('closes a connection that has been idle for idleConnectionMs, before the API server would', async () => {
    const api = await countingServer();
    server = api.server;
    const core = makeCountingClient(kubeConfig(api.url, 'key-1'), CoreV1Api, new Metrics({ defaultMetrics: false }), 'controller', 200);
    await core.readNamespacedSecret({ namespace: 'ns', name: 'x' });
    expect(api.connections()).toBe(1);
    const deadline = Date.now() + 10_000;
    while (api.open() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(api.open()).toBe(0);
    await core.readNamespacedSecret({ namespace: 'ns', name: 'x' });
    expect(api.connections()).toBe(2);
  });
});
