// The optional parts of a local control plane beside etcd and kube-apiserver:
// kube-controller-manager, kube-scheduler and kwok. Each gets its own client
// certificate (the identity the bootstrap RBAC policy expects), kubeconfig,
// loopback port and log file in the control plane's directory.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { clientKubeconfig } from './pki.js';
import { kwokStagesYAML, KWOK_NODE_ANNOTATION } from './kwok.js';

export type ComponentName = 'kube-controller-manager' | 'kube-scheduler' | 'kwok';

export interface ComponentSpec {
  name: ComponentName;
  args: string[];
  env?: Record<string, string>;
  /** Polled until it answers 200 `ok`. */
  healthURL: string;
}

export interface ComponentContext {
  dir: string;
  server: string;
  clusterName: string;
  port: number;
}

/**
 * The controllers a Job's life, ServiceAccounts and namespace deletion need,
 * plus ReplicaSets/Deployments/DaemonSets for "our own work", and node
 * lifecycle, which lifts the not-ready taint every new Node is created with;
 * taint eviction, endpoints, volumes and the rest stay off to save CPU.
 */
export const DEFAULT_CONTROLLERS = [
  'node-lifecycle-controller',
  'job-controller',
  'ttl-after-finished-controller',
  'garbage-collector-controller',
  'pod-garbage-collector-controller',
  'namespace-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
  'clusterrole-aggregation-controller',
  'replicaset-controller',
  'deployment-controller',
  'daemonset-controller',
];

// kube-controller-manager and kube-scheduler: their own client certificate,
// health on a loopback port, and no leader election (one replica, and a
// restarted one need not wait out a lease).
async function kubeComponent(ctx: ComponentContext, name: ComponentName, user: string, args: string[]): Promise<ComponentSpec> {
  const kubeconfig = await clientKubeconfig(ctx.dir, ctx.server, { name, user }, ctx.clusterName);
  return {
    name,
    args: [
      `--kubeconfig=${kubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${ctx.port}`,
      '--leader-elect=false',
      '--profiling=false',
      ...args,
    ],
    healthURL: `https://127.0.0.1:${ctx.port}/healthz`,
  };
}

export function controllerManager(ctx: ComponentContext, controllers: string[], extra: string[] = []): Promise<ComponentSpec> {
  const pki = join(ctx.dir, 'pki');
  return kubeComponent(ctx, 'kube-controller-manager', 'system:kube-controller-manager', [
    // Each controller acts as its own ServiceAccount in kube-system, as in a
    // real cluster, so RBAC denials show up here the way they would there.
    '--use-service-account-credentials=true',
    // The same key pair the API server signs and verifies tokens with.
    `--service-account-private-key-file=${join(pki, 'sa.key')}`,
    `--root-ca-file=${join(pki, 'ca.crt')}`,
    `--controllers=${controllers.join(',')}`,
    ...extra,
  ]);
}

export function scheduler(ctx: ComponentContext, extra: string[] = []): Promise<ComponentSpec> {
  return kubeComponent(ctx, 'kube-scheduler', 'system:kube-scheduler', extra);
}

export async function kwok(ctx: ComponentContext): Promise<ComponentSpec> {
  // kwok plays the kubelet of every fake Node and the Node authorizer is off,
  // so it runs as a cluster admin, as its own deployment manifests allow.
  const kubeconfig = await clientKubeconfig(ctx.dir, ctx.server,
    { name: 'kwok', user: 'kwok-controller', groups: ['system:masters'] }, ctx.clusterName);
  const workDir = join(ctx.dir, 'kwok');
  await mkdir(workDir, { recursive: true });
  const stages = join(workDir, 'stages.yaml');
  await writeFile(stages, kwokStagesYAML);
  return {
    name: 'kwok',
    args: [
      `--kubeconfig=${kubeconfig}`,
      `--config=${stages}`,
      '--manage-all-nodes=false',
      `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=fake`,
      '--cidr=10.244.0.0/16',
      '--node-ip=10.0.0.1',
      `--server-address=127.0.0.1:${ctx.port}`,
    ],
    // Without it kwok would also read ~/.kwok/kwok.yaml.
    env: { KWOK_WORKDIR: workDir },
    healthURL: `http://127.0.0.1:${ctx.port}/healthz`,
  };
}
