// What every bench phase shares: the control plane and clients under
// measurement, Lease trackers, the shared sshd machine, the bare client.
import * as k8s from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from '../e2e/cluster/controlplane.js';
import { sumMetric, type ControllerProcess } from '../e2e/support/controller.js';
import { makeCountingClient } from '../src/kube/client.js';
import { Metrics } from '../src/kube/metrics.js';
import { waitFor } from '../src/kube/testing/wait.js';
import { generateControllerKey } from '../src/machine/keys.js';

export const env = (name: string, dflt: number) => Number(process.env[name] ?? dflt);

export const G = { group: 'leasehold.dev', version: 'v1alpha1' };
export const work = mkdtempSync(join(tmpdir(), 'leasehold-bench-'));
export const results: Record<string, unknown> = { machine: `${cpus().length} cores, node ${process.version}` };
export const log = (s: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The control plane under measurement and the bench's clients of it, set by connect(). */
export const api = {} as { cp: ControlPlane; custom: k8s.CustomObjectsApi; core: k8s.CoreV1Api; kubeConfig: k8s.KubeConfig };

/** Runs fn over items with at most `width` in flight. */
export async function pool<T>(items: T[], width: number, fn: (t: T, i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  }));
}

/**
 * The bench's view of one namespace's Leases: an informer (one list, then a
 * watch), so that waiting for N Leases costs the API server nothing per poll.
 * Polling with a list of 1000-5000 objects every second loaded the API
 * server the controller is measured against (earlier runs did that).
 */
const trackers = new Map<string, Promise<k8s.Informer<any> & k8s.ObjectCache<any>>>();
function tracker(namespace: string) {
  let t = trackers.get(namespace);
  if (!t) {
    const path = `/apis/leasehold.dev/v1alpha1/namespaces/${namespace}/leases`;
    const inf = k8s.makeInformer<any>(api.kubeConfig, path, () => api.custom.listNamespacedCustomObject({ ...G, plural: 'leases', namespace }) as any);
    inf.on('error', () => setTimeout(() => void inf.start().catch(() => undefined), 1000));
    t = inf.start().then(() => inf);
    trackers.set(namespace, t);
  }
  return t;
}

export async function listLeases(namespace: string): Promise<any[]> {
  return [...(await tracker(namespace)).list()];
}

export async function stopTrackers(): Promise<void> {
  for (const t of trackers.values()) await (await t).stop();
  trackers.clear();
}

export async function waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs: number, everyMs = 1000): Promise<void> {
  await waitFor(what, probe, timeoutMs, everyMs);
}

export async function namespace(name: string): Promise<string> {
  await api.core.createNamespace({ body: { metadata: { name } } });
  return name;
}

/** The controller key made up front, so the shared machine can admit it before the controller starts. */
export async function controllerKeySecret(ns: string): Promise<string> {
  const key = generateControllerKey();
  await api.core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name: 'leasehold-controller-ssh' },
      data: { id_ed25519: Buffer.from(key.privateKey).toString('base64'), 'id_ed25519.pub': Buffer.from(key.publicKey).toString('base64') },
    },
  });
  return key.publicKey;
}

