// `make demo-installed` end to end: the chart's controller pods on the real
// node rent a machine through the chart's provider script; the demo must show
// the phases, run ssh on the machine, exit 0 and leave no process, directory or
// network namespace behind.
import { describe, it, expect, afterAll } from '@jest/globals';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { NETNS } from './cluster/node.js';
import { expectNothingLeft, killLeftovers, startDemo } from './support/demo.js';

afterAll(killLeftovers);

describe('make demo-installed', () => {
  it('installs the chart on a real node, runs a Lease to Ready, ssh and idle release, exits 0 and leaves nothing', async () => {
    const demo = startDemo(join(process.cwd(), 'e2e/demo/installed.ts'), { DEMO_IDLE_TIMEOUT: '5s' });
    const { code, signal } = await demo.exit;
    const out = demo.output();
    expect({ code, signal, tail: code === 0 ? '' : out.slice(-4000) }).toEqual({ code: 0, signal: null, tail: '' });
    expect(out).toMatch(/installed: both controller pods Ready/);
    expect(out).toMatch(/\/etc\/leasehold\/providers\/netns-machine\.sh/);
    expect(out).toMatch(/nsenter --net=\/run\/netns\/\S+ ssh -i \S+\/device\/id_ed25519 .*-o StrictHostKeyChecking=yes -p \d+ \S+@10\.201\.0\.1/);
    expect(out).toMatch(/ssh> Linux \S+ /);
    expect(out).toMatch(/phases seen: +.*Ready.*-> Released/);
    await expectNothingLeft(demo.root());
    expect(existsSync(`/run/netns/${NETNS}`)).toBe(false);
  }, 900_000);
});
