// What the PeerFleet e2e tests share: our cluster (kube-controller-manager,
// kube-scheduler and KWOK beside etcd and kube-apiserver) and a peer's, the
// CRDs, the peer's queue credential, a restricted lending namespace with the
// token and CA Secrets, and the manifests of peer Jobs, our Jobs and PeerFleets.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ControlPlane } from '../cluster/controlplane.js';
import { createFakeNodes, KWOK_RUN_FOR_ENV, type FakeNode } from '../cluster/kwok.js';
import { createPeerCredential, type PeerCredential } from '../cluster/peer.js';
import { startController, type ControllerProcess } from './controller.js';
import { chartIdentity } from './helm.js';
import { peerFleetManifest } from './builders.js';
import { apply, must, type Kubectl, type KubectlOf } from './kube.js';
import { chartAdmission, namespaceUser } from './tenancy.js';

export const QUEUE = 'queue';

/**
 * What an admin sets on a node to lend it to the PeerFleets of `namespaces`
 * (`'*'`: every namespace): the label leasehold.dev/lendable=true and the
 * annotation leasehold.dev/lendable-namespaces naming them. Spread into a
 * FakeNode; `labels` are the node's other labels (a pool a selector picks).
 */
export function optedIn(namespaces: string | readonly string[], labels: Record<string, string> = {}): { labels: Record<string, string>; annotations: Record<string, string> } {
  return {
    labels: { ...labels, 'leasehold.dev/lendable': 'true' },
    annotations: { 'leasehold.dev/lendable-namespaces': typeof namespaces === 'string' ? namespaces : namespaces.join(',') },
  };
}

/** Opts an existing node in as optedIn says, with `kubectl label` and `kubectl annotate`. */
export async function optIn(on: KubectlOf, node: string, namespaces: string | readonly string[], labels: Record<string, string> = {}): Promise<void> {
  const set = optedIn(namespaces, labels);
  const pairs = (m: Record<string, string>) => Object.entries(m).map(([k, v]) => `${k}=${v}`);
  await must(on, ['label', 'node', node, '--overwrite', ...pairs(set.labels)]);
  await must(on, ['annotate', 'node', node, '--overwrite', ...pairs(set.annotations)]);
}

export interface LendingClusters {
  ours: ControlPlane;
  peer: ControlPlane;
  lender: PeerCredential;
}

