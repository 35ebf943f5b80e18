// Every PeerFleet readiness verdict, produced for real: a peer control plane
// (etcd, kube-apiserver, kube-controller-manager) beside ours, the real
// controller running with the chart's own RBAC (rendered by helm, token minted
// by the TokenRequest API), and each failure made the way a user would make it.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { ControlPlane, freePort } from './cluster/controlplane.js';
import { createPeerCredential, type PeerCredential } from './cluster/peer.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { defaultDenyEgress } from './support/lending.js';
import { chartIdentity } from './support/helm.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';
import { peerFleetManifest } from './support/builders.js';

const kubectl = testKubectl();

let peer: ControlPlane;
let lender: PeerCredential;
let stranger: PeerCredential;
let peerCA: string;
let ns: string;
let locked: string;
let release: string;
let controller: ControllerProcess;
let plainHTTP: Server;
/** A loopback port where nothing listens, listed in the allow-list like the other origins. */
let closedPort: number;

async function must(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

async function secret(namespace: string, name: string, data: Record<string, string>): Promise<void> {
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, stringData: data }));
}

interface FleetOptions {
  origin?: string;
  credential?: { name: string; namespace?: string; key?: string };
  ca?: { name: string; key?: string } | null;
}

async function fleet(name: string, opts: FleetOptions = {}): Promise<void> {
  const spec: Record<string, unknown> = {
    origin: opts.origin ?? peer.info.server,
    namespace: lender.namespace,
    credentialSecretRef: opts.credential ?? { name: 'peer-token' },
    lendableNodes: { matchLabels: { 'leasehold.dev/pool': 'lendable' } },
    pricePerGPUHour: 2,
    pollInterval: '5s',
  };
  if (opts.ca !== null) spec.caSecretRef = opts.ca ?? { name: 'peer-ca' };
  await apply(kubectl, peerFleetManifest(name, ns, spec));
}

async function verdictOf(name: string, code: string, failureClass?: string): Promise<any> {
  return waitFor(`PeerFleet ${name} verdict ${code}`, async () => {
    const f = await getJSON(kubectl, ['-n', ns, 'peerfleets.leasehold.dev', name]);
    const v = f?.status?.verdict;
    return v?.code === code && v.failureClass === failureClass ? f : undefined;
  }, 90_000);
}

function ready(f: any): any {
  return f.status.conditions.find((c: any) => c.type === 'Ready');
}

async function eventReasons(name: string): Promise<string[]> {
  const list = await getJSON(kubectl, ['-n', ns, 'events', '--field-selector', `involvedObject.name=${name}`]);
  return list.items.map((e: any) => e.reason);
}

