// The Helm chart against the real API server: lint and template, install,
// then the real controller process run with exactly the chart's
// ServiceAccount identity (a TokenRequest token) and the Deployment's own
// flags, through a full Lease lifecycle on an sshd machine. Proves the RBAC
// is enough (no 403 anywhere) and narrow (Secrets outside secretNamespaces
// refused), and that `helm uninstall` leaves no controller object behind
// while the CRDs, and so the Leases, stay.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { startController, type ControllerProcess } from './support/controller.js';
import { chartDir as chart, docs, kubeVersionArgs, testHelm } from './support/helm.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor, type Kubectl } from './support/kube.js';

const kubeconfig = process.env.E2E_KUBECONFIG!;
const binDir = process.env.E2E_BIN_DIR!;
const kubectl = testKubectl();
const { helm, helmOK } = testHelm();
const provider = join(process.cwd(), 'e2e/providers/sshd-machine.sh');
const machines = mkdtempSync(join(tmpdir(), 'leasehold-helm-machines-'));
const work = mkdtempSync(join(tmpdir(), 'leasehold-helm-'));
const suffix = Date.now().toString(36);
const release = `lh-${suffix}`;
const offerName = `helm-box-${suffix}`;
const shortOffer = `helm-short-${suffix}`;

const umbrellaRelease = `um-${suffix}`;
const noPeerRelease = `np-${suffix}`;

let relNS: string; // the release namespace: controller, leader election, its SSH key
let leaseNS: string; // watchNamespace: where the Leases live
let cloudNS: string; // an extra secretNamespaces entry (e.g. where a Lambda API key lives)
let otherNS: string; // a namespace the controller has no business in
let subNS: string; // the chart as a subchart, run as a ServiceAccount made beforehand
let kv: string[]; // --kube-version for helm template and lint
let sa: string;
let token: string;
let tokenKubectl: Kubectl;
let tokenKubeconfig: string;
let ctl: ControllerProcess | undefined;
let installed = false;
let umbrellaInstalled = false;
let noPeerNS: string; // peerFleet.enabled=false: the controller runs without PeerFleet
let noPeerInstalled = false;
let noPeerCtl: ControllerProcess | undefined;

function values(): string[] {
  return [
    '--set', `watchNamespace=${leaseNS}`,
    '--set', `secretNamespaces={${relNS},${cloudNS}}`,
    '--set', 'logLevel=debug',
    '--set', 'checkInterval=1s',
    '--set', 'acquireTimeout=60s',
    '--set', 'maxLeases=2',
    // Ended Leases are deleted at once, so the run exercises the controller's own delete.
    '--set', 'historyLimit=0',
    '--set', 'secretNames={api-key}',
    '--set', 'metrics.networkPolicy.enabled=true',
    '--set-file', `providerScripts.sshd-machine\\.sh=${provider}`,
  ];
}

/** A kubeconfig for the test API server that authenticates as a ServiceAccount, with a fresh token. */
async function serviceAccountKubeconfig(ns: string, account: string, file: string): Promise<{ token: string; path: string }> {
  const t = await kubectl(['-n', ns, 'create', 'token', account, '--duration=1h']);
  expect(t.code).toBe(0);
  const admin = YAML.parse(readFileSync(kubeconfig, 'utf8'));
  const path = join(work, file);
  writeFileSync(path, YAML.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: admin.clusters,
    users: [{ name: account, user: { token: t.stdout.trim() } }],
    contexts: [{ name: 'controller', context: { cluster: admin.clusters[0].name, user: account, namespace: ns } }],
    'current-context': 'controller',
  }), { mode: 0o600 });
  return { token: t.stdout.trim(), path };
}

/** The controller's arguments from a release's Deployment, as startController takes them. */
async function deploymentArgs(rel: string, ns: string): Promise<string[]> {
  const manifest = docs((await helmOK(['get', 'manifest', rel, '-n', ns])).stdout);
  const container = manifest.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0];
  return (container.args as string[])
    .filter((a) => !a.startsWith('--metrics-addr=')) // startController picks a free port
    .map((a) => a.replace('$(POD_NAMESPACE)', ns));
}

