// Compute Engine answers a RunnerTarget must not take for "the VM is gone": a
// zone aggregatedList could not read, and a status this controller does not
// know. In each, the host stays counted, nothing is deleted and no second VM
// is made. (A 409 alreadyExists for a repeated insert cannot be brought about
// from outside: resume repeats an insert only when the list lacks the VM, so a
// lost insert answer is simply found by the next list. It is table-tested in
// controllers/runnertarget/checkrun/launch.emulator.test.ts.)
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { startRunnerTargetPool, targetSpec, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtzones');
});

afterAll(async () => {
  await pool?.stop();
});

afterEach(() => pool.quiet());

/** A target holding one host at all times (floor 1), checked every 3 s (30 s at the tests' interval scale). */
async function floorOfOne(name: string, maxHosts: number): Promise<void> {
  await pool.target(name, name, { ...targetSpec(pool.gce, pool.gh, name), floor: 1, maxHosts, checkInterval: '30s' });
}

/** Resolves once `checks` more checks of `name` ended after now. */
async function checksPass(name: string, checks: number): Promise<any> {
  const from = Math.floor(Date.now() / 1000) * 1000;
  let seen = Date.parse((await pool.get(name))?.status?.lastCheckAt ?? '');
  let count = 0;
  return waitFor(`${checks} more checks of ${name}`, async () => {
    const t = await pool.get(name);
    const at = Date.parse(t?.status?.lastCheckAt ?? '');
    if (at > seen && at >= from) {
      seen = at;
      count++;
    }
    return count >= checks ? t : undefined;
  }, 90_000, 300);
}

const online = (name: string) => waitFor(`${name}'s runner online`, async () => pool.runnersOf(name).find((r) => r.status === 'online'), 90_000, 300);
/** Inserts that made (or were refused) a VM of target `name`; a repeat of a remembered requestId is not one. */
const insertsOf = (name: string) => pool.gce.inserts().filter((r) => r.name.startsWith(`${name}-`));
const reasons = async (name: string) => (await pool.events(name)).map((e: any) => `${e.reason}: ${e.message}`);

describe('RunnerTarget: Compute Engine answers that do not mean gone', () => {
  it('a zone aggregatedList cannot read keeps its host: ZoneUnreachable, no replacement for the floor, the host back once the zone answers', async () => {
    await floorOfOne('unreach', 2);
    await online('unreach');
    const vm = pool.vmsOf('unreach')[0]!;
    pool.gce.unreachableZones.add(vm.zone);
    try {
      const t = await checksPass('unreach', 2);
      expect(await reasons('unreach')).toContainEqual(expect.stringContaining(`ZoneUnreachable: Compute Engine could not list zone ${vm.zone}`));
      // Unseen is not gone: the host is still listed and the floor is not made up with a second VM.
      expect(t.status.hosts.map((h: any) => h.name)).toContain(vm.name);
      expect(pool.vmsOf('unreach').map((v) => v.name)).toEqual([vm.name]);
      expect(insertsOf('unreach')).toHaveLength(1);
    } finally {
      pool.gce.unreachableZones.delete(vm.zone);
    }
    const after = await checksPass('unreach', 1);
    expect(after.status.hosts.map((h: any) => [h.name, h.state])).toEqual([[vm.name, expect.stringMatching(/^(Idle|Busy)$/)]]);
    expect(pool.peakVMs('unreach')).toBe(1);
  }, 240_000);

  it('a VM in a status this controller does not know is shown Unknown and left alone, neither deleted nor counted twice; a known status restores it', async () => {
    await floorOfOne('unknown', 1);
    await online('unknown');
    const vm = pool.vmsOf('unknown')[0]!;
    pool.gce.setStatus(vm.zone, vm.name, 'RECALIBRATING');
    const t = await waitFor('the host shown Unknown', async () => {
      const got = await pool.get('unknown');
      return got?.status?.hosts?.find((h: any) => h.name === vm.name && h.state === 'Unknown') ? got : undefined;
    }, 90_000, 300);
    expect(t.status.hosts.find((h: any) => h.name === vm.name).message).toContain('RECALIBRATING');
    await checksPass('unknown', 2);
    expect(await reasons('unknown')).toContainEqual(expect.stringContaining(`UnknownVMStatus: VM ${vm.name} in ${vm.zone} shows status RECALIBRATING`));
    // Not deleted, and maxHosts 1 still holds with the Unknown VM counted.
    expect(pool.gce.requests.filter((r) => r.op === 'delete' && r.path.endsWith(`/${vm.name}`))).toHaveLength(0);
    expect(pool.vmsOf('unknown').map((v) => v.name)).toEqual([vm.name]);
    expect(insertsOf('unknown')).toHaveLength(1);

    pool.gce.setStatus(vm.zone, vm.name, 'RUNNING');
    await waitFor('the host known again', async () => {
      const got = await pool.get('unknown');
      return got?.status?.hosts?.find((h: any) => h.name === vm.name && /^(Idle|Busy)$/.test(h.state)) ? got : undefined;
    }, 90_000, 300);
    expect(pool.peakVMs('unknown')).toBe(1);
  }, 240_000);
});
