// Finding 1 of the tenancy review, RunnerTarget side: a namespace user with
// leasehold.dev "*" in their own namespace, and nothing else, tries to have
// the controller send a credential somewhere of their choosing. The
// controller runs with the chart's own RBAC and admission policy. A Secret
// reference into another namespace is refused at admission; an endpoint the
// admin did not list stops the target (EndpointNotAllowed) before any Secret
// is read, and the tenant's server hears nothing (and such a target, never
// having launched anything, goes at once when deleted); an allowed endpoint that
// redirects to the tenant's server never delivers the credential there.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGceEmulator, type GceEmulator } from './fakes/gce/server.js';
import { startGitHubEmulator, type GitHubEmulator } from './fakes/github/server.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, getJSON, testKubectl, waitFor } from './support/kube.js';
import { condition, targetSpec } from './support/runnertarget.js';
import { chartInstall, makeTenant, type ChartInstall, type Tenant } from './support/tenancy.js';
import { runnerTargetManifest } from './support/builders.js';

const kubectl = testKubectl();
let gce: GceEmulator;
let gh: GitHubEmulator;
let tenant: Tenant;
let install: ChartInstall;
let controller: ControllerProcess;
/** The tenant's own server: it must never be asked anything. */
let tenantServer: Server;
let tenantURL: string;
const heard: IncomingMessage[] = [];
/** A listed endpoint that answers every request with a redirect to the tenant's server. */
let redirector: Server;
let redirectURL: string;