/** A GET with the ServiceAccount's bearer token; resolves the HTTP status. */
async function getAsController(path: string): Promise<number> {
  const cfg = YAML.parse(readFileSync(kubeconfig, 'utf8'));
  const cluster = cfg.clusters[0].cluster;
  const url = new URL(path, cluster.server);
  return new Promise((resolve, reject) => {
    const req = request(url, { ca: readFileSync(cluster['certificate-authority']), headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const sshdRunning = () => {
  try {
    return execFileSync('pgrep', ['-f', `${machines}/`]).toString().trim();
  } catch {
    return '';
  }
};

/** Releases every machine left in our machines directory, through the provider itself. */
function releaseLeftovers(): void {
  for (const id of existsSync(machines) ? readdirSync(machines) : []) {
    if (id.startsWith('.')) continue;
    try {
      execFileSync(provider, ['release'], { env: { ...process.env, LEASEHOLD_MACHINES_DIR: machines, LEASEHOLD_LEASE_ID: id, LEASEHOLD_LEASE_STATE: '' }, stdio: 'ignore' });
    } catch {
      // best effort; the assertion below reports what is left
    }
  }
}

beforeAll(async () => {
  relNS = await freshNamespace(kubectl, 'helm-rel');
  leaseNS = await freshNamespace(kubectl, 'helm-leases');
  cloudNS = await freshNamespace(kubectl, 'helm-cloud');
  otherNS = await freshNamespace(kubectl, 'helm-other');
  subNS = await freshNamespace(kubectl, 'helm-sub');
  noPeerNS = await freshNamespace(kubectl, 'helm-nopeer');
  kv = await kubeVersionArgs(kubectl);
});

afterAll(async () => {
  await ctl?.stop();
  await noPeerCtl?.stop();
  await kubectl(['-n', leaseNS, 'delete', 'leases.leasehold.dev', '--all', '--wait=false']);
  releaseLeftovers();
  for (const o of [offerName, shortOffer]) await kubectl(['delete', 'offer.leasehold.dev', o, '--ignore-not-found', '--wait=false']);
  if (installed) await helm(['uninstall', release, '-n', relNS]);
  if (umbrellaInstalled) await helm(['uninstall', umbrellaRelease, '-n', subNS]);
  if (noPeerInstalled) await helm(['uninstall', noPeerRelease, '-n', noPeerNS]);
  // Namespaces stay Terminating without a kube-controller-manager; delete them anyway.
  for (const ns of [relNS, leaseNS, cloudNS, otherNS, subNS, noPeerNS]) if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
});

describe('the Helm chart', () => {
  it('lints, and templates what the brief promises', async () => {
    const lint = await helm(['lint', '--strict', ...kv, chart, ...['--set', 'secretNamespaces={a,b}']]);
    expect({ code: lint.code, out: lint.stdout + lint.stderr }).toEqual({ code: 0, out: expect.stringContaining('0 chart(s) failed') });

    const out = docs((await helmOK(['template', 'leasehold', chart, ...kv, '--namespace', 'leasehold-system', '--set', 'metrics.serviceMonitor.enabled=true,dashboard.enabled=true'])).stdout);
    const byKind = (kind: string) => out.filter((d) => d.kind === kind);
    const dep = byKind('Deployment')[0];
    expect(dep.spec.replicas).toBe(2);
    const pod = dep.spec.template.spec;
    const c = pod.containers[0];
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(c.args).toEqual(expect.arrayContaining(['--leader-election-namespace=$(POD_NAMESPACE)', '--namespace=$(POD_NAMESPACE)', '--max-leases=2', '--acquire-timeout=15m', '--check-interval=1m']));
    expect(c.env.map((e: any) => e.name)).toEqual(expect.arrayContaining(['POD_NAMESPACE', 'POD_NAME']));
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
    expect(c.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    expect(byKind('Service')[0].spec.ports[0].name).toBe('metrics');
    // The PeerFleet metrics' namespace label is kept, not renamed exported_namespace.
    expect(byKind('ServiceMonitor').map((m) => m.spec.endpoints)).toEqual([[{ port: 'metrics', path: '/metrics', interval: '30s', honorLabels: true }]]);
    const dash = byKind('ConfigMap').find((d) => d.metadata.labels?.grafana_dashboard === '1');
    expect(JSON.parse(dash.data['leasehold.json']).title).toBe('Leasehold');

    // Least privilege by default: Secrets only through Roles, only by name
    // (get, plus create for the controller's own key), never cluster-wide;
    // the Lease records in the release namespace are listed and written too.
    const clusterRules = byKind('ClusterRole').flatMap((r) => r.rules);
    expect(clusterRules.some((r: any) => r.resources.includes('secrets') || r.resources.includes('*') || r.verbs.includes('*'))).toBe(false);
    expect(clusterRules).toEqual(expect.arrayContaining([{ apiGroups: ['leasehold.dev'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'patch', 'delete'] }]));
    const secretRoles = byKind('Role').filter((r) => r.rules.some((x: any) => x.resources.includes('secrets')));
    expect(secretRoles.map((r) => r.metadata.namespace)).toEqual(['leasehold-system', 'leasehold-system', 'leasehold-system']);
    const [records, ...byName] = [secretRoles.find((r) => r.metadata.name.endsWith('-lease-records')), ...secretRoles.filter((r) => !r.metadata.name.endsWith('-lease-records'))];
    expect(records.rules).toEqual([{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'create', 'update', 'delete'] }]);
    for (const r of byName) for (const rule of r.rules) expect(rule.verbs.every((v: string) => v === 'get' || v === 'create')).toBe(true);

    // Two replicas: a drain evicts one at a time.
    expect(byKind('PodDisruptionBudget').map((p) => p.spec)).toEqual([{ maxUnavailable: 1, unhealthyPodEvictionPolicy: 'AlwaysAllow', selector: dep.spec.selector }]);
    expect(byKind('NetworkPolicy')).toEqual([]);
    expect(byKind('ServiceAccount').map((a) => a.metadata.name)).toEqual([pod.serviceAccountName]);

    // Users' roles: aggregated into the built-in ones, never with leases/status.
    const userRoles = byKind('ClusterRole').filter((r) => /-lease-(editor|viewer)$/.test(r.metadata.name));
    expect(userRoles.map((r) => [r.metadata.name, Object.keys(r.metadata.labels).filter((l) => l.startsWith('rbac.authorization.k8s.io/')).sort()])).toEqual([
      ['leasehold-lease-editor', ['rbac.authorization.k8s.io/aggregate-to-admin', 'rbac.authorization.k8s.io/aggregate-to-edit']],
      ['leasehold-lease-viewer', ['rbac.authorization.k8s.io/aggregate-to-view']],
    ]);
    expect(userRoles[0].rules).toEqual([
      { apiGroups: ['leasehold.dev'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
      { apiGroups: ['leasehold.dev'], resources: ['offers'], verbs: ['get', 'list', 'watch'] },
    ]);
    expect(userRoles[1].rules).toEqual([{ apiGroups: ['leasehold.dev'], resources: ['leases', 'offers'], verbs: ['get', 'list', 'watch'] }]);

    // The admission policy exempts exactly this release's ServiceAccount, everywhere (no watchNamespace).
    // One policy per kind whose status and finalizer only the controller may touch.
    const policies = byKind('ValidatingAdmissionPolicy');
    expect(policies.map((p) => [p.metadata.name, p.spec.matchConstraints.resourceRules[0].resources])).toEqual([
      ['leasehold-lease-guard', ['leases', 'leases/status']],
      ['leasehold-peerfleet-guard', ['peerfleets', 'peerfleets/status']],
      ['leasehold-runnertarget-guard', ['runnertargets', 'runnertargets/status']],
    ]);
    for (const policy of policies) {
      expect(policy.spec.matchConditions[0].expression).toBe('request.userInfo.username != "system:serviceaccount:leasehold-system:leasehold"');
    }
    expect(byKind('ValidatingAdmissionPolicyBinding').map((b) => b.spec)).toEqual(policies.map((p) => ({ policyName: p.metadata.name, validationActions: ['Deny'] })));

    // The schema is strict, and the chart refuses two replicas without leader election.
    expect((await helm(['template', 'x', chart, ...kv, '--set', 'nosuchvalue=1'])).code).not.toBe(0);
    expect((await helm(['template', 'x', chart, ...kv, '--set', 'image.nosuch=1'])).code).not.toBe(0);
    expect((await helm(['template', 'x', chart, ...kv, '--set', 'acquireTimeout=soon'])).code).not.toBe(0);
    const noLE = await helm(['template', 'x', chart, ...kv, '--set', 'leaderElection.enabled=false']);
    expect(noLE.stderr).toMatch(/replicas > 1 needs leaderElection/);
  });

  it('renders the optional objects, overrides and an existing ServiceAccount', async () => {
    const render = async (...set: string[]) => docs((await helmOK(['template', 'rel', chart, ...kv, '--namespace', 'ops', ...set])).stdout);
    const kinds = (out: any[]) => out.map((d) => d.kind);

    // The metrics port only, from the peers given.
    const from = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
    const np = (await render('--set', 'metrics.networkPolicy.enabled=true', '--set-json', `metrics.networkPolicy.from=${JSON.stringify(from)}`)).filter((d) => d.kind === 'NetworkPolicy');
    expect(np.map((d) => d.spec)).toEqual([{
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'leasehold', 'app.kubernetes.io/instance': 'rel' } },
      policyTypes: ['Ingress'],
      ingress: [{ ports: [{ port: 'metrics', protocol: 'TCP' }], from }],
    }]);

    // GitHub webhooks: off by default (no flag, port or Service); on, all three, and the NetworkPolicy admits the port.
    const plain = await render();
    expect(plain.filter((d) => d.kind === 'Service').map((d) => d.metadata.name)).toEqual(['rel-leasehold-metrics']);
    expect(plain.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0].args.join(' ')).not.toContain('--github-webhook-port');
    const hooked = await render('--set', 'githubWebhook.enabled=true,githubWebhook.serviceType=LoadBalancer,metrics.networkPolicy.enabled=true');
    const container = hooked.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0];
    expect(container.args).toContain('--github-webhook-port=9443');
    expect(container.ports).toContainEqual({ name: 'github-webhook', containerPort: 9443, protocol: 'TCP' });
    expect(hooked.find((d) => d.kind === 'Service' && d.metadata.name === 'rel-leasehold-github-webhook').spec).toMatchObject({ type: 'LoadBalancer', ports: [{ name: 'github-webhook', port: 9443, targetPort: 'github-webhook', protocol: 'TCP' }] });
    // Deliveries reach only the leader: the Service selects the label the leader puts on its own pod, which it may patch.
    expect(hooked.find((d) => d.kind === 'Service' && d.metadata.name === 'rel-leasehold-github-webhook').spec.selector).toMatchObject({ 'leasehold.dev/leader': 'true' });
    expect(hooked.find((d) => d.kind === 'Role' && d.metadata.name === 'rel-leasehold-leader-pod').rules).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['patch'] }]);
    expect(plain.find((d) => d.kind === 'Role' && d.metadata.name === 'rel-leasehold-leader-pod')).toBeUndefined();
    const single = await render('--set', 'githubWebhook.enabled=true,leaderElection.enabled=false,replicas=1');
    expect(single.find((d) => d.kind === 'Service' && d.metadata.name === 'rel-leasehold-github-webhook').spec.selector).not.toHaveProperty(['leasehold.dev/leader']);
    expect(hooked.find((d) => d.kind === 'NetworkPolicy').spec.ingress).toEqual([{ ports: [{ port: 'metrics', protocol: 'TCP' }] }, { ports: [{ port: 'github-webhook', protocol: 'TCP' }] }]);
    const clash = await helm(['template', 'rel', chart, ...kv, '--set', 'githubWebhook.enabled=true,githubWebhook.port=8080']);
    expect(clash.stderr).toMatch(/githubWebhook\.port is metrics\.port/);
    expect((await helm(['template', 'rel', chart, ...kv, '--set', 'githubWebhook.serviceType=Ingress'])).code).not.toBe(0);

    // One replica: no PodDisruptionBudget (it would guard nothing).
    expect(kinds(await render('--set', 'replicas=1,leaderElection.enabled=false'))).not.toContain('PodDisruptionBudget');

    // An existing ServiceAccount: none made, every binding and the policy name it.
    const existing = await render('--set', 'serviceAccount.create=false,serviceAccount.name=ops-controller');
    expect(kinds(existing)).not.toContain('ServiceAccount');
    expect(existing.find((d) => d.kind === 'Deployment').spec.template.spec.serviceAccountName).toBe('ops-controller');
    const subjects = existing.filter((d) => /Binding$/.test(d.kind) && d.subjects).flatMap((d) => d.subjects);
    expect(subjects.length).toBeGreaterThan(3);
    expect(new Set(subjects.map((x: any) => `${x.kind} ${x.namespace}/${x.name}`))).toEqual(new Set(['ServiceAccount ops/ops-controller']));
    expect(existing.find((d) => d.kind === 'ValidatingAdmissionPolicy').spec.matchConditions[0].expression).toContain('"system:serviceaccount:ops:ops-controller"');
    const unnamed = await helm(['template', 'rel', chart, ...kv, '--set', 'serviceAccount.create=false']);
    expect(unnamed.code).not.toBe(0);
    expect(unnamed.stderr).toMatch(/serviceAccount\.name: name the existing ServiceAccount/);

    // Name overrides, and secretNames narrowing the Secrets Roles.
    const named = await render('--set', 'fullnameOverride=lh,nameOverride=box,secretNamespaces={cloud},secretNames={api-key}');
    expect(named.find((d) => d.kind === 'Deployment').metadata).toMatchObject({ name: 'lh', labels: { 'app.kubernetes.io/name': 'box' } });
    expect(named.filter((d) => d.kind === 'ClusterRole').map((d) => d.metadata.name).sort()).toEqual(['lh', 'lh-lease-editor', 'lh-lease-viewer']);
    expect(named.find((d) => d.kind === 'Role' && d.metadata.namespace === 'cloud').rules).toEqual([{ apiGroups: [''], resources: ['secrets'], resourceNames: ['api-key'], verbs: ['get'] }]);

    // With watchNamespace the policy guards that namespace only; extra exempt subjects are matched.
    const scoped = await render('--set', 'watchNamespace=ml,admissionPolicy.exemptGroups={lease-ops},admissionPolicy.exemptUsers={alice}');
    expect(scoped.find((d) => d.kind === 'ValidatingAdmissionPolicyBinding').spec.matchResources).toEqual({ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ml' } } });
    expect(scoped.find((d) => d.kind === 'ValidatingAdmissionPolicy').spec.matchConditions[1].expression).toBe(
      '!(request.userInfo.username in ["alice"]) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters","lease-ops"]))');
    expect(kinds(await render('--set', 'admissionPolicy.enabled=false,userRoles.enabled=false')).filter((k) => /AdmissionPolicy/.test(k))).toEqual([]);

    // A cluster older than the admission policy API is refused up front.
    const old = await helm(['template', 'rel', chart, '--kube-version', '1.29.9']);
    expect(old.stderr).toMatch(/chart requires kubeVersion: >=1\.30\.0-0 which is incompatible with Kubernetes v1\.29\.9/);
  });

  it('passes each kind\'s reconcile workers from its value, and refuses fewer than one', async () => {
    const args = async (...set: string[]) => (docs((await helmOK(['template', 'rel', chart, ...kv, ...set])).stdout).find((d) => d.kind === 'Deployment').spec.template.spec.containers[0].args as string[])
      .filter((a) => /^--(offer-|peerfleet-|runnertarget-)?concurrency=/.test(a));
    expect(await args()).toEqual(['--concurrency=4', '--offer-concurrency=1', '--peerfleet-concurrency=2', '--runnertarget-concurrency=4']);
    expect(await args('--set', 'concurrency=8,offer.concurrency=3,peerFleet.concurrency=5,runnerTarget.concurrency=6')).toEqual(['--concurrency=8', '--offer-concurrency=3', '--peerfleet-concurrency=5', '--runnertarget-concurrency=6']);
    // The schema names the value and its minimum.
    for (const value of ['concurrency', 'offer.concurrency', 'peerFleet.concurrency', 'runnerTarget.concurrency']) {
      const refused = await helm(['template', 'rel', chart, ...kv, '--set', `${value}=0`]);
      expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 1, stderr: expect.stringContaining(`at '/${value.replace('.', '/')}': minimum: got 0, want 1`) });
    }
  });

  it('sets the heap from the memory limit unless nodeOptions does, and passes the peer budget and the cap per namespace', async () => {
    const container = async (...set: string[]) => docs((await helmOK(['template', 'rel', chart, ...kv, ...set])).stdout).find((d) => d.kind === 'Deployment').spec.template.spec.containers[0];
    const nodeOptions = async (...set: string[]) => ((await container(...set)).env as { name: string; value?: string }[]).find((e) => e.name === 'NODE_OPTIONS')?.value;
    expect(await nodeOptions()).toBe('--max-semi-space-size=2 --max-old-space-size=768');
    expect(await nodeOptions('--set', 'resources.limits.memory=2Gi')).toBe('--max-semi-space-size=2 --max-old-space-size=1536');
    expect(await nodeOptions('--set', 'resources.limits.memory=1500M')).toBe('--max-semi-space-size=2 --max-old-space-size=1072');
    expect(await nodeOptions('--set', 'nodeOptions=--max-old-space-size=300')).toBe('--max-old-space-size=300');
    expect(await nodeOptions('--set', 'resources.limits.memory=null')).toBe('--max-semi-space-size=2');
    const budget = (args: string[]) => args.filter((a) => /^--(peer-budget-|max-peerfleets-)/.test(a));
    expect(budget((await container()).args)).toEqual(['--peer-budget-bytes=32Mi', '--peer-budget-objects=5000', '--peer-budget-retry=10m', '--max-peerfleets-per-namespace=4']);
    expect(budget((await container('--set', 'peerFleet.peerBudget.bytes=64Mi,peerFleet.peerBudget.objects=100,peerFleet.peerBudget.retryAfter=1m,peerFleet.maxPerNamespace=0')).args))
      .toEqual(['--peer-budget-bytes=64Mi', '--peer-budget-objects=100', '--peer-budget-retry=1m', '--max-peerfleets-per-namespace=0']);
    const refused = await helm(['template', 'rel', chart, ...kv, '--set', 'peerFleet.peerBudget.bytes=32MB']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('/peerFleet/peerBudget/bytes');
  });

  it('grants PeerFleet lending exactly what it needs, and none of it with peerFleet.enabled=false', async () => {
    const render = async (...set: string[]) => docs((await helmOK(['template', 'rel', chart, ...kv, '--namespace', 'ops', ...set])).stdout);
    // Every rule as "Kind namespace/name group/resource[names]: verbs", one line per resource.
    const grants = (out: any[]) => new Set(out.filter((d) => d.kind === 'ClusterRole' || d.kind === 'Role').flatMap((r) =>
      (r.rules as any[]).flatMap((rule) => (rule.resources as string[]).flatMap((res) => (rule.apiGroups as string[]).map((g) =>
        `${r.kind} ${r.metadata.namespace ?? ''}/${r.metadata.name} ${g}/${res}${rule.resourceNames ? JSON.stringify(rule.resourceNames) : ''}: ${rule.verbs.join(',')}`)))));
    const minus = (a: Set<string>, b: Set<string>) => [...a].filter((x) => !b.has(x)).sort();
    const args = (out: any[]) => out.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0].args as string[];

    const on = await render();
    const off = await render('--set', 'peerFleet.enabled=false');
    // Exactly the lending reconciler's calls: nodes and pods read cluster-wide;
    // in PeerFleet namespaces (all of them here) its finalizer, mirror Jobs
    // and their ServiceAccount; one coordination Lease per node here.
    expect(minus(grants(on), grants(off))).toEqual([
      'ClusterRole /rel-leasehold /nodes: list,watch',
      'ClusterRole /rel-leasehold /pods: list,watch',
      'ClusterRole /rel-leasehold /serviceaccounts: get,create',
      'ClusterRole /rel-leasehold batch/jobs: get,list,watch,create,delete',
      'ClusterRole /rel-leasehold leasehold.dev/peerfleets: patch',
      'ClusterRole /rel-leasehold networking.k8s.io/networkpolicies: list,watch',
      'Role ops/rel-leasehold-peer-nodes coordination.k8s.io/leases: get,list,watch,create,update,delete',
    ]);
    // Off takes nothing else away and keeps what readiness verdicts need: PeerFleets read, their status written.
    expect(minus(grants(off), grants(on))).toEqual([]);
    expect([...grants(off)].filter((g) => /\/(nodes|pods|jobs|serviceaccounts|peerfleets)\b|-peer-nodes /.test(g)).sort()).toEqual([
      'ClusterRole /rel-leasehold leasehold.dev/peerfleets/status: patch',
      'ClusterRole /rel-leasehold leasehold.dev/peerfleets: list,watch',
    ]);
    expect(off.filter((d) => /Binding$/.test(d.kind)).map((b) => b.metadata.name)).not.toContain('rel-leasehold-peer-nodes');
    // The controller leaves lending out exactly when the chart grants it none of lending's rights.
    expect(args(off)).toContain('--no-peer-lending');
    expect(args(on)).not.toContain('--no-peer-lending');

    // PeerFleet adds no Secret right: none is listed or watched beyond the
    // Lease records' list in the release namespace, as before.
    const secrets = (out: any[]) => [...grants(out)].filter((g) => / \/secrets/.test(g)).sort();
    expect(secrets(on)).toEqual(secrets(off));
    expect(secrets(on).filter((g) => /\b(list|watch)\b/.test(g))).toEqual(['Role ops/rel-leasehold-lease-records /secrets: get,list,create,update,delete']);

    // With watchNamespace, the namespaced PeerFleet rights are a Role there; nodes and pods stay cluster-wide.
    const scopedOn = await render('--set', 'watchNamespace=ml');
    expect(minus(grants(scopedOn), grants(await render('--set', 'watchNamespace=ml,peerFleet.enabled=false')))).toEqual([
      'ClusterRole /rel-leasehold /nodes: list,watch',
      'ClusterRole /rel-leasehold /pods: list,watch',
      'Role ml/rel-leasehold-leases /serviceaccounts: get,create',
      'Role ml/rel-leasehold-leases batch/jobs: get,list,watch,create,delete',
      'Role ml/rel-leasehold-leases leasehold.dev/peerfleets: patch',
      'Role ml/rel-leasehold-leases networking.k8s.io/networkpolicies: list,watch',
      'Role ops/rel-leasehold-peer-nodes coordination.k8s.io/leases: get,list,watch,create,update,delete',
    ]);
    expect((await helm(['template', 'x', chart, ...kv, '--set', 'peerFleet.enabled=maybe'])).code).not.toBe(0);
    expect((await helm(['template', 'x', chart, ...kv, '--set', 'peerFleet.nosuch=1'])).code).not.toBe(0);
  });

  it('installs into a fresh namespace, skipping the CRDs the cluster already has', async () => {
    const r = await helmOK(['install', release, chart, '-n', relNS, ...values()]);
    installed = true;
    expect(r.stdout).toMatch(/kubectl get leases\.leasehold\.dev/);
    expect(r.stdout).toContain(`runs lent Jobs as mirror Jobs\nin the namespace of each PeerFleet (${leaseNS}),`);
    const status = JSON.parse((await helmOK(['status', release, '-n', relNS, '-o', 'json'])).stdout);
    expect(status.info.status).toBe('deployed');
    sa = (await getJSON(kubectl, ['-n', relNS, 'serviceaccount', '-l', `app.kubernetes.io/instance=${release}`])).items[0].metadata.name;
    const cm = await getJSON(kubectl, ['-n', relNS, 'configmap', `${release}-leasehold-providers`]);
    expect(cm.data['sshd-machine.sh']).toBe(readFileSync(provider, 'utf8'));
    const sel = `app.kubernetes.io/instance=${release}`;
    const objects = await kubectl(['get', 'poddisruptionbudgets,networkpolicies', '-n', relNS, '-l', sel, '-o', 'name']);
    expect(objects.stdout.trim().split('\n').sort()).toEqual([`networkpolicy.networking.k8s.io/${release}-leasehold-metrics`, `poddisruptionbudget.policy/${release}-leasehold`]);
    const admission = await kubectl(['get', 'validatingadmissionpolicies,validatingadmissionpolicybindings', '-l', sel, '-o', 'name']);
    const guards = ['lease', 'peerfleet', 'runnertarget'];
    expect(admission.stdout.trim().split('\n').sort()).toEqual([
      ...guards.map((g) => `validatingadmissionpolicy.admissionregistration.k8s.io/${release}-leasehold-${g}-guard`),
      ...guards.map((g) => `validatingadmissionpolicybinding.admissionregistration.k8s.io/${release}-leasehold-${g}-guard`),
    ]);
  }, 60_000);

  it('gives the ServiceAccount Secrets only in secretNamespaces, by name', async () => {
    ({ token, path: tokenKubeconfig } = await serviceAccountKubeconfig(relNS, sa, 'controller.kubeconfig'));
    tokenKubectl = testKubectl(tokenKubeconfig, binDir);
    const whoami = await tokenKubectl(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']);
    expect(whoami.stdout).toBe(`system:serviceaccount:${relNS}:${sa}`);

    for (const ns of [cloudNS, otherNS]) {
      await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'api-key', namespace: ns }, stringData: { key: 'k' } }));
    }
    const can = async (...args: string[]) => (await tokenKubectl(['auth', 'can-i', ...args])).stdout.trim();
    expect(await can('get', 'secrets/api-key', '-n', cloudNS)).toBe('yes');
    expect(await can('get', 'secrets/other-key', '-n', cloudNS)).toBe('no'); // not in secretNames
    expect(await can('get', 'secrets/api-key', '-n', otherNS)).toBe('no');
    expect(await can('get', 'secrets', '-n', leaseNS)).toBe('no');
    expect(await can('list', 'secrets', '-n', cloudNS)).toBe('no');
    expect(await can('watch', 'secrets', '-n', relNS)).toBe('no');
    expect(await can('list', 'secrets', '--all-namespaces')).toBe('no');
    // The Lease records: written in the release namespace only.
    expect(await can('update', 'secrets', '-n', relNS)).toBe('yes');
    expect(await can('update', 'secrets', '-n', cloudNS)).toBe('no');
    expect(await getAsController(`/api/v1/namespaces/${cloudNS}/secrets/api-key`)).toBe(200);
    expect(await getAsController(`/api/v1/namespaces/${otherNS}/secrets/api-key`)).toBe(403);
    expect(await getAsController(`/api/v1/namespaces/${cloudNS}/secrets`)).toBe(403);
    // Leases only in watchNamespace; Offers cluster-wide, read-only but for status.
    expect(await can('watch', 'leases.leasehold.dev', '-n', leaseNS)).toBe('yes');
    expect(await can('list', 'leases.leasehold.dev', '-n', otherNS)).toBe('no');
    expect(await can('list', 'offers.leasehold.dev')).toBe('yes');
    expect(await can('delete', 'offers.leasehold.dev')).toBe('no');
    // Coordination Leases: leader election and PeerFleet's per-node holders,
    // in the release namespace only.
    expect(await can('update', 'leases.coordination.k8s.io/leasehold-peer-node-a', '-n', relNS)).toBe('yes');
    expect(await can('update', 'leases.coordination.k8s.io/leasehold-peer-node-a', '-n', leaseNS)).toBe('no');
    expect(await can('create', 'pods', '-n', relNS)).toBe('no');
    // PeerFleet: nodes and pods read everywhere, never written; mirror Jobs
    // and their ServiceAccount only where PeerFleets are watched.
    expect(await can('watch', 'nodes')).toBe('yes');
    expect(await can('watch', 'pods', '--all-namespaces')).toBe('yes');
    expect(await can('get', 'pods', '-n', otherNS)).toBe('no');
    expect(await can('patch', 'nodes')).toBe('no');
    expect(await can('delete', 'pods', '-n', leaseNS)).toBe('no');
    expect(await can('create', 'jobs.batch', '-n', leaseNS)).toBe('yes');
    expect(await can('delete', 'jobs.batch', '-n', leaseNS)).toBe('yes');
    expect(await can('update', 'jobs.batch', '-n', leaseNS)).toBe('no');
    expect(await can('create', 'jobs.batch', '-n', otherNS)).toBe('no');
    expect(await can('create', 'serviceaccounts', '-n', leaseNS)).toBe('yes');
    expect(await can('create', 'serviceaccounts', '-n', otherNS)).toBe('no');
    expect(await can('create', 'serviceaccounts', '--subresource=token', '-n', leaseNS)).toBe('no');
    expect(await can('patch', 'peerfleets.leasehold.dev', '-n', leaseNS)).toBe('yes');
    expect(await can('delete', 'peerfleets.leasehold.dev', '-n', leaseNS)).toBe('no');
    // Events: written anywhere (an Offer's go to default), never read.
    expect(await can('create', 'events', '-n', 'default')).toBe('yes');
    expect(await can('list', 'events', '-n', leaseNS)).toBe('no');
  });

  it('is enough for a full Lease lifecycle run with that identity and the Deployment flags', async () => {
    const args = await deploymentArgs(release, relNS);
    expect(args).toEqual(expect.arrayContaining([`--watch-namespace=${leaseNS}`, `--leader-election-namespace=${relNS}`, `--namespace=${relNS}`]));
    ctl = await startController(tokenKubeconfig, args, { POD_NAMESPACE: relNS, POD_NAME: 'leasehold-helm-e2e', LEASEHOLD_MACHINES_DIR: machines });

    // It leads, on the coordination Lease the chart let it write.
    const le = await waitFor('leader lease', async () => {
      const l = await getJSON(kubectl, ['-n', relNS, 'leases.coordination.k8s.io', 'leasehold-controller']);
      return l?.spec?.holderIdentity?.startsWith('leasehold-helm-e2e_') ? l : undefined;
    });
    expect(le.spec.holderIdentity).toMatch(/^leasehold-helm-e2e_/);

    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Offer',
      metadata: { name: offerName },
      spec: { command: { acquire: [provider, 'acquire'], release: [provider, 'release'], shape: { os: 'linux', arch: 'amd64', cpus: 1 } }, idleTimeout: '10m', maxLifetime: '1h' },
    }));
    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Lease',
      metadata: { name: 'via-helm', namespace: leaseNS },
      spec: { where: 'cpus>=1', offer: offerName },
    }));
    const st = await waitFor('Lease Ready', async () => {
      const s = (await getJSON(kubectl, ['-n', leaseNS, 'leases.leasehold.dev', 'via-helm']))?.status;
      if (s?.phase === 'Failed') throw new Error(`Lease failed: ${s.reason}: ${s.message}`);
      // Nobody uses the machine: its first check, one check interval (1 s) after Ready, makes it Idle, still handed over.
      return s?.phase === 'Ready' || s?.phase === 'Idle' ? s : undefined;
    }, 90_000, 250);
    expect(st.machine.ssh.hostKey).toMatch(/^ssh-ed25519 /);
    expect(sshdRunning()).not.toBe('');
    // The controller made its own SSH key Secret where the chart lets it.
    const key = await getJSON(kubectl, ['-n', relNS, 'secret', 'leasehold-controller-ssh']);
    expect(Object.keys(key.data).sort()).toEqual(['id_ed25519', 'id_ed25519.pub']);
    // Events were recorded, and the Offer's status written.
    const events = await getJSON(kubectl, ['-n', leaseNS, 'events', '--field-selector', 'involvedObject.name=via-helm']);
    expect(events.items.map((e: any) => e.reason)).toEqual(expect.arrayContaining(['Provider']));
    await waitFor('Offer activeLeases 1', async () => (await getJSON(kubectl, ['offer.leasehold.dev', offerName]))?.status?.activeLeases === 1);

    const del = await kubectl(['-n', leaseNS, 'delete', 'leases.leasehold.dev', 'via-helm', '--timeout=60s']);
    expect(del.code).toBe(0);
    expect(await getJSON(kubectl, ['-n', leaseNS, 'leases.leasehold.dev', 'via-helm'])).toBeUndefined();
    expect(existsSync(join(machines, st.leaseID))).toBe(false);
    expect(sshdRunning()).toBe('');
    await waitFor('Offer activeLeases 0', async () => (await getJSON(kubectl, ['offer.leasehold.dev', offerName]))?.status?.activeLeases === 0);

    // Released by the controller itself (idle), then pruned by it (historyLimit 0).
    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Offer',
      metadata: { name: shortOffer },
      spec: { command: { acquire: [provider, 'acquire'], release: [provider, 'release'], shape: { os: 'linux', arch: 'amd64', cpus: 1 } }, idleTimeout: '2s', maxLifetime: '1h' },
    }));
    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Lease',
      metadata: { name: 'idle-out', namespace: leaseNS },
      spec: { where: 'cpus>=1', offer: shortOffer },
    }));
    let idleID = '';
    await waitFor('idle-out Released and pruned', async () => {
      const l = await getJSON(kubectl, ['-n', leaseNS, 'leases.leasehold.dev', 'idle-out']);
      if (l?.status?.leaseID) idleID = l.status.leaseID;
      if (l?.status?.phase === 'Failed') throw new Error(`Lease failed: ${l.status.reason}: ${l.status.message}`);
      return idleID !== '' && l === undefined;
    }, 60_000, 250);
    const released = await getJSON(kubectl, ['-n', leaseNS, 'events', '--field-selector', 'involvedObject.name=idle-out']);
    expect(released.items.map((e: any) => e.reason)).toEqual(expect.arrayContaining(['IdleTimeout', 'Released']));
    expect(existsSync(join(machines, idleID))).toBe(false);
    expect(sshdRunning()).toBe('');

    // Not one request was refused: none of the controller's API calls got a
    // 403, and nothing in its log (informers, events, leader election) says forbidden.
    expect(await ctl.metric('leasehold_kube_responses_total', { code: '403' })).toBe(0);
    await ctl.stop();
    const log = readFileSync(ctl.logFile, 'utf8');
    expect(log.split('\n').filter((l) => /forbidden|HTTP 403/i.test(l))).toEqual([]);
    expect(log).toMatch(/started leading/);
  }, 180_000);

  it('installs as a subchart with global values, running as a ServiceAccount made beforehand', async () => {
    // A parent chart the way a platform team wraps Leasehold: global values
    // of its own, and the ServiceAccount it manages itself.
    const umbrella = join(work, 'platform');
    mkdirSync(join(umbrella, 'charts'), { recursive: true });
    cpSync(chart, join(umbrella, 'charts', 'leasehold'), { recursive: true, dereference: true });
    writeFileSync(join(umbrella, 'Chart.yaml'), YAML.stringify({ apiVersion: 'v2', name: 'platform', version: '1.0.0' }));
    writeFileSync(join(umbrella, 'values.yaml'), YAML.stringify({
      global: { imageRegistry: 'registry.example', team: 'platform' },
      leasehold: { replicas: 1, leaderElection: { enabled: false }, watchNamespace: subNS, serviceAccount: { create: false, name: 'platform-leasehold' } },
    }));
    await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'platform-leasehold', namespace: subNS } }));
    await helmOK(['install', umbrellaRelease, umbrella, '-n', subNS]);
    umbrellaInstalled = true;

    const sel = `app.kubernetes.io/instance=${umbrellaRelease}`;
    expect((await kubectl(['get', 'serviceaccounts,poddisruptionbudgets', '-n', subNS, '-l', sel, '-o', 'name'])).stdout.trim()).toBe('');
    const dep = await getJSON(kubectl, ['-n', subNS, 'deployments', '-l', sel]);
    expect(dep.items.map((d: any) => d.spec.template.spec.serviceAccountName)).toEqual(['platform-leasehold']);
    const can = await kubectl(['auth', 'can-i', 'patch', 'leases.leasehold.dev', '--subresource=status', '-n', subNS, `--as=system:serviceaccount:${subNS}:platform-leasehold`]);
    expect(can.stdout.trim()).toBe('yes');

    await helmOK(['uninstall', umbrellaRelease, '-n', subNS]);
    umbrellaInstalled = false;
    // Not the chart's to delete.
    expect(await getJSON(kubectl, ['-n', subNS, 'serviceaccount', 'platform-leasehold'])).toBeDefined();
  }, 60_000);

  it('with peerFleet.enabled=false, PeerFleets report readiness only, and nothing is refused', async () => {
    const notes = await helmOK(['install', noPeerRelease, chart, '-n', noPeerNS,
      '--set', `replicas=1,leaderElection.enabled=false,watchNamespace=${noPeerNS},peerFleet.enabled=false`,
      '--set', 'peerFleet.allowedOrigins={https://127.0.0.1:1}']);
    expect(notes.stdout).toMatch(/PeerFleet lending is off \(peerFleet\.enabled=false\): PeerFleets report their readiness only\./);
    noPeerInstalled = true;
    const account = (await getJSON(kubectl, ['-n', noPeerNS, 'serviceaccount', '-l', `app.kubernetes.io/instance=${noPeerRelease}`])).items[0].metadata.name;
    const { path } = await serviceAccountKubeconfig(noPeerNS, account, 'nopeer.kubeconfig');
    const args = await deploymentArgs(noPeerRelease, noPeerNS);
    expect(args).toContain('--no-peer-lending');
    expect(args).toContain('--allowed-peer-origins=https://127.0.0.1:1');
    const env = { POD_NAMESPACE: noPeerNS, POD_NAME: 'leasehold-nopeer-e2e', LEASEHOLD_MACHINES_DIR: machines };
    const readyz = (c: ControllerProcess) => c.metricsURL.replace(/\/metrics$/, '/readyz');

    // As the chart runs it: every informer lists (ready), and a PeerFleet
    // gets its verdict (its token Secret is missing) but no lending finalizer.
    noPeerCtl = await startController(path, args, env);
    const c = noPeerCtl;
    await waitFor('the controller ready', async () => (await fetch(readyz(c))).ok, 60_000, 250);
    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'PeerFleet',
      metadata: { name: 'off', namespace: noPeerNS },
      spec: { origin: 'https://127.0.0.1:1', namespace: 'queue', credentialSecretRef: { name: 'absent' }, lendableNodes: { matchLabels: { lendable: 'yes' } }, pricePerGPUHour: 1 },
    }));
    const fleet = await waitFor('the PeerFleet verdict', async () => {
      const f = await getJSON(kubectl, ['-n', noPeerNS, 'peerfleet.leasehold.dev', 'off']);
      return f?.status?.verdict?.code ? f : undefined;
    }, 60_000, 250);
    expect(fleet.status.verdict.code).toBe('SecretAbsent');
    expect(fleet.metadata.finalizers ?? []).toEqual([]);
    expect(fleet.status.hosts).toBeUndefined();
    await c.stop();
    expect(readFileSync(c.logFile, 'utf8').split('\n').filter((l) => /forbidden|HTTP 403/i.test(l))).toEqual([]);

    // Without --no-peer-lending the same identity is refused lending's reads: the flag is what keeps it clean.
    noPeerCtl = await startController(path, args.filter((a) => a !== '--no-peer-lending'), env);
    const bare = noPeerCtl;
    await waitFor('the node informer refused', async () => /cannot list resource \\"nodes\\"/.test(readFileSync(bare.logFile, 'utf8')), 30_000, 250);
    expect((await fetch(readyz(bare))).ok).toBe(false);
    await bare.stop();
  }, 120_000);

  it('uninstalls every controller object; the CRDs, and so the Leases, stay', async () => {
    await ctl?.stop(); // already stopped unless the lifecycle test failed
    // A Lease no controller serves any more (it stays Pending, with no finalizer).
    await apply(kubectl, JSON.stringify({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Lease', metadata: { name: 'left', namespace: leaseNS }, spec: { where: 'cpus>=1' } }));
    await helmOK(['uninstall', release, '-n', relNS]);
    installed = false;
    const sel = `app.kubernetes.io/instance=${release}`;
    const left = await kubectl(['get', 'serviceaccounts,roles,rolebindings,deployments,services,configmaps,poddisruptionbudgets,networkpolicies', '-A', '-l', sel, '-o', 'name']);
    expect(left.code).toBe(0);
    expect(left.stdout.trim()).toBe('');
    const clusterLeft = await kubectl(['get', 'clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings', '-l', sel, '-o', 'name']);
    expect(clusterLeft.stdout.trim()).toBe('');
    // The rights went with the release: refused (403 while the API server still
    // has the token cached as authenticated, 401 once the deleted ServiceAccount is noticed).
    expect([401, 403]).toContain(await getAsController(`/api/v1/namespaces/${cloudNS}/secrets/api-key`));
    for (const crd of ['leases.leasehold.dev', 'offers.leasehold.dev', 'peerfleets.leasehold.dev', 'runnertargets.leasehold.dev']) {
      expect((await kubectl(['get', 'crd', crd, '-o', 'name'])).code).toBe(0);
    }
    expect(await getJSON(kubectl, ['-n', leaseNS, 'leases.leasehold.dev', 'left'])).toBeDefined();
    // What the controller made itself is not Helm's: its SSH key Secret and the
    // leader-election Lease stay until deleted by hand (README says how).
    expect(await getJSON(kubectl, ['-n', relNS, 'secret', 'leasehold-controller-ssh'])).toBeDefined();
    await kubectl(['-n', leaseNS, 'delete', 'leases.leasehold.dev', 'left', '--wait=false']);
    expect(sshdRunning()).toBe('');
  });
});
