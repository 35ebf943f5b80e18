// What every demo act shares: its temp directory, the kubectl runs of its
// steps, the controller process, and the stop discipline. SIGINT or SIGTERM
// at any point runs the act's own teardown steps, then ends every process
// that still names the demo directory and removes it.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../cluster/controlplane.js';
import { CONTROLLER_ENTRY } from '../support/controller.js';
import { block, say, Stopping } from './output.js';
import { processesMentioning } from './procs.js';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface KubectlTarget {
  binDir: string;
  kubeconfig: string;
}

export interface KubectlResult {
  stdout: string;
  stderr: string;
  code: number;
}

/** Runs one teardown step; a failure is reported and marks the teardown unclean, and the next step still runs. */
export type Attempt = (what: string, fn: () => Promise<unknown>) => Promise<void>;

export const alive = (c: ChildProcess | undefined): boolean => !!c && c.exitCode === null && c.signalCode === null;

export async function stopChild(child: ChildProcess | undefined, graceMs: number): Promise<void> {
  if (!child || !alive(child)) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export class DemoSession {
  root: string | undefined;
  /** The controller's log, shown when the demo fails. */
  controllerLog: string | undefined;
  /** Set as soon as it is spawned, so teardown stops it even mid-start. */
  controller: ChildProcess | undefined;
  stopping: Promise<void> | undefined;
  /** Set when the demo failed: the controller log is worth showing before it is removed. */
  failed = false;
  /** kubectl processes the demo's steps started: teardown ends any still running. */
  private readonly running = new Set<ChildProcess>();

  constructor(private readonly opts: { keepDir: boolean; keptFiles: string }) {}

  /** The demo directory: control planes, logs; removed when the demo ends. */
  async makeRoot(prefix: string): Promise<string> {
    this.root = await mkdtemp(join(tmpdir(), prefix));
    say(`demo directory ${this.root} (removed when the demo ends)`);
    return this.root;
  }

  /** Applies crds/ and waits until the API server serves them. */
  async installCRDs(target: KubectlTarget): Promise<void> {
    say('installing the CRDs from crds/');
    await this.mustKubectl(target, ['apply', '--server-side', '-f', join(repo, 'crds')]);
    // kubectl wait errors out, rather than waits, on a CRD whose status has no conditions yet.
    for (let i = 0; ; i++) {
      const r = await this.kubectl(target, ['wait', '--for=condition=Established', '--timeout=60s', 'crd', '-l', 'app.kubernetes.io/part-of=leasehold']);
      if (r.code === 0) return;
      if (i >= 20) throw new Error(`the CRDs were not Established: ${r.stderr.trim()}`);
      this.check();
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  isStopping(): boolean {
    return this.stopping !== undefined;
  }

  check(): void {
    if (this.stopping) throw new Stopping('stopping');
  }

  /** kubectl against one of the demo's control planes. Once stopping, only teardown may run it. */
  kubectl(target: KubectlTarget, args: string[], input?: string, forTeardown = false): Promise<KubectlResult> {
    if (this.stopping && !forTeardown) return Promise.reject(new Stopping('stopping'));
    // Not ControlPlane.kubectl: a Ctrl-C in a terminal reaches kubectl too, and
    // a kubectl that dies before reading its stdin must not crash the demo with EPIPE.
    return new Promise((resolve, reject) => {
      const child = spawn(join(target.binDir, 'kubectl'), ['--kubeconfig', target.kubeconfig, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
      if (!forTeardown) {
        this.running.add(child);
        child.once('exit', () => this.running.delete(child));
      }
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.stdin.on('error', () => undefined);
      child.on('error', reject);
      child.on('close', (code, signal) => resolve({ stdout, stderr: stderr || (signal ? `kubectl killed by ${signal}` : ''), code: code ?? -1 }));
      child.stdin.end(input ?? '');
    });
  }

  async mustKubectl(target: KubectlTarget, args: string[], input?: string): Promise<string> {
    const r = await this.kubectl(target, args, input);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr.trim() || r.stdout.trim()}`);
    return r.stdout;
  }

  /** Ends the kubectl runs of the steps: one started just as the signal came never got it. */
  async stopRunning(): Promise<void> {
    for (const c of [...this.running]) await stopChild(c, 2_000);
  }

  /** Starts the controller with its log in the demo directory and waits for /healthz. */
  async startController(kubeconfig: string, args: string[], env: Record<string, string> = {}): Promise<{ metricsPort: number }> {
    this.check();
    const metricsPort = await freePort();
    this.controllerLog = join(this.root!, 'controller.log');
    const logFd = openSync(this.controllerLog, 'a');
    this.check();
    const all = ['--kubeconfig', kubeconfig, ...args, '--metrics-addr', `127.0.0.1:${metricsPort}`];
    const child = spawn(process.execPath, ['--import', 'tsx', join(repo, `${CONTROLLER_ENTRY}.ts`), ...all], {
      cwd: repo,
      stdio: ['ignore', logFd, logFd],
      env: { ...process.env, NODE_OPTIONS: '', ...env },
    });
    closeSync(logFd);
    this.controller = child;
    say(`started the controller (pid ${child.pid}): ${CONTROLLER_ENTRY} ${all.join(' ')}`);
    const healthDeadline = Date.now() + 90_000;
    for (;;) {
      this.check();
      if (!alive(child)) throw new Error(`the controller exited (${child.exitCode ?? child.signalCode}); its log follows`);
      try {
        if ((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).ok) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > healthDeadline) throw new Error('the controller did not serve /healthz within 90s');
      await new Promise((r) => setTimeout(r, 200));
    }
    say(`controller healthy; metrics at http://127.0.0.1:${metricsPort}/metrics`);
    return { metricsPort };
  }

  /**
   * Runs the act, then stops with 0, or 1 when it failed. `steps` undoes what
   * the act did, in order; the directory and any process naming it go last.
   */
  run(main: () => Promise<void>, steps: (attempt: Attempt) => Promise<void>): void {
    let signals = 0;
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      process.on(sig, () => {
        signals++;
        if (this.stopping) {
          if (signals >= 3) {
            say(`${sig} again: exiting without finishing the cleanup`);
            process.exit(1);
          }
          say(`${sig}: already stopping (send it twice more to exit at once)`);
          return;
        }
        say(`${sig}: stopping everything`);
        // The user asked for it and everything is cleaned up: that is a clean exit.
        void this.stop(0, steps);
      });
    }
    main().then(
      () => this.stop(0, steps),
      (err) => {
        if (this.stopping) return; // a signal is already tearing everything down
        say(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
        this.failed = true;
        void this.stop(1, steps);
      },
    );
  }

  private stop(code: number, steps: (attempt: Attempt) => Promise<void>): Promise<void> {
    this.stopping ??= this.teardown(steps).then(
      (ok) => process.exit(ok ? code : 1),
      (err) => {
        process.stderr.write(`teardown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
    return this.stopping;
  }

  /** Undoes everything, in order; safe to run at any point. Resolves true when nothing is left. */
  private async teardown(steps: (attempt: Attempt) => Promise<void>): Promise<boolean> {
    let ok = true;
    // Every step runs even if one before it failed.
    const attempt: Attempt = async (what, fn) => {
      try {
        await fn();
      } catch (err) {
        ok = false;
        say(`${what}: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
    await steps(attempt);
    const root = this.root;
    if (!root) return ok;
    for (const p of processesMentioning(root)) {
      ok = false;
      say(`process ${p.pid} was still running; killing it: ${p.cmdline.slice(0, 160)}`);
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    if ((this.failed || !ok) && this.controllerLog) {
      try {
        const lines = readFileSync(this.controllerLog, 'utf8').trimEnd().split('\n').slice(-15);
        say('last lines of the controller log:');
        block(lines.map((l) => (l.length > 400 ? `${l.slice(0, 400)}...` : l)).join('\n'));
      } catch {
        // no log
      }
    }
    if (this.opts.keepDir) {
      say(`kept ${root} (logs: ${this.opts.keptFiles}); remove it yourself`);
      return ok;
    }
    await attempt('removing the demo directory', () => rm(root, { recursive: true, force: true }));
    say(`removed ${root}`);
    return ok;
  }
}
