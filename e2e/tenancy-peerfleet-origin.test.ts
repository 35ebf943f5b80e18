// Tenancy, PeerFleet origin: a namespace user with leasehold.dev "*" in
// their own namespace and nothing else tries to have the controller carry a
// peer bearer token to a server of their choosing, or read a Secret of
// another namespace. The controller runs with the chart's RBAC and the
// chart's admission policy is in force; the admin listed one peer origin.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { startController, type ControllerProcess } from './support/controller.js';
import { chartIdentity } from './support/helm.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor, type Kubectl } from './support/kube.js';
import { chartAdmission, namespaceUser, removeChartClusterObjects } from './support/tenancy.js';

const kubectl = testKubectl();
const TOKEN = 'peer-token-value-that-must-stay-here';
let ns: string;
let victim: string;
let release: string;
let tenant: Kubectl;
let controller: ControllerProcess;

const pki = (file: string) => readFile(join(process.env.E2E_CP_DIR!, 'pki', file), 'utf8');

/**
 * A loopback HTTPS server (the test control plane's serving certificate)
 * that counts the requests reaching it and answers 404: it is no API server.
 */
async function countingServer(): Promise<{ server: Server; url: string; requests: () => number }> {
  let requests = 0;
  const server = createServer({ cert: await pki('serving.crt'), key: await pki('serving.key') }, (_req, res) => {
    requests++;
    res.statusCode = 404;
    res.end();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
    resolve({ server, url, requests: () => requests });
  }));
}
let listed: Awaited<ReturnType<typeof countingServer>>;
let unlisted: Awaited<ReturnType<typeof countingServer>>;

const fleet = (name: string, spec: Record<string, unknown>) => JSON.stringify({
  apiVersion: 'leasehold.dev/v1alpha1',
  kind: 'PeerFleet',
  metadata: { name, namespace: ns },
  spec: { namespace: 'queue', credentialSecretRef: { name: 'peer-token' }, caSecretRef: { name: 'peer-ca' }, lendableNodes: { matchLabels: { 'leasehold.dev/pool': 'lendable' } }, pricePerGPUHour: 2, pollInterval: '5s', ...spec },
});

const verdict = (name: string, code: string) => waitFor(`PeerFleet ${name} verdict ${code}`, async () => {
  const f = await getJSON(kubectl, ['-n', ns, 'peerfleet.leasehold.dev', name]);
  return f?.status?.verdict?.code === code ? f : undefined;
}, 90_000, 250);

beforeAll(async () => {
  [ns, victim] = await Promise.all([freshNamespace(kubectl, 'pf-origin'), freshNamespace(kubectl, 'pf-victim')]);
  release = `pfo-${Date.now().toString(36)}`;
  await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted']);
  [listed, unlisted] = await Promise.all([countingServer(), countingServer()]);
  // The admin's Secrets: the team's own token, and another team's.
  for (const n of [ns, victim]) await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-token', namespace: n }, stringData: { token: TOKEN } }));
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-ca', namespace: ns }, stringData: { 'ca.crt': await pki('ca.crt') } }));
  tenant = await namespaceUser(kubectl, ns, 'team-origin');
  const set = [`watchNamespace=${ns}`, `secretNamespaces={${ns},${victim}}`];
  await chartAdmission(kubectl, release, ns, set);
  const kubeconfig = await chartIdentity({ kubectl, release, namespace: ns, set, file: join(process.env.E2E_CP_DIR!, `${release}.kubeconfig`) });
  controller = await startController(kubeconfig, ['--watch-namespace', ns, '--namespace', ns, '--leader-election-namespace', ns,
    '--allowed-peer-origins', listed.url]);
}, 120_000);

afterAll(async () => {
  await controller?.stop();
  listed?.server.close();
  unlisted?.server.close();
  await removeChartClusterObjects(kubectl, release);
});

describe('a namespace user and the PeerFleet origin', () => {
  it('the user may write PeerFleets in their namespace, and nothing of the kind elsewhere', async () => {
    expect((await tenant(['auth', 'can-i', 'create', 'peerfleets.leasehold.dev', '-n', ns])).stdout.trim()).toBe('yes');
    expect((await tenant(['auth', 'can-i', 'create', 'peerfleets.leasehold.dev', '-n', victim])).stdout.trim()).toBe('no');
    expect((await tenant(['auth', 'can-i', 'get', 'secrets', '-n', ns])).stdout.trim()).toBe('no');
  });

  it('a Secret reference naming another namespace is refused at apply, with the reason', async () => {
    const r = await tenant(['apply', '-f', '-'], fleet('steal', { origin: listed.url, credentialSecretRef: { name: 'peer-token', namespace: victim } }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('spec.credentialSecretRef.namespace is not allowed: the Secret must be in the namespace of this object');
    expect(await getJSON(kubectl, ['-n', ns, 'peerfleet.leasehold.dev', 'steal'])).toBeUndefined();
  });

  it('an origin the admin did not list gets EndpointNotAllowed, and that server never hears from the controller', async () => {
    const ok = await tenant(['apply', '-f', '-'], fleet('exfil', { origin: unlisted.url }));
    expect(ok.code).toBe(0);
    // The control: the listed origin is asked (it answers 404, so the verdict is PeerUnreachable).
    expect((await tenant(['apply', '-f', '-'], fleet('control', { origin: listed.url }))).code).toBe(0);
    const f = await verdict('exfil', 'EndpointNotAllowed');
    await verdict('control', 'PeerUnreachable');
    await waitFor('the listed origin polled twice', async () => listed.requests() >= 2, 60_000, 250);
    expect(f.status.verdict.failureClass).toBe('config');
    const ready = f.status.conditions.find((c: { type: string }) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'EndpointNotAllowed' });
    expect(ready.message).toContain(`spec.origin ${unlisted.url} is not an endpoint the admin allowed (allowed: ${listed.url})`);
    expect(ready.message).toContain('peerFleet.allowedOrigins');
    expect(unlisted.requests()).toBe(0);
    const events = await getJSON(kubectl, ['-n', ns, 'events', '--field-selector', 'involvedObject.name=exfil']);
    expect(events.items.map((e: { reason: string }) => e.reason)).toContain('EndpointNotAllowed');
    expect(JSON.stringify(events) + JSON.stringify(f)).not.toContain(TOKEN);
  });

  it('an unlisted origin stays unreached when the user edits the spec again', async () => {
    const again = await tenant(['apply', '-f', '-'], fleet('exfil', { origin: `${unlisted.url}/api`, pollInterval: '6s' }));
    expect(again.code).toBe(0);
    await waitFor('the new generation judged', async () => {
      const f = await getJSON(kubectl, ['-n', ns, 'peerfleet.leasehold.dev', 'exfil']);
      return f?.status?.observedGeneration === f?.metadata?.generation && f.status.verdict.code === 'EndpointNotAllowed';
    }, 60_000, 250);
    expect(unlisted.requests()).toBe(0);
  });
});
