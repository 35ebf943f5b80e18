// A `kubectl get -w -o json` the demo narrates from: it keeps the latest copy
// of each object, tells the demo of every change, and lets a step wait for a
// condition over what it has seen instead of sleeping.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { say, seconds, Stopping } from './output.js';
import type { KubectlTarget } from './session.js';
import { Waiters } from './waiters.js';

/** An object as kubectl prints it: read field by field, like the tests read `kubectl -o json`. */
export type Obj = Record<string, any>;

export class ObjectWatch {
  readonly objects = new Map<string, Obj>();
  private child: ChildProcess | undefined;
  private readonly waiters = new Waiters();
  private ended: string | undefined;

  constructor(
    private readonly target: KubectlTarget,
    private readonly args: string[],
    private readonly onChange: (obj: Obj, previous: Obj | undefined) => void,
    private readonly stopping: () => boolean,
  ) {}

  get process(): ChildProcess | undefined {
    return this.child;
  }

  start(): void {
    const child = spawn(join(this.target.binDir, 'kubectl'), ['--kubeconfig', this.target.kubeconfig, 'get', ...this.args, '-w', '-o', 'json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    // kubectl prints each object as indented JSON: a top-level object ends at a line that is only "}".
    let text = '';
    createInterface({ input: child.stdout! }).on('line', (line) => {
      text += `${line}\n`;
      if (line !== '}') return;
      const obj = JSON.parse(text) as Obj;
      text = '';
      for (const item of obj.kind?.endsWith('List') ? obj.items : [obj]) this.update(item);
    });
    createInterface({ input: child.stderr! }).on('line', (line) => say(`kubectl: ${line}`));
    child.once('exit', (code, signal) => {
      this.ended = `kubectl get ${this.args.join(' ')} -w exited (${signal ?? code})`;
      this.waiters.wake();
    });
  }

  /** Resolves with what `probe` finds once it finds something; rejects on a dead watch, stopping or the timeout. */
  until<T>(what: string, probe: () => T | undefined | false, timeoutMs: number): Promise<T> {
    return this.waiters.wait(`${what}: not seen within ${seconds(timeoutMs)}`, timeoutMs, () => {
      const found = probe();
      if (found) return { value: found };
      if (this.ended) return new Error(`${what}: ${this.ended}`);
      if (this.stopping()) return new Stopping('stopping');
      return undefined;
    });
  }

  private update(obj: Obj): void {
    const key = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
    const previous = this.objects.get(key);
    this.objects.set(key, obj);
    this.onChange(obj, previous);
    this.waiters.wake();
  }
}
