// Long effects run off the reconcile workers: slow launches do not hold back
// the checks and releases of other Leases, a delete withdraws a running
// acquire at once, and a rolling restart mid-acquire hands the launch over.
import { describe, it, expect, afterEach } from '@jest/globals';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControllerProcess } from './support/controller.js';
import { waitFor } from './support/kube.js';
import { leaseSuite } from './support/suite.js';

const SLOW = join(process.cwd(), 'e2e/providers/slow-machine.sh');
// Each test starts the controllers it needs.
const fx = leaseSuite('effects', { startController: false });
let controllers: ControllerProcess[] = [];

/** PIDs of processes whose environment holds LEASEHOLD_LEASE_ID=id (a provider command and its children). */
function providerProcesses(leaseID: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`).toString().split('\0').includes(`LEASEHOLD_LEASE_ID=${leaseID}`)) found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

function slowOffer(name: string, env: string[], idleTimeout = '20m'): Promise<string> {
  return fx.offer(name, { acquire: ['/usr/bin/env', ...env, SLOW, 'acquire'], release: ['/usr/bin/env', ...env, SLOW, 'release'], idleTimeout });
}

afterEach(async () => {
  await Promise.all(controllers.splice(0).map((c) => c.stop()));
});

describe('effects off the reconcile workers', () => {
  it('releases a Ready Lease at its idle deadline while every worker would be busy with slow launches', async () => {
    const checkSeconds = 2;
    controllers.push(await fx.startController(['--no-leader-elect', '--concurrency', '2', '--max-leases', '5', '--check-interval', `${checkSeconds}s`, '--acquire-timeout', '5m']));
    const quick = await slowOffer('quick', [], '20s');
    const slow = await slowOffer('slow', ['SLOW_MACHINE_BEFORE=60']);
    await fx.lease('idler', { where: 'cpus>=1', offer: quick });
    const ready = await fx.waitPhase('idler', 'Ready', 120_000);
    for (const n of [1, 2, 3, 4]) await fx.lease(`launch-${n}`, { where: 'cpus>=1', offer: slow });
    await waitFor('four slow launches running', async () => {
      const phases = await Promise.all([1, 2, 3, 4].map(async (n) => (await fx.status(`launch-${n}`))?.phase));
      return phases.every((p) => p === 'Launching');
    }, 60_000);
    const released = await fx.waitPhase('idler', 'Released', 120_000);
    const deadline = Date.parse(ready.lastActivityAt) + 20_000;
    const lateSeconds = (Date.parse(released.releasedAt) - deadline) / 1000;
    process.stdout.write(`idle release with 4 slow launches on 2 workers: ${lateSeconds.toFixed(1)} s after the deadline\n`);
    expect(released.endReason).toBe('IdleTimeout');
    // The four acquires were still sleeping: a worker-bound controller would have released ~60 s late.
    for (const n of [1, 2, 3, 4]) expect((await fx.status(`launch-${n}`))?.phase).toBe('Launching');
    // Typically within one check interval of the deadline plus the release
    // itself (printed above); bounded here by half the 60 s a worker-bound
    // controller would need, so a loaded machine does not fail it.
    expect(lateSeconds).toBeLessThanOrEqual(30);
    for (const n of [1, 2, 3, 4]) await fx.kubectl(['delete', 'leases.leasehold.dev', `launch-${n}`, '-n', fx.ns, '--wait=false']);
    await waitFor('slow Leases withdrawn and gone', async () => (await fx.kubectl(['get', 'leases.leasehold.dev', '-n', fx.ns, '-o', 'name'])).stdout.trim() === 'lease.leasehold.dev/idler', 60_000);
  }, 300_000);

  it('a delete during Launching stops the acquire within 5 s and releases', async () => {
    controllers.push(await fx.startController(['--no-leader-elect', '--check-interval', '2s', '--acquire-timeout', '5m']));
    const slow = await slowOffer('withdraw', ['SLOW_MACHINE_BEFORE=120']);
    await fx.lease('withdrawn', { where: 'cpus>=1', offer: slow });
    const launching = await fx.waitPhase('withdrawn', 'Launching', 60_000);
    const id = launching.leaseID as string;
    const acquire = await waitFor('the acquire command running', async () => {
      const pids = providerProcesses(id);
      return pids.length > 0 && pids;
    }, 30_000);
    const deletedAt = Date.now();
    await fx.kubectl(['delete', 'leases.leasehold.dev', 'withdrawn', '-n', fx.ns, '--wait=false']);
    // The release that follows runs with the same lease ID: only the acquire's own processes count.
    await waitFor('the acquire command gone', async () => acquire.every((pid) => !existsSync(`/proc/${pid}`)), 30_000, 50);
    const stoppedMs = Date.now() - deletedAt;
    process.stdout.write(`acquire stopped ${stoppedMs} ms after the delete\n`);
    expect(stoppedMs).toBeLessThan(5000);
    await waitFor('the Lease released and gone', async () => (await fx.kubectl(['get', 'leases.leasehold.dev', 'withdrawn', '-n', fx.ns, '-o', 'name'])).code !== 0, 60_000);
    expect(readFileSync(join(fx.machines, 'released'), 'utf8').split('\n')).toContain(id);
  }, 180_000);

  it('a SIGTERM during an acquire that ends 5 s later leaves the Lease Ready under the next leader', async () => {
    const first = await fx.startController(['--check-interval', '2s']);
    controllers.push(first);
    await waitFor('the first replica leads', async () => (await first.metric('leasehold_leader')) === 1, 60_000);
    const second = await fx.startController(['--check-interval', '2s']);
    controllers.push(second);
    const slow = await slowOffer('handover', ['SLOW_MACHINE_BEFORE=5']);
    await fx.lease('handed-over', { where: 'cpus>=1', offer: slow });
    const launching = await fx.waitPhase('handed-over', 'Launching', 60_000);
    await waitFor('the acquire command running', async () => providerProcesses(launching.leaseID).length > 0, 30_000);
    await first.stop('SIGTERM');
    const ready = await fx.waitPhase('handed-over', 'Ready', 120_000);
    expect(ready.endReason).toBeUndefined();
    expect(await second.metric('leasehold_leader')).toBe(1);
    expect(first.child.exitCode).toBe(0);
    await fx.kubectl(['delete', 'leases.leasehold.dev', 'handed-over', '-n', fx.ns]);
  }, 240_000);
});
