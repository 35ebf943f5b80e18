// A Lease whose latest idle check failed: its machine's sshd is stopped, so
// the check cannot reach it. The Lease shows why, leasehold run neither
// reuses it nor runs on it by name, a check that succeeds again restores it,
// and activity annotated while it fails does not keep it past its idle
// deadline.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanupCLI, cliUser, newDevice, runCLI, type CLIUser } from './support/cli.js';
import { getJSON, waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const IDLE_TIMEOUT_S = 90;
const fx = leaseSuite('checkfail');
let user: CLIUser;
const laptop = newDevice();
const run = (args: string[]) => runCLI(args, { kubeconfig: user.kubeconfig, device: laptop });
const leases = async () => (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev']))!.items as any[];
const readyCondition = (st: any) => (st?.conditions ?? []).find((c: any) => c.type === 'Ready');

function stopSshd(leaseID: string): void {
  const pid = Number(readFileSync(join(fx.machines, leaseID, 'sshd.pid'), 'utf8').trim());
  process.kill(pid, 'SIGTERM');
}

function startSshd(leaseID: string): void {
  const dir = join(fx.machines, leaseID);
  // The same config, so the same port and host key: the machine answers again as itself.
  execFileSync('/usr/sbin/sshd', ['-f', join(dir, 'sshd_config'), '-E', join(dir, 'sshd.log')]);
}

beforeAll(async () => {
  user = await cliUser(fx.kubectl, fx.ns, 'cli-user', `lh-checkfail-${fx.suffix}`);
  await fx.offer('box', { ...sshdCommands(), idleTimeout: `${IDLE_TIMEOUT_S}s`, maxLifetime: '1h', pricePerHour: 0.25 });
}, 60_000);

afterAll(() => cleanupCLI(fx.kubectl, fx.ns, user), 120_000);

describe('a Lease whose latest check failed', () => {
  it('is not handed out, is restored by a check that succeeds, and ends at its idle deadline whatever activity is annotated', async () => {
    expect((await run(['run', '--where', 'cpus>=1', '--', 'true'])).code).toBe(0);
    const [first] = await leases();
    const name = first.metadata.name as string;
    const leaseID = first.status.leaseID as string;

    stopSshd(leaseID);
    const failed = await waitFor('Ready=False MachineUnreachable', async () => {
      const st = await fx.status(name);
      return readyCondition(st)?.reason === 'MachineUnreachable' ? st : undefined;
    }, 30_000);
    expect(failed.phase).toBe('Idle');
    expect(readyCondition(failed)).toMatchObject({ status: 'False', message: expect.stringContaining('not handed out until a check succeeds') });

    const named = await run(['run', '--lease', name, '--', 'touch', 'never']);
    expect(named.code).toBe(253);
    expect(named.stderr).toContain(`Lease ${name} failed its latest check (MachineUnreachable): the machine could not be reached`);

    const byWhere = await run(['run', '--where', 'cpus>=1', '--', 'true']);
    expect(byWhere.code).toBe(0);
    expect(byWhere.stderr).toMatch(/creating Lease cpus-1-[0-9a-f]{4}/);
    expect(byWhere.stderr).not.toContain(`reusing Lease ${name}`);
    const second = (await leases()).find((l) => l.metadata.name !== name)!;
    await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', second.metadata.name, '--wait=false']);

    startSshd(leaseID);
    await waitFor('Ready=True again', async () => readyCondition(await fx.status(name))?.status === 'True', 30_000);
    const restored = await run(['run', '--lease', name, '--', 'echo', 'back']);
    expect(restored.code).toBe(0);
    expect(restored.stdout).toBe('back\n');
    await waitFor('the run recorded as activity', async () => Date.parse((await fx.status(name)).lastActivityAt) >= Date.now() - 60_000, 30_000);

    stopSshd(leaseID);
    await waitFor('Ready=False again', async () => readyCondition(await fx.status(name))?.reason === 'MachineUnreachable', 30_000);
    const before = await fx.status(name);
    const deadline = Date.parse(before.lastActivityAt) + IDLE_TIMEOUT_S * 1000;
    await fx.kubectl(['-n', fx.ns, 'annotate', '--overwrite', 'leases.leasehold.dev', name, `leasehold.dev/activity=${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}`]);

    const ended = await fx.waitPhase(name, 'Released', IDLE_TIMEOUT_S * 1000 + 60_000);
    expect(ended.endReason).toBe('IdleTimeout');
    expect(ended.lastActivityAt).toBe(before.lastActivityAt);
    // Released at the deadline the activity recorded before the failure set, not a window later.
    expect(Date.now()).toBeGreaterThanOrEqual(deadline);
    expect(Date.now()).toBeLessThan(deadline + IDLE_TIMEOUT_S * 1000);
    await waitFor('the other Lease released and gone', async () => !(await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', second.metadata.name])), 60_000);
  }, 400_000);
});