/** Both control planes, the CRDs on ours, and the lender's credential for the peer queue. */
export async function startLendingClusters(name: string, peerAPIServerArgs: string[] = []): Promise<LendingClusters> {
  const [ours, peer] = await Promise.all([
    ControlPlane.start({ name, controllers: true, scheduler: true, kwok: true }),
    ControlPlane.start({ name: `${name}-peer`, controllers: true, apiServerArgs: peerAPIServerArgs }),
  ]);
  await must(ours, ['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
  await must(ours, ['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  const lender = await createPeerCredential(peer, { namespace: QUEUE });
  return { ours, peer, lender };
}

/** The NetworkPolicy docs/peerfleet.md gives: mirrors in the namespace reach nothing unless another policy allows it. */
export function defaultDenyEgress(namespace: string) {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'default-deny-egress', namespace }, spec: { podSelector: {}, policyTypes: ['Egress'] } };
}

/** A namespace labelled for the restricted Pod Security Standard, denying egress by default, with Secrets peer-token and peer-ca. */
export async function lendingNamespace({ ours, peer, lender }: LendingClusters, name: string): Promise<void> {
  await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } });
  await apply(ours, defaultDenyEgress(name));
  await apply(ours, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-token', namespace: name }, stringData: { token: lender.token } });
  const ca = await readFile(join(peer.info.dir, 'pki', 'ca.crt'), 'utf8');
  await apply(ours, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-ca', namespace: name }, stringData: { 'ca.crt': ca } });
}

export interface TenantLending extends LendingClusters {
  /** kubectl on our cluster as a namespace user with leasehold.dev "*" in the lending namespace only. */
  tenant: Kubectl;
  controller: ControllerProcess;
  /** Starts the controller again as it was started (after the test stopped it). */
  restartController(): Promise<ControllerProcess>;
}

/**
 * Both clusters, a lending namespace `ns` with `nodes`, a namespace user
 * there, and a controller serving `ns` with the chart's RBAC identity and
 * admission policy for release `name`; `prepare` runs before the controller
 * starts. The controller may send its token to the peer's API server only.
 */
export async function tenantLending(name: string, ns: string, nodes: FakeNode[], controllerArgs: string[] = [], prepare?: (ours: ControlPlane) => Promise<void>): Promise<TenantLending> {
  const clusters = await startLendingClusters(name);
  const { ours, peer } = clusters;
  await lendingNamespace(clusters, ns);
  const kubectl: Kubectl = ours.kubectl.bind(ours);
  await createFakeNodes(kubectl, nodes);
  await prepare?.(ours);
  const tenant = await namespaceUser(kubectl, ns, `${ns}-user`);
  const set = [`watchNamespace=${ns}`, `secretNamespaces={${ns}}`];
  await chartAdmission(kubectl, name, ns, set);
  const kubeconfig = await chartIdentity({ kubectl, release: name, namespace: ns, set, file: join(ours.info.dir, `${name}.kubeconfig`) });
  const start = () => startController(kubeconfig, ['--namespace', ns, '--watch-namespace', ns, '--leader-election-namespace', ns,
    '--allowed-peer-origins', peer.info.server, ...controllerArgs]);
  return { ...clusters, tenant, controller: await start(), restartController: start };
}

export interface JobOptions {
  gpus?: number;
  /** How long KWOK runs the pod, as a Go duration. */
  runFor?: string;
  /** Extra pod spec fields (to make a template unsafe). */
  pod?: Record<string, unknown>;
  container?: Record<string, unknown>;
  annotations?: Record<string, string>;
  /** Extra Job spec fields (activeDeadlineSeconds: null leaves the deadline out). */
  jobSpec?: Record<string, unknown>;
}

function job(name: string, namespace: string, opts: JobOptions, extra: { labels?: Record<string, string>; spec?: Record<string, unknown>; pod?: Record<string, unknown> }) {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, ...(extra.labels ? { labels: extra.labels } : {}) },
    spec: {
      ...extra.spec,
      backoffLimit: 0,
      template: {
        ...(opts.annotations ? { metadata: { annotations: opts.annotations } } : {}),
        spec: {
          restartPolicy: 'Never',
          ...extra.pod,
          containers: [{
            name: 'c',
            image: 'registry.invalid/c:1',
            env: [{ name: KWOK_RUN_FOR_ENV, value: opts.runFor ?? '4s' }],
            resources: { limits: { 'nvidia.com/gpu': String(opts.gpus ?? 1) } },
            ...opts.container,
          }],
          ...opts.pod,
        },
      },
    },
  };
}

/** A lendable Job in the peer queue, left to lenders by spec.managedBy. */
export function peerJob(name: string, opts: JobOptions = {}) {
  return job(name, QUEUE, opts, { labels: { 'leasehold.dev/lendable': 'true' }, spec: { managedBy: 'leasehold.dev/peer-lending', activeDeadlineSeconds: 3600, ...opts.jobSpec } });
}

/** Our own GPU work, which the scheduler may put on a node of the pool. */
export function ourJob(name: string, namespace: string, pool: Record<string, string>, opts: JobOptions = {}) {
  return job(name, namespace, opts, { pod: { nodeSelector: pool } });
}

/** A PeerFleet lending to the peer's queue with the Secrets lendingNamespace makes; spec adds to or replaces those fields. */
export function fleetManifest(peer: ControlPlane, name: string, namespace: string, spec: Record<string, unknown>) {
  return peerFleetManifest(name, namespace, {
    origin: peer.info.server,
    namespace: QUEUE,
    credentialSecretRef: { name: 'peer-token' },
    caSecretRef: { name: 'peer-ca' },
    pricePerGPUHour: 2,
    ...spec,
  });
}
