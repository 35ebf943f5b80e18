// `make demo-peer` end to end: the PeerFleet act as a child process. It must
// narrate the verdict, the hosts' states, the peer Jobs running on our nodes,
// the drain for our own Job with the peer Jobs there run to their end, and an
// accounting equal to the peer's records; exit 0 and leave no process or
// directory behind, also when interrupted while peer Jobs run.
import { describe, it, expect, afterAll } from '@jest/globals';
import { join } from 'node:path';
import { processesMentioning } from './demo/procs.js';
import { expectNothingLeft, killLeftovers, startDemo } from './support/demo.js';

const entry = join(process.cwd(), 'e2e/demo/peer.ts');

afterAll(killLeftovers);

describe('make demo-peer', () => {
  it('lends idle nodes to the peer, drains one for our Job without cutting a peer Job off, shows the accounting, exits 0 and leaves nothing', async () => {
    const demo = startDemo(entry);
    const { code, signal } = await demo.exit;
    const out = demo.output();
    expect({ code, signal, tail: code === 0 ? '' : out.slice(-4000) }).toEqual({ code: 0, signal: null, tail: '' });
    for (const line of [
      /PeerFleet lend\/gpu-lending: verdict Ready/,
      /host gpu-1: Waiting -> Available/,
      /every node is idle past the idle window and the peer queue is empty: Available/,
      /event Normal Claimed: node gpu-\d claims peer Job peer-\d/,
      /all 5 peer Jobs run on our nodes/,
      // The peer's own `kubectl get jobs`, with the claim and host annotations.
      /NAME +CLAIMED-BY +HOST +START +COMPLETION +SUCCEEDED/,
      /peer-1 +\w+\/lend\.gpu-lending\/gpu-\d +\w+\/gpu-\d +\S+Z +\S+Z +1/,
      /our own 2-GPU Job work\/train arrives, pinned to gpu-\d/,
      /gpu-\d drains \(status\.hosts\[\]\.session\.drainReason: OurWorkQueued\)/,
      /event Warning Drain: our pending pod work\/train-\w+ could run on node gpu-\d/,
      /the peer Jobs on gpu-\d ran to their end, never cut off: peer-\d ran \d+s/,
      /our pod started on gpu-\d at \S+Z, after them/,
      /status\.accounting +5 +(\d+) +\$[0-9.]+ +\1 +\$[0-9.]+/,
      /gpu-1 lent +\d+ +(\d+) +\$[0-9.]+ +\1 /,
      /the accounting equals the sum of the peer records, to the second, in all and per host/,
      /gpu-lending +https:\/\/127\.0\.0\.1:\d+ +queue +true +true +3 Available +2\.5 +[0-9.]+/,
    ]) expect(out).toMatch(line);
    const wall = /whole demo: ([0-9.]+)s/.exec(out);
    expect(wall).not.toBeNull();
    process.stdout.write(`demo-peer: whole demo ${wall![1]} s\n`);
    await expectNothingLeft(demo.root());
  }, 300_000);

  it('Ctrl-C (SIGINT to the whole process group) while peer Jobs run stops both clusters and the controller cleanly', async () => {
    const demo = startDemo(entry);
    await demo.until(/all 5 peer Jobs run on our nodes/, 240_000);
    const root = demo.root();
    expect(processesMentioning(join(root, 'peer')).length).toBeGreaterThan(0);
    process.kill(-demo.child.pid!, 'SIGINT');
    const { code, signal } = await demo.exit;
    const out = demo.output();
    expect({ code, signal, tail: code === 0 ? '' : out.slice(-4000) }).toEqual({ code: 0, signal: null, tail: '' });
    expect(out).toMatch(/SIGINT: stopping everything/);
    expect(out).toMatch(/stopping both control planes/);
    await expectNothingLeft(root);
  }, 300_000);
});