async function listen(answer: Parameters<typeof createServer>[1]): Promise<[Server, string]> {
  const server = createServer(answer);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return [server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`];
}

async function target(name: string, over: { github?: object; gce?: object } = {}): Promise<void> {
  const base = targetSpec(gce, gh, 'app') as any;
  const spec = { ...base, github: { ...base.github, ...over.github }, gce: { ...base.gce, ...over.gce } };
  const r = await tenant.kubectl(['apply', '-f', '-'], JSON.stringify(runnerTargetManifest(name, undefined, spec)));
  if (r.code !== 0) throw new Error(`tenant apply ${name}: ${r.stderr}`);
}

const notReady = (name: string, reason: string) =>
  waitFor(`RunnerTarget ${name} Ready=False ${reason}`, async () => {
    const c = condition(await getJSON(kubectl, ['runnertarget', name, '-n', tenant.ns]), 'Ready');
    return c?.status === 'False' && c.reason === reason ? c : undefined;
  }, 90_000);

beforeAll(async () => {
  [gce, gh] = await Promise.all([startGceEmulator(), startGitHubEmulator()]);
  [tenantServer, tenantURL] = await listen((req, res) => {
    heard.push(req);
    res.end('{}');
  });
  [redirector, redirectURL] = await listen((req, res) => {
    res.writeHead(307, { location: `${tenantURL}${req.url}` });
    res.end();
  });
  tenant = await makeTenant(kubectl, 'rt-endpoints', 'team-endpoints');
  // The team's own credentials, put in their namespace by whoever manages its Secrets.
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gh-token', namespace: tenant.ns }, stringData: { token: gh.token } }));
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gce-key', namespace: tenant.ns }, stringData: { 'key.json': JSON.stringify(gce.serviceAccountKey) } }));
  install = await chartInstall(kubectl, 'rtep', tenant.ns);
  // The admin listed the emulators and the redirecting server, never the tenant's server.
  controller = await startController(install.kubeconfig, ['--no-leader-elect', '--namespace', install.ns, '--watch-namespace', tenant.ns,
    '--allow-loopback-endpoints', '--allowed-github-endpoints', `${gh.url},${redirectURL}`, '--allowed-gce-endpoints', `${gce.url},${redirectURL}`, '--allowed-gce-token-endpoints', gce.tokenUrl]);
}, 120_000);

afterAll(async () => {
  await controller?.stop();
  await install?.remove();
  if (tenant) {
    const names = ((await getJSON(kubectl, ['runnertargets', '-n', tenant.ns]))?.items ?? []).map((t: any) => t.metadata.name);
    for (const n of names) await kubectl(['patch', 'runnertarget', n, '-n', tenant.ns, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
    await kubectl(['delete', 'namespace', tenant.ns, '--wait=false']);
  }
  for (const s of [tenantServer, redirector]) await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
  await gce?.stop();
  await gh?.stop();
});

describe('a RunnerTarget written by a namespace user', () => {
  it('cannot name a Secret in another namespace: kubectl apply is refused with the reason', async () => {
    const spec = targetSpec(gce, gh, 'app') as any;
    spec.github.tokenSecretRef = { name: 'gh-token', namespace: 'kube-system' };
    const r = await tenant.kubectl(['apply', '-f', '-'], JSON.stringify(runnerTargetManifest('elsewhere', undefined, spec)));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('spec.github.tokenSecretRef.namespace is not allowed');
    expect(r.stderr).toContain('the Secret must be in the namespace of this object');
  });

  it('stops with EndpointNotAllowed when it names a GitHub or Compute Engine endpoint the admin did not list, and the tenant server hears nothing', async () => {
    const gceBefore = gce.requests.length;
    await target('own-github', { github: { apiURL: tenantURL } });
    await target('own-compute', { gce: { endpoint: `${tenantURL}/compute/v1` } });
    const github = await notReady('own-github', 'EndpointNotAllowed');
    expect(github.message).toContain(`spec.github.apiURL ${tenantURL} is not an endpoint the admin allowed`);
    expect(github.message).toContain('runnerTarget.allowedEndpoints.github');
    const compute = await notReady('own-compute', 'EndpointNotAllowed');
    expect(compute.message).toContain(`spec.gce.endpoint ${tenantURL}/compute/v1 is not an endpoint the admin allowed`);
    expect(compute.message).toContain('runnerTarget.allowedEndpoints.gce');
    expect(heard).toHaveLength(0);
    // Refused before any call: not even the listed Compute Engine was asked for a token.
    expect(gce.requests.length).toBe(gceBefore);
  });

  it('goes at once when deleted while refused, having never launched anything', async () => {
    await target('refused-deleted', { github: { apiURL: tenantURL } });
    await notReady('refused-deleted', 'EndpointNotAllowed');
    expect((await getJSON(kubectl, ['runnertarget', 'refused-deleted', '-n', tenant.ns]))?.metadata.finalizers).toContain('leasehold.dev/runner-hosts');
    expect((await tenant.kubectl(['delete', 'runnertarget', 'refused-deleted', '--wait=false'])).code).toBe(0);
    await waitFor('the refused RunnerTarget gone', async () => (await getJSON(kubectl, ['runnertarget', 'refused-deleted', '-n', tenant.ns])) === undefined, 60_000);
    expect(heard).toHaveLength(0);
  });

  it("stops with EndpointNotAllowed when the team's service account key names its own token endpoint, and the tenant server hears nothing", async () => {
    // The key is the team's own, in their namespace; its token_uri is theirs to write too.
    await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gce-key-own-token', namespace: tenant.ns }, stringData: { 'key.json': JSON.stringify({ ...gce.serviceAccountKey, token_uri: `${tenantURL}/token` }) } }));
    await target('own-token', { gce: { credentialsSecretRef: { name: 'gce-key-own-token', key: 'key.json' } } });
    const c = await notReady('own-token', 'EndpointNotAllowed');
    expect(c.message).toContain(`the token_uri of the key in spec.gce.credentialsSecretRef ${tenantURL}/token is not an endpoint the admin allowed`);
    expect(c.message).toContain('runnerTarget.allowedEndpoints.gceToken');
    expect(heard).toHaveLength(0);
  });

  it('never delivers a credential through a redirect from an allowed endpoint', async () => {
    await target('via-redirect-github', { github: { apiURL: redirectURL } });
    await target('via-redirect-compute', { gce: { endpoint: `${redirectURL}/compute/v1` } });
    for (const name of ['via-redirect-github', 'via-redirect-compute']) {
      const c = await notReady(name, 'CheckError');
      expect(c.message).toContain(`answered HTTP 307, a redirect to ${tenantURL}/`);
      expect(c.message).toContain('redirects are not followed');
    }
    expect(heard).toHaveLength(0);
  });
});
