// The repository's helm against the test control plane, for tests of charts/leasehold.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import YAML from 'yaml';
import { runTool } from '../cluster/tool.js';
import { kubeconfigYAML } from '../cluster/pki.js';
import type { Kubectl } from './kube.js';

export const chartDir = join(process.cwd(), 'charts/leasehold');

export type Helm = (args: string[]) => Promise<{ stdout: string; stderr: string; code: number }>;

export function testHelm(kubeconfig = process.env.E2E_KUBECONFIG!, binDir = process.env.E2E_BIN_DIR!): { helm: Helm; helmOK: Helm } {
  const helm: Helm = (args) => runTool(join(binDir, 'helm'), ['--kubeconfig', kubeconfig, ...args]);
  const helmOK: Helm = async (args) => {
    const r = await helm(args);
    if (r.code !== 0) throw new Error(`helm ${args.join(' ')} failed (${r.code}): ${r.stderr}${r.stdout}`);
    return r;
  };
  return { helm, helmOK };
}

/** The documents of a multi-document YAML stream (helm template, helm get manifest). */
export const docs = (text: string): any[] => YAML.parseAllDocuments(text).map((d) => d.toJSON()).filter(Boolean);

/**
 * `--kube-version` for `helm template` and `helm lint`: the test API server's
 * version. The repository's helm is built without the release ldflags and would
 * otherwise assume Kubernetes 1.20, which the chart's kubeVersion refuses.
 */
export async function kubeVersionArgs(kubectl: Kubectl): Promise<string[]> {
  const r = await kubectl(['version', '-o', 'json']);
  if (r.code !== 0) throw new Error(`kubectl version: ${r.stderr}`);
  return ['--kube-version', JSON.parse(r.stdout).serverVersion.gitVersion as string];
}

const RBAC_KINDS = new Set(['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);

export interface ChartIdentityOptions {
  /** kubectl (as an admin) on the cluster to make the identity in. */
  kubectl: Kubectl;
  release: string;
  /** The release namespace: the ServiceAccount and the Roles of the controller's own objects go there. */
  namespace: string;
  /** Chart values, as helm --set takes them. */
  set: string[];
  /** Where the kubeconfig is written. */
  file: string;
}

/**
 * The chart's ServiceAccount and RBAC, rendered by helm and applied, and a
 * kubeconfig for that ServiceAccount with a TokenRequest token (no
 * kube-controller-manager needed): a controller run with it has exactly the
 * rights the chart gives. Returns the kubeconfig's path.
 */
export async function chartIdentity(o: ChartIdentityOptions): Promise<string> {
  const must = async (args: string[], input?: string) => {
    const r = await o.kubectl(args, input);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
    return r.stdout.trim();
  };
  const { helmOK } = testHelm();
  const set = o.set.flatMap((v) => ['--set', v]);
  const rendered = docs((await helmOK(['template', o.release, chartDir, ...(await kubeVersionArgs(o.kubectl)), '--namespace', o.namespace, ...set])).stdout);
  const rbac = rendered.filter((d) => RBAC_KINDS.has(d.kind));
  const sa = rbac.find((d) => d.kind === 'ServiceAccount');
  await must(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: rbac }));
  const token = await must(['create', 'token', sa.metadata.name, '-n', o.namespace, '--duration=2h']);
  const view = (path: string) => must(['config', 'view', '--minify', '--raw', '-o', `jsonpath={.clusters[0].cluster.${path}}`]);
  await writeFile(o.file, kubeconfigYAML({
    server: await view('server'),
    ca: await view('certificate-authority'),
    clusterName: o.release,
    userName: sa.metadata.name,
    user: { token },
    namespace: o.namespace,
  }), { mode: 0o600 });
  return o.file;
}
