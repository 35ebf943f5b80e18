// Acquire's stderr, shown to the user while a Lease is Launching: the latest
// line in status.message (as well as a Provider event per line).
import { describe, it, expect } from '@jest/globals';
import { join } from 'node:path';
import { getJSON, waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const slow = join(process.cwd(), 'e2e/providers/slow-machine.sh');
const MARKER = 'e2e-progress-7f3a: waiting for capacity in zone test-1a';
// A line the script does not mark for users, as set -x would print one.
const WHISPER = '+ curl -H "Authorization: Bearer e2e-secret-41c9"';
const fx = leaseSuite('progress');

describe('acquire progress', () => {
  it("shows acquire's latest stderr line marked for users in status.message while Launching, and no unmarked line", async () => {
    // The line is printed first, then acquire waits 6 s: the status shows it within the ~2 s write window.
    const o = await fx.offer('slow', sshdCommands([`SLOW_MACHINE_WHISPER=${WHISPER}`, `SLOW_MACHINE_SAY=${MARKER}`, 'SLOW_MACHINE_BEFORE=6'], slow));
    const writesBefore = await fx.controller.writes();
    const t0 = Date.now();
    await fx.lease('slow', { where: 'cpus>=1', offer: o });
    const seen = await waitFor('the progress line in status.message', async () => {
      const s = await fx.status('slow');
      return s?.message?.includes(MARKER) ? s : undefined;
    }, 20_000, 100);
    const shownAfter = Date.now() - t0;
    expect(seen.phase).toBe('Launching');
    expect(seen.message).toBe(`acquiring from ${o}: ${MARKER}`);
    const st = await fx.waitPhase('slow', 'Ready', 60_000);
    expect(st.message).toMatch(/^ready \(/);
    const events = await getJSON(fx.kubectl, ['-n', fx.ns, 'events', '--field-selector', 'involvedObject.name=slow']);
    expect(events.items.filter((e: any) => e.reason === 'Provider').map((e: any) => e.message)).toContain(MARKER);
    expect(JSON.stringify(events.items)).not.toContain('e2e-secret-41c9');
    expect(seen.message).not.toContain('e2e-secret-41c9');
    const del = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'slow', '--timeout=60s']);
    expect(del.code).toBe(0);
    expect(fx.sshdFor(st.leaseID)).toBe('');
    process.stdout.write(`acquire progress line in status.message ${shownAfter} ms after kubectl apply; controller writes for the lifecycle: ${(await fx.controller.writes()) - writesBefore}\n`);
  });
});
