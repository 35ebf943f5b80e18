// Small helpers over the real kubectl for e2e tests.
import { runTool, type Kubectl } from '../cluster/tool.js';
import { join } from 'node:path';

export type { Kubectl };

export function testKubectl(kubeconfig = process.env.E2E_KUBECONFIG!, binDir = process.env.E2E_BIN_DIR!): Kubectl {
  return (args, input) => runTool(join(binDir, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], input);
}

/** A kubectl to run: the call itself, or a test cluster (whose name then stands in errors). */
export type KubectlOf = Kubectl | { kubectl: Kubectl; info: { clusterName: string } };

function kubectlOf(on: KubectlOf): { run: Kubectl; where: string } {
  if (typeof on === 'function') return { run: on, where: '' };
  return { run: (args, input) => on.kubectl(args, input), where: ` on ${on.info.clusterName}` };
}

/** Runs kubectl and returns its stdout; a non-zero exit throws with the command, the cluster and what kubectl said. */
export async function must(on: KubectlOf, args: string[], input?: string): Promise<string> {
  const { run, where } = kubectlOf(on);
  const res = await run(args, input);
  if (res.code !== 0) throw new Error(`kubectl ${args.join(' ')}${where}: ${res.stderr}${res.stdout}`);
  return res.stdout;
}

/** `kubectl <args> -o json`, parsed; any failure (NotFound included) throws. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const json = async (on: KubectlOf, args: string[]): Promise<any> => JSON.parse(await must(on, [...args, '-o', 'json']));

/** `kubectl apply` of a manifest, given as YAML or JSON text or as an object. */
export async function apply(on: KubectlOf, manifest: string | object): Promise<string> {
  return must(on, ['apply', '-f', '-'], typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
}

export async function getJSON<T = any>(kubectl: Kubectl, args: string[]): Promise<T | undefined> {
  const r = await kubectl(['get', ...args, '-o', 'json']);
  if (r.code !== 0) {
    if (/NotFound|not found/.test(r.stderr)) return undefined;
    throw new Error(`kubectl get ${args.join(' ')}: ${r.stderr}`);
  }
  return JSON.parse(r.stdout) as T;
}

export { waitFor } from '../../src/kube/testing/wait.js';

let counter = 0;
/** A fresh namespace per test file, so tests never see each other's objects. */
export async function freshNamespace(kubectl: Kubectl, prefix: string): Promise<string> {
  const ns = `${prefix}-${process.pid}-${++counter}-${Date.now().toString(36)}`;
  const r = await kubectl(['create', 'namespace', ns]);
  if (r.code !== 0) throw new Error(r.stderr);
  return ns;
}
