// The repository's helm against the test control plane, for tests of charts/leasehold.
import { join } from 'node:path';
import YAML from 'yaml';
import { runTool } from '../cluster/controlplane.js';
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
