// A peer API server a test scripts to misbehave, served over https as a real
// peer is (the controller never sends a token over plain http), and the
// PeerFleets of a namespace that watch its queues with its token and CA.
import { mkdtempSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePKI } from '../cluster/pki.js';
import { apply, type Kubectl } from './kube.js';

export interface HostilePeer {
  origin: string;
  ca: string;
  close(): Promise<void>;
}

/**
 * Answers Job requests of namespace `queue` with `answer` when they carry
 * `token` and `accepts(queue)`; anything else is a 404 Status, as from an API
 * server that has no such namespace.
 */
export async function startHostilePeer(token: string, accepts: (queue: string) => boolean, answer: (queue: string, req: IncomingMessage, res: ServerResponse) => void): Promise<HostilePeer> {
  const pki = mkdtempSync(join(tmpdir(), 'leasehold-hostile-peer-'));
  await generatePKI(pki);
  const server: Server = createServer({ cert: readFileSync(join(pki, 'serving.crt')), key: readFileSync(join(pki, 'serving.key')) }, (req, res) => {
    const queue = /^\/apis\/batch\/v1\/namespaces\/([^/]+)\/jobs(\?|$)/.exec(req.url ?? '')?.[1];
    if (!queue || !accepts(queue) || req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code: 404, reason: 'NotFound', message: 'not found' }));
      return;
    }
    answer(queue, req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    origin: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ca: readFileSync(join(pki, 'ca.crt'), 'utf8'),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The token and CA Secrets in `namespace`, then one PeerFleet per entry, in order, each watching its queue and selecting no node. */
export async function hostilePeerFleets(kubectl: Kubectl, namespace: string, peer: HostilePeer, token: string, fleets: readonly { name: string; queue: string }[]): Promise<void> {
  await apply(kubectl, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-token', namespace }, stringData: { token } });
  await apply(kubectl, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-ca', namespace }, stringData: { 'ca.crt': peer.ca } });
  for (const f of fleets) {
    await apply(kubectl, {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'PeerFleet',
      metadata: { name: f.name, namespace },
      spec: {
        origin: peer.origin,
        namespace: f.queue,
        credentialSecretRef: { name: 'peer-token' },
        caSecretRef: { name: 'peer-ca' },
        lendableNodes: { matchLabels: { 'leasehold.dev/pool': 'hostile-peer-none' } },
        pricePerGPUHour: 1,
        pollInterval: '5s',
      },
    });
  }
}
