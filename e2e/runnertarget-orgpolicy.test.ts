// A RunnerTarget in a project whose organisation policy forbids external IPs
// (constraints/compute.vmExternalIpAccess): the launch is refused once, in one
// zone, its receipt settles Failed, no VM is left, and the target shows
// Ready=False OrgPolicyRefused naming the constraint and spec.gce.externalIP
// without trying again on every pass. Set spec.gce.externalIP false and the
// host launches with no access config, is reached at its internal address,
// and its runner comes online.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { condition, startRunnerTargetPool, TEST_TIMES, type RunnerTargetPool } from './support/runnertarget.js';

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rtorgpol');
});

afterAll(async () => {
  await pool?.stop();
});

const NAME = 'orgpol';

describe('RunnerTarget under an organisation policy', () => {
  it('a forbidden external IP ends the check naming the constraint and spec.gce.externalIP; with externalIP false the host runs on its internal address', async () => {
    pool.gce.orgPolicy.forbidExternalIp = true;
    await pool.target(NAME, NAME, { floor: 1, maxHosts: 1 });

    const refused = await waitFor('Ready=False OrgPolicyRefused', async () => {
      const t = await pool.get(NAME);
      return condition(t, 'Ready')?.reason === 'OrgPolicyRefused' ? t : undefined;
    }, 30_000, 300);
    const ready = condition(refused, 'Ready');
    expect(ready.status).toBe('False');
    expect(ready.message).toContain('constraints/compute.vmExternalIpAccess');
    expect(ready.message).toContain('spec.gce.externalIP');
    // One insert, in the first zone only: a policy refusal is not capacity.
    expect(pool.gce.inserts().filter((i) => i.name.startsWith(`${NAME}-`)).map((i) => `${i.zone} ${i.refused ?? 'made'}`)).toEqual(['us-central1-a CONDITION_NOT_MET']);
    expect(pool.vmsOf(NAME)).toEqual([]);
    const launches = (refused.status.receipts ?? []).filter((r: any) => r.action === 'Launch');
    expect(launches.map((r: any) => r.phase)).toEqual(['Failed']);
    expect(launches[0].message).toContain('OrgPolicyRefused');
    const events = await pool.events(NAME);
    expect(events.some((e: any) => e.reason === 'OrgPolicyRefused' && e.message.includes('spec.gce.externalIP'))).toBe(true);

    // No hot loop: with nothing open, no check follows within several follow-up periods (checkInterval is 1h).
    await expect(waitFor('another insert', async () => pool.gce.inserts().filter((i) => i.name.startsWith(`${NAME}-`)).length > 1, TEST_TIMES.followUpMs * 2.5, 200)).rejects.toThrow();

    await pool.must(['patch', 'runnertarget', NAME, '-n', pool.ns, '--type=merge', '-p', '{"spec":{"gce":{"externalIP":false}}}']);
    const runner = await waitFor('the host runner online', async () => pool.runnersOf(NAME).find((r) => r.status === 'online'), 60_000, 300);
    const [vm] = pool.vmsOf(NAME);
    expect(vm).toBeDefined();
    expect(runner.name).toBe(vm!.name);
    // Asked for no access config: the API shows the VM with its internal address only, which is where its sshd listens.
    expect(vm!.external).toBe(false);
    expect((vm!.body.networkInterfaces as any[]).every((n) => n.accessConfigs === undefined)).toBe(true);
    expect(pool.machines.get(vm!.name)!.address).toBe(vm!.address);
    const t = await waitFor('the launch receipt Done and Ready=True', async () => {
      const got = await pool.get(NAME);
      const open = (got?.status?.receipts ?? []).filter((r: any) => r.phase === 'Intended');
      return open.length === 0 && condition(got, 'Ready')?.status === 'True' ? got : undefined;
    }, 30_000, 300);
    expect((t.status.receipts ?? []).filter((r: any) => r.action === 'Launch').map((r: any) => r.phase)).toEqual(['Failed', 'Done']);
  });
});
