// Runs a demo act as a process, as `make demo` would, and checks it left nothing behind.
import { expect } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { processesMentioning } from '../demo/procs.js';

const roots: string[] = [];

export interface Demo {
  child: ChildProcess;
  output: () => string;
  /** Resolves once the output matches `re`. */
  until: (re: RegExp, ms: number) => Promise<void>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  root: () => string;
}

export function startDemo(entry: string, env: Record<string, string> = {}): Demo {
  // Its own process group, as a terminal would give `make demo`: a Ctrl-C
  // there reaches every process of the group, not only the demo.
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', ...env },
  });
  let out = '';
  let listeners: Array<() => void> = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const l of listeners) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      for (const l of listeners) l();
      resolve({ code, signal });
    }),
  );
  return {
    child,
    output: () => out,
    exit,
    root: () => {
      const m = /demo directory (\S+)/.exec(out);
      if (!m) throw new Error(`the demo did not say where its directory is:\n${out}`);
      if (!roots.includes(m[1]!)) roots.push(m[1]!);
      return m[1]!;
    },
    until: (re, ms) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => finish(new Error(`no ${re} in the demo output after ${ms} ms:\n${out}`)), ms);
        const check = () => {
          if (re.test(out)) finish();
          else if (child.exitCode !== null || child.signalCode !== null) finish(new Error(`the demo exited before ${re}:\n${out}`));
        };
        const finish = (err?: Error) => {
          clearTimeout(timer);
          listeners = listeners.filter((l) => l !== check);
          if (err) reject(err);
          else resolve();
        };
        listeners.push(check);
        check();
      }),
  };
}

/** Asserts the demo left nothing: no process naming its directory, no directory. */
export async function expectNothingLeft(root: string): Promise<void> {
  // The controller's and sshd's children may take a moment to be reaped.
  for (let i = 0; i < 20 && processesMentioning(root).length; i++) await new Promise((r) => setTimeout(r, 250));
  expect(processesMentioning(root).map((p) => p.cmdline)).toEqual([]);
  expect(existsSync(root)).toBe(false);
}

/** Should a test fail half-way, do not leave its processes to the next suite. */
export function killLeftovers(): void {
  for (const root of roots) {
    for (const p of processesMentioning(root)) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