/** One real sshd (e2e/providers/sshd-machine.sh) and a provider whose acquire prints its target for every lease. */
export function sharedMachine(name: string, publicKey: string): { acquire: string[]; release: string[]; dir: string } {
  const dir = join(work, `machines-${name}`);
  const line = execFileSync(join(process.cwd(), 'e2e/providers/sshd-machine.sh'), ['acquire'], {
    env: { ...process.env, LEASEHOLD_LEASE_ID: `shared-${name}`, LEASEHOLD_LEASE_SSH_KEY: publicKey, LEASEHOLD_MACHINES_DIR: dir },
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString().trim().split('\n').pop()!;
  writeFileSync(join(work, `target-${name}.json`), `${line}\n`);
  const acquire = join(work, `acquire-${name}.sh`);
  writeFileSync(acquire, `#!/bin/sh\necho "sharing machine ${name}" >&2\nexec cat ${join(work, `target-${name}.json`)}\n`);
  chmodSync(acquire, 0o755);
  return { acquire: [acquire], release: ['/bin/true'], dir };
}

export function stopSharedMachine(dir: string, name: string) {
  try {
    execFileSync(join(process.cwd(), 'e2e/providers/sshd-machine.sh'), ['release'], {
      env: { ...process.env, LEASEHOLD_LEASE_ID: `shared-${name}`, LEASEHOLD_MACHINES_DIR: dir },
      stdio: 'ignore',
    });
  } catch {
    // best effort
  }
}

export async function offer(name: string, spec: Record<string, unknown>) {
  await api.custom.createClusterCustomObject({ ...G, plural: 'offers', body: { apiVersion: 'leasehold.dev/v1alpha1', kind: 'Offer', metadata: { name }, spec } });
}

export async function createLeases(ns: string, n: number, spec: (i: number) => Record<string, unknown>, width = 8): Promise<number> {
  const t0 = Date.now();
  await pool(Array.from({ length: n }, (_, i) => i), width, (i) =>
    api.custom.createNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns, body: { apiVersion: 'leasehold.dev/v1alpha1', kind: 'Lease', metadata: { name: `l-${i}` }, spec: spec(i) } }),
  );
  return Date.now() - t0;
}

export async function apiserverMetrics(): Promise<string> {
  return (await api.cp.kubectl(['get', '--raw', '/metrics'])).stdout;
}

export function apiserverCounts(text: string): { writes: number; reads: number } {
  let writes = 0;
  let reads = 0;
  for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY']) writes += sumMetric(text, 'apiserver_request_total', { group: 'leasehold.dev', verb });
  for (const verb of ['GET', 'LIST', 'WATCH']) reads += sumMetric(text, 'apiserver_request_total', { group: 'leasehold.dev', verb });
  return { writes, reads };
}

export async function controllerReads(ctl: ControllerProcess): Promise<number> {
  let sum = 0;
  for (const verb of ['GET', 'LIST', 'WATCH']) sum += await ctl.metric('leasehold_kube_requests_total', { client: 'controller', verb });
  return sum;
}

/**
 * The bare client: `writes` API writes with the same library against the same
 * API server, in a namespace no controller watches: `objects` Lease creates,
 * then status merge patches over them. Returns the time taken.
 */
let bareRuns = 0;
export async function bareClient(writes: number, objects: number, width: number): Promise<number> {
  const bareNs = await namespace(`bench-bare-${++bareRuns}`);
  const made = Math.min(objects, writes);
  const t = Date.now();
  await createLeases(bareNs, made, () => ({ where: 'cpus>=1' }), width);
  const opts = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
  await pool(Array.from({ length: writes - made }, (_, i) => i), width, (i) =>
    api.custom.patchNamespacedCustomObjectStatus({ ...G, plural: 'leases', namespace: bareNs, name: `l-${i % made}`, body: { status: { message: `bare write ${i}` } } }, opts),
  );
  const took = Date.now() - t;
  await api.custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: bareNs }).catch(() => undefined);
  return took;
}

export function quantiles(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))]!;
  return { min: s[0]!, p50: q(0.5), p90: q(0.9), max: s[s.length - 1]! };
}

export const ms = (n: number) => `${(n / 1000).toFixed(1)} s`;
export const mib = (n: number) => `${Math.round(n / 2 ** 20)} MiB`;

/** Points the bench's clients at a started control plane. */
export function connect(cp: ControlPlane): void {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cp.info.kubeconfig);
  // The controller's own client (one kept-alive connection), so that the bare client is its floor.
  Object.assign(api, { cp, kubeConfig: kc, custom: makeCountingClient(kc, k8s.CustomObjectsApi, new Metrics({ defaultMetrics: false }), 'bench'), core: kc.makeApiClient(k8s.CoreV1Api) });
}
