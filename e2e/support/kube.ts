// Small helpers over the real kubectl for e2e tests.
import { runTool, type Kubectl } from '../cluster/tool.js';
import { join } from 'node:path';

export type { Kubectl };

export function testKubectl(kubeconfig = process.env.E2E_KUBECONFIG!, binDir = process.env.E2E_BIN_DIR!): Kubectl {
  return (args, input) => runTool(join(binDir, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], input);
}

export async function apply(kubectl: Kubectl, manifest: string): Promise<void> {
  const r = await kubectl(['apply', '-f', '-'], manifest);
  if (r.code !== 0) throw new Error(`kubectl apply failed: ${r.stderr}`);
}

export async function getJSON<T = any>(kubectl: Kubectl, args: string[]): Promise<T | undefined> {
  const r = await kubectl(['get', ...args, '-o', 'json']);
  if (r.code !== 0) {
    if (/NotFound|not found/.test(r.stderr)) return undefined;
    throw new Error(`kubectl get ${args.join(' ')}: ${r.stderr}`);
  }
  return JSON.parse(r.stdout) as T;
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

let counter = 0;
/** A fresh namespace per test file, so tests never see each other's objects. */
export async function freshNamespace(kubectl: Kubectl, prefix: string): Promise<string> {
  const ns = `${prefix}-${process.pid}-${++counter}-${Date.now().toString(36)}`;
  const r = await kubectl(['create', 'namespace', ns]);
  if (r.code !== 0) throw new Error(r.stderr);
  return ns;
}
