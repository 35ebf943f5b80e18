// --acquire-timeout: an acquire that runs too long is stopped, and a machine
// whose agent never answers is given up; both end Failed with AcquireTimeout,
// after the release command has run, with no sshd left behind.
import { describe, it, expect } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const slow = join(process.cwd(), 'e2e/providers/slow-machine.sh');
const fx = leaseSuite('timeouts', { acquireTimeout: '3s', maxLeases: 4 });

const released = () => (existsSync(join(fx.machines, 'released')) ? readFileSync(join(fx.machines, 'released'), 'utf8').split('\n') : []);

function expectAcquireTimeout(st: any) {
  expect(st.reason).toBe('AcquireTimeout');
  const ready = st.conditions.find((c: any) => c.type === 'Ready');
  expect(ready.status).toBe('False');
  expect(ready.reason).toBe('AcquireTimeout');
  expect(ready.message).toBe(st.message);
  // release ran (the provider recorded it) and confirmed
  expect(released()).toContain(st.leaseID);
  expect(st.releasedAt).toBeDefined();
  expect(fx.sshdFor(st.leaseID)).toBe('');
  expect(existsSync(join(fx.machines, st.leaseID))).toBe(false);
}

describe('acquireTimeout', () => {
  it('stops an acquire that outlives it, releases what it made, and fails AcquireTimeout', async () => {
    // The sshd is up before acquire stalls: the stopped acquire leaves a machine that only release removes.
    const o = await fx.offer('stall', sshdCommands('SLOW_MACHINE_AFTER=60', slow));
    const t0 = Date.now();
    await fx.lease('stall', { where: 'cpus>=1', offer: o });
    const up = await fx.waitPhase('stall', 'Launching', 20_000);
    // The machine exists while acquire is still running.
    await waitFor('the stalled acquire started its sshd', async () => fx.sshdFor(up.leaseID) !== '', 10_000, 100);
    const st = await fx.waitPhase('stall', 'Failed', 30_000);
    const took = Date.now() - t0;
    expect(st.message).toMatch(/^acquire for offer /);
    expectAcquireTimeout(st);
    process.stdout.write(`acquire stopped by a 3s acquireTimeout: apply to Failed in ${took} ms\n`);
  });

  it('gives up on a machine whose agent never becomes reachable, releases it, and fails AcquireTimeout', async () => {
    const o = await fx.offer('deaf', sshdCommands('SLOW_MACHINE_WRONG_PORT=1', slow));
    await fx.lease('deaf', { where: 'cpus>=1', offer: o });
    const waiting = await waitFor('deaf waits for its agent', async () => {
      const s = await fx.status('deaf');
      return s?.phase !== 'Launching' || /waiting for the machine's agent/.test(s?.message ?? '') ? s : undefined;
    }, 20_000, 100);
    // On a loaded machine acquire itself may eat most of the 3 s, so the
    // waiting message can come and go between two polls; when it was seen,
    // the machine existed while its agent was awaited.
    if (waiting.phase === 'Launching') expect(fx.sshdFor(waiting.leaseID)).not.toBe('');
    const st = await fx.waitPhase('deaf', 'Failed', 30_000);
    // The agent-readiness path says so (a stalled acquire reads "acquire for offer ...").
    expect(st.message).toMatch(/acquireTimeout \(3s\)/);
    expectAcquireTimeout(st);
  });
});
