// Runs the real controller process (CONTROLLER_ENTRY) against a test control plane.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../cluster/controlplane.js';

export interface ControllerProcess {
  child: ChildProcess;
  metricsURL: string;
  logFile: string;
  /** Sum of a counter or gauge on /metrics, over samples whose labels include `labels`. */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** API writes (POST, PUT, PATCH, DELETE) the reconcilers have sent, leader election excluded. */
  writes(): Promise<number>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * The controller's entry point, relative to the repository root and without
 * its extension: run as `<entry>.ts` through tsx, or built as `dist/<entry>.js`.
 * Every test, bench and demo that starts the controller runs this file.
 */
export const CONTROLLER_ENTRY = 'cmd/controller';

export interface ControllerRun {
  /** Run the production build (`npm run build` output, as the image does) instead of the TypeScript through tsx. */
  compiled?: boolean;
  /** Node flags before the entry point (e.g. `--max-semi-space-size=4`). */
  nodeFlags?: string[];
}

export async function startController(kubeconfig: string, args: string[] = [], env: Record<string, string> = {}, run: ControllerRun = {}): Promise<ControllerProcess> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'leasehold-ctl-'));
  const logFile = join(dir, 'controller.log');
  const log = createWriteStream(logFile);
  const entry = run.compiled ? ['dist', `${CONTROLLER_ENTRY}.js`] : [`${CONTROLLER_ENTRY}.ts`];
  const child = spawn(process.execPath, [...(run.nodeFlags ?? []), ...(run.compiled ? [] : ['--import', 'tsx']), join(process.cwd(), ...entry),
    '--kubeconfig', kubeconfig, '--metrics-addr', `127.0.0.1:${port}`, '--log-level', 'debug', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', ...env },
  });
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  const metricsURL = `http://127.0.0.1:${port}/metrics`;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const proc: ControllerProcess = {
    child,
    metricsURL,
    logFile,
    async metric(name, labels = {}) {
      const text = await (await fetch(metricsURL)).text();
      return sumMetric(text, name, labels);
    },
    async writes() {
      let sum = 0;
      for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE']) sum += await proc.metric('leasehold_kube_requests_total', { client: 'controller', verb });
      return sum;
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await exited;
    },
  };
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`controller exited with ${child.exitCode}; see ${logFile}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) return proc;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await proc.stop('SIGKILL');
  throw new Error(`controller did not serve /healthz within 30 s; see ${logFile}`);
}

export function sumMetric(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) sum += Number(m[3]);
  }
  return sum;
}
