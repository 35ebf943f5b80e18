// What the demo shows of its Lease: `kubectl get -w` as it prints, each change
// of status.message, and the phases seen, which the demo's steps wait on.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { LEASE_PHASES } from '../../src/api/lease.js';
import { say, seconds, started, Stopping } from './output.js';
import { Waiters } from './waiters.js';

export interface Seen {
  phase: string;
  at: number;
}

export class LeaseWatch {
  readonly seen: Seen[] = [];
  private readonly children: ChildProcess[] = [];
  private readonly waiters = new Waiters();
  private ended: string | undefined;

  constructor(
    private readonly opts: { kubeconfig: string; binDir: string; namespace: string; lease: string; stopping: () => boolean },
  ) {}

  get processes(): readonly ChildProcess[] {
    return this.children;
  }

  /** Prints `kubectl get leases.leasehold.dev -w` and records the Lease's phases. */
  start(): void {
    const child = this.kubectl(['get', 'leases.leasehold.dev', '-w'], ['ignore', 'pipe', 'pipe']);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      process.stdout.write(`[${seconds(Date.now() - started).padStart(6)}]   | ${line}\n`);
      const cols = line.trim().split(/\s+/);
      // PHASE is the second column; a Lease with no status yet shows WHERE there.
      const phase = cols[1];
      if (cols[0] === this.opts.lease && phase && (LEASE_PHASES as readonly string[]).includes(phase) && this.seen[this.seen.length - 1]?.phase !== phase) {
        this.seen.push({ phase, at: Date.now() });
      }
      this.waiters.wake();
    });
    child.once('exit', (code, signal) => {
      this.ended = `kubectl get -w exited (${signal ?? code})`;
      this.waiters.wake();
    });
    createInterface({ input: child.stderr! }).on('line', (line) => say(`kubectl: ${line}`));
  }

  /** Prints status.message each time it changes: what the controller is doing, in its words. */
  followMessages(): void {
    const child = this.kubectl(['get', 'leases.leasehold.dev', this.opts.lease, '-w', '-o', 'jsonpath={.status.message}{"\\n"}'], ['ignore', 'pipe', 'ignore']);
    let last = '';
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const msg = line.trim();
      if (msg && msg !== last) say(`  status.message: ${msg}`);
      last = msg || last;
    });
  }

  /** Resolves with the time the watch first showed `phase`; rejects on Failed, a dead watch, stopping or the timeout. */
  phaseSeen(phase: string, timeoutMs: number): Promise<number> {
    return this.waiters.wait(`Lease not ${phase} after ${seconds(timeoutMs)}`, timeoutMs, () => {
      const hit = this.seen.find((s) => s.phase === phase);
      if (hit) return { value: hit.at };
      if (phase !== 'Failed' && this.seen.some((s) => s.phase === 'Failed')) return new Error('Lease Failed');
      if (this.ended) return new Error(this.ended);
      if (this.opts.stopping()) return new Stopping('stopping');
      return undefined;
    });
  }

  private kubectl(args: string[], stdio: ['ignore', 'pipe', 'pipe' | 'ignore']): ChildProcess {
    const child = spawn(join(this.opts.binDir, 'kubectl'), ['--kubeconfig', this.opts.kubeconfig, '-n', this.opts.namespace, ...args], { stdio });
    this.children.push(child);
    return child;
  }
}
