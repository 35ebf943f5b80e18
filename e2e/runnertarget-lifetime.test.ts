// The lifetime bound in Compute Engine itself: every host is inserted with
// scheduling.maxRunDuration (spec.gce.maxRunDuration) and DELETE, so the
// cloud ends a VM the controller no longer can; the controller replaces an
// idle host before that bound. Time is compressed on both sides: the
// emulator's maxRunDurationScale and the controller's --runner-lifetime-scale
// make a 1 h bound 60 s, with a 30 s margin.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { startRunnerTargetPool, targetSpec, type RunnerTargetPool } from './support/runnertarget.js';

const SCALE = 1 / 60;
let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtlife');
  pool.gce.maxRunDurationScale = SCALE;
  await pool.startController(['--runner-lifetime-scale', String(SCALE)]);
});

afterAll(async () => {
  await pool?.stop();
});

// On a timeout, what the pool looked like last: the VMs, runners, host states and conditions.
const onlineHost = (name: string, not: string[] = []) =>
  waitFor(`a host of ${name} with its runner online`, async () => {
    const vm = pool.vmsOf(name).find((v) => v.status === 'RUNNING' && !not.includes(v.name));
    if (vm && pool.runnersOf(name).some((r) => r.name === vm.name && r.status === 'online')) return vm;
    const t = await pool.get(name);
    throw new Error(
      JSON.stringify({ vms: pool.vmsOf(name).map((v) => `${v.name} ${v.status}`), runners: pool.runnersOf(name).map((r) => `${r.name} ${r.status}`), hosts: t?.status?.hosts, conditions: t?.status?.conditions, inserts: pool.gce.inserts() }),
    );
  }, 120_000, 300);

describe('RunnerTarget host lifetime', () => {
  it('an idle host is drained and deleted by the controller before Compute Engine would end it, and the floor gets a new one', async () => {
    // The repository exists at GitHub once it has a run; this job's label is none the pool's runners have, so only the floor counts.
    pool.gh.queueRun('renew', [{ labels: ['self-hosted', 'windows'] }]);
    const base = targetSpec(pool.gce, pool.gh, 'renew');
    await pool.target('renew', 'renew', { gce: { ...(base.gce as object), maxRunDuration: '1h' }, floor: 1, maxHosts: 2, checkInterval: '30s' });
    const first = await onlineHost('renew');
    expect(pool.gce.instance(first.zone, first.name)!.scheduling).toMatchObject({ instanceTerminationAction: 'DELETE', maxRunDuration: { seconds: '3600' } });

    const renewed = await waitFor('the HostRenewed event', async () => (await pool.events('renew')).find((e) => e.reason === 'HostRenewed' && e.message.includes(first.name)), 90_000, 500);
    expect(renewed.message).toContain('spec.gce.maxRunDuration (1h)');
    await pool.gce.waitForStatus(first.zone, first.name, 'GONE', 60_000);
    // The controller's delete, not the bound: the VM was deleted through the API.
    expect(pool.gce.requests.filter((r) => r.op === 'delete' && r.path.endsWith(`/instances/${first.name}`)).map((r) => r.status)).toContain(200);
    const second = await onlineHost('renew', [first.name]);
    expect(second.name).not.toBe(first.name);
  }, 300_000);

  it('with the controller gone, Compute Engine deletes the host at its bound', async () => {
    const host = await onlineHost('renew');
    await pool.controller.stop();
    try {
      await pool.gce.waitForStatus(host.zone, host.name, 'GONE', 120_000);
      expect(pool.gce.requests.filter((r) => r.op === 'delete' && r.path.endsWith(`/instances/${host.name}`))).toEqual([]);
    } finally {
      await pool.startController(['--runner-lifetime-scale', String(SCALE)]);
      await pool.quiet();
    }
  }, 300_000);
});
