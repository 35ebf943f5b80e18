// `make demo` end to end: the demo entry point as a child process, with a
// short idle timeout. It must show the Lease's phases from the real watch, run
// ssh on the machine, exit 0, and leave no process or directory behind, also
// when it is interrupted while the Lease is Ready.
import { describe, it, expect, afterAll } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { processesMentioning } from './demo/procs.js';

const entry = join(process.cwd(), 'e2e/demo/main.ts');
const roots: string[] = [];

interface Demo {
  child: ChildProcess;
  output: () => string;
  /** Resolves once the output matches `re`. */
  until: (re: RegExp, ms: number) => Promise<void>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  root: () => string;
}

function startDemo(idleTimeout: string): Demo {
  // Its own process group, as a terminal would give `make demo`: a Ctrl-C
  // there reaches every process of the group, not only the demo.
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', DEMO_IDLE_TIMEOUT: idleTimeout, DEMO_CHECK_INTERVAL: '2s' },
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
async function expectNothingLeft(root: string): Promise<void> {
  // The controller's and sshd's children may take a moment to be reaped.
  for (let i = 0; i < 20 && processesMentioning(root).length; i++) await new Promise((r) => setTimeout(r, 250));
  expect(processesMentioning(root).map((p) => p.cmdline)).toEqual([]);
  expect(existsSync(root)).toBe(false);
}

afterAll(() => {
  // Should a test fail half-way, do not leave its processes to the next suite.
  for (const root of roots) {
    for (const p of processesMentioning(root)) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
});

const row = (phase: string) => new RegExp(`\\| demo\\s+${phase}\\s`);

describe('make demo', () => {
  it('shows Pending, Launching, Ready, Idle and Released, runs ssh on the machine, exits 0 and leaves nothing', async () => {
    const demo = startDemo('6s');
    const { code, signal } = await demo.exit;
    const out = demo.output();
    expect({ code, signal, tail: code === 0 ? '' : out.slice(-3000) }).toEqual({ code: 0, signal: null, tail: '' });
    for (const phase of ['Pending', 'Launching', 'Ready', 'Idle', 'Released']) expect(out).toMatch(row(phase));
    // The printed ssh command, and its real run.
    expect(out).toMatch(/ssh -i \S+\/device\/id_ed25519 .*-o UserKnownHostsFile=\S+\/known_hosts -o StrictHostKeyChecking=yes -p \d+ \S+@127\.0\.0\.1/);
    expect(out).toMatch(/ssh> Linux \S+ /);
    expect(out).toMatch(/phases seen: +Pending -> Launching -> Ready -> Idle -> (Releasing -> )?Released/);
    const ready = /Offer applied -> Ready: +([0-9.]+)s/.exec(out);
    expect(ready).not.toBeNull();
    process.stdout.write(`demo: Offer applied -> Ready in ${ready![1]} s\n`);
    await expectNothingLeft(demo.root());
  }, 300_000);

  it('Ctrl-C (SIGINT to the whole process group) while the Lease is Ready stops everything cleanly', async () => {
    const demo = startDemo('5m');
    await demo.until(row('Ready'), 240_000);
    const root = demo.root();
    expect(processesMentioning(join(root, 'machines')).length).toBeGreaterThan(0);
    process.kill(-demo.child.pid!, 'SIGINT');
    const { code, signal } = await demo.exit;
    const out = demo.output();
    expect({ code, signal, tail: code === 0 ? '' : out.slice(-3000) }).toEqual({ code: 0, signal: null, tail: '' });
    expect(out).toMatch(/SIGINT: stopping everything/);
    await expectNothingLeft(root);
  }, 300_000);

  it('SIGTERM to the demo alone while the Lease is Ready releases it through the Lease and stops everything', async () => {
    const demo = startDemo('5m');
    await demo.until(row('Ready'), 240_000);
    const root = demo.root();
    demo.child.kill('SIGTERM');
    const { code, signal } = await demo.exit;
    const out = demo.output();
    expect({ code, signal, tail: code === 0 ? '' : out.slice(-3000) }).toEqual({ code: 0, signal: null, tail: '' });
    expect(out).toMatch(/deleting Lease demo\/demo/);
    // The controller released the machine, so the provider fallback found nothing to do.
    expect(out).not.toMatch(/releasing machine \S+ with the provider's release command/);
    await expectNothingLeft(root);
  }, 300_000);
});
