// `make demo` end to end: the demo entry point as a child process, with a
// short idle timeout. It must show the Lease's phases from the real watch, run
// ssh on the machine, exit 0, and leave no process or directory behind, also
// when it is interrupted while the Lease is Ready.
import { describe, it, expect, afterAll } from '@jest/globals';
import { join } from 'node:path';
import { processesMentioning } from './demo/procs.js';
import { expectNothingLeft, killLeftovers, startDemo as start } from './support/demo.js';

const entry = join(process.cwd(), 'e2e/demo/main.ts');
const startDemo = (idleTimeout: string) => start(entry, { DEMO_IDLE_TIMEOUT: idleTimeout, DEMO_CHECK_INTERVAL: '2s' });

afterAll(killLeftovers);

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