beforeAll(async () => {
  [peer, ns] = await Promise.all([ControlPlane.start({ name: 'peer', controllers: true }), freshNamespace(kubectl, 'pf-verdict')]);
  locked = await freshNamespace(kubectl, 'pf-locked');
  // Mirror Jobs run in the PeerFleet's namespace: lending needs it restricted.
  await must(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted']);
  await apply(kubectl, JSON.stringify(defaultDenyEgress(ns)));
  release = `pfv-${randomBytes(3).toString('hex')}`;
  lender = await createPeerCredential(peer, { namespace: 'queue' });
  // A valid peer token whose rights are in another namespace: 403 on the queue.
  stranger = await createPeerCredential(peer, { namespace: 'elsewhere', serviceAccount: 'stranger' });
  peerCA = await readFile(join(peer.info.dir, 'pki', 'ca.crt'), 'utf8');
  await secret(ns, 'peer-token', { token: lender.token });
  await secret(ns, 'peer-ca', { 'ca.crt': peerCA });
  plainHTTP = createServer((_, res) => res.end('plain http')).listen(0, '127.0.0.1');
  await new Promise((r) => plainHTTP.once('listening', r));
  // The chart's own RBAC for a namespaced install in ns.
  const kubeconfig = await chartIdentity({
    kubectl,
    release,
    namespace: ns,
    set: [`watchNamespace=${ns}`, `secretNamespaces={${ns}}`],
    file: join(process.env.E2E_CP_DIR!, `${release}.kubeconfig`),
  });
  closedPort = await freePort();
  const origins = [peer.info.server, `https://127.0.0.1:${closedPort}`, `https://127.0.0.1:${(plainHTTP.address() as { port: number }).port}`];
  // One PeerFleet per verdict, all in this namespace: more than the default cap per namespace serves, as an admin would raise it.
  controller = await startController(kubeconfig, ['--watch-namespace', ns, '--namespace', ns, '--leader-election-namespace', ns, '--allowed-peer-origins', origins.join(','), '--max-peerfleets-per-namespace', '0']);
}, 300_000);

afterAll(async () => {
  await controller?.stop();
  plainHTTP?.close();
  await must(['delete', 'clusterrole,clusterrolebinding', '-l', `app.kubernetes.io/instance=${release}`, '--ignore-not-found']).catch(() => undefined);
  await peer?.stop();
});

describe('PeerFleet readiness verdicts', () => {
  it('Ready: the peer answered a namespaced list with our token, and kubectl wait sees it', async () => {
    await fleet('good');
    await must(['wait', '-n', ns, '--for=condition=Ready', '--timeout=90s', 'peerfleet.leasehold.dev/good']);
    const f = await verdictOf('good', 'Ready');
    expect(f.status.verdict).toMatchObject({ ready: true, reasons: [] });
    expect(ready(f)).toMatchObject({ status: 'True', reason: 'Ready', observedGeneration: f.metadata.generation });
    expect(f.status.observedGeneration).toBe(f.metadata.generation);
    expect(await waitFor('Ready event', async () => (await eventReasons('good')).includes('Ready'))).toBe(true);
  });

  it('PeerRefused: a token the peer does not know (401)', async () => {
    await secret(ns, 'garbage-token', { token: 'not-a-token' });
    await fleet('garbage', { credential: { name: 'garbage-token' } });
    const f = await verdictOf('garbage', 'PeerRefused');
    expect(ready(f)).toMatchObject({ status: 'False', reason: 'PeerRefused' });
    expect(ready(f).message).toMatch(/401.*kubectl --context <peer> -n queue create token/);
    expect(await waitFor('PeerRefused event', async () => (await eventReasons('garbage')).includes('PeerRefused'))).toBe(true);
  });

  it('PeerRefused: a peer token without list rights in the queue namespace (403)', async () => {
    await secret(ns, 'stranger-token', { token: stranger.token });
    await fleet('stranger', { credential: { name: 'stranger-token' } });
    const f = await verdictOf('stranger', 'PeerRefused');
    expect(ready(f).message).toMatch(/403.*create role leasehold-lender/);
  });

  it('SecretAbsent: the credential Secret does not exist', async () => {
    await fleet('no-secret', { credential: { name: 'missing' } });
    const f = await verdictOf('no-secret', 'SecretAbsent');
    expect(ready(f).message).toContain(`kubectl -n ${ns} create secret generic missing --from-literal=token=`);
  });

  it('KeyAbsent: the Secret has no such key', async () => {
    await secret(ns, 'wrong-key', { password: lender.token });
    await fleet('no-key', { credential: { name: 'wrong-key' } });
    const f = await verdictOf('no-key', 'KeyAbsent');
    expect(ready(f).message).toMatch(/has no non-empty key token/);
  });

  it('a credential Secret in another namespace is refused at apply, with the reason', async () => {
    await secret(locked, 'peer-token', { token: lender.token });
    const r = await kubectl(['apply', '-f', '-'], JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1', kind: 'PeerFleet', metadata: { name: 'locked', namespace: ns },
      spec: { origin: peer.info.server, namespace: lender.namespace, credentialSecretRef: { name: 'peer-token', namespace: locked }, lendableNodes: { matchLabels: { 'leasehold.dev/pool': 'lendable' } }, pricePerGPUHour: 2 },
    }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('spec.credentialSecretRef.namespace is not allowed: the Secret must be in the namespace of this object');
  });

  it('PeerUnreachable infra_down: nothing listens at the origin', async () => {
    await fleet('closed', { origin: `https://127.0.0.1:${closedPort}` });
    const f = await verdictOf('closed', 'PeerUnreachable', 'infra_down');
    expect(ready(f).message).toMatch(/ECONNREFUSED/);
  });

  it('PeerUnreachable config: the peer certificate is not signed by the CA we were given', async () => {
    await secret(ns, 'our-ca', { 'ca.crt': await readFile(join(process.env.E2E_CP_DIR!, 'pki', 'ca.crt'), 'utf8') });
    await fleet('wrong-ca', { ca: { name: 'our-ca' } });
    await verdictOf('wrong-ca', 'PeerUnreachable', 'config');
    await fleet('no-ca', { ca: null });
    const f = await verdictOf('no-ca', 'PeerUnreachable', 'config');
    expect(ready(f).message).toMatch(/spec.caSecretRef/);
  });

  it('PeerUnreachable config: an https origin that answers in plain HTTP', async () => {
    const port = (plainHTTP.address() as { port: number }).port;
    await fleet('plain', { origin: `https://127.0.0.1:${port}` });
    await verdictOf('plain', 'PeerUnreachable', 'config');
  });

  it('no status, condition or event carries the token', async () => {
    const all = JSON.stringify(await getJSON(kubectl, ['-n', ns, 'peerfleets.leasehold.dev']));
    const events = JSON.stringify(await getJSON(kubectl, ['-n', ns, 'events']));
    for (const token of [lender.token, stranger.token]) {
      expect(all).not.toContain(token);
      expect(events).not.toContain(token);
    }
  });

  it('a quiet cluster costs no writes: polls go on, the unchanged verdicts are not written again', async () => {
    const before = await controller.writes();
    const probes = await controller.metric('leasehold_kube_requests_total', { client: 'peer' });
    await waitFor('ten more polls of the peers', async () => (await controller.metric('leasehold_kube_requests_total', { client: 'peer' })) >= probes + 10, 60_000);
    expect(await controller.writes()).toBe(before);
  });

  it('turns Ready at the next poll once the missing Secret is created', async () => {
    await secret(ns, 'missing', { token: lender.token });
    await must(['wait', '-n', ns, '--for=condition=Ready', '--timeout=90s', 'peerfleet.leasehold.dev/no-secret']);
    const f = await verdictOf('no-secret', 'Ready');
    expect(f.status.verdict.failureClass).toBeUndefined();
    expect(await waitFor('Ready event after the fix', async () => (await eventReasons('no-secret')).includes('Ready'))).toBe(true);
  });

  it('NamespaceNotRestricted: the namespace loses its restricted Pod Security label, and Ready again once it has it', async () => {
    await must(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=baseline', '--overwrite']);
    const f = await verdictOf('good', 'NamespaceNotRestricted', 'config');
    expect(ready(f).message).toContain(`kubectl label namespace ${ns} pod-security.kubernetes.io/enforce=restricted --overwrite`);
    await must(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted', '--overwrite']);
    await verdictOf('good', 'Ready');
  });
});
