// Ctrl-C in leasehold run: while the Lease launches it is withdrawn (its
// machine released) unless another run waits on it; while the command
// runs, the first Ctrl-C goes to the command and a second one detaches.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { cleanupCLI, cliUser, newDevice, startCLI, type CLIUser } from './support/cli.js';
import { getJSON, waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const fx = leaseSuite('cli-int', { machinesOutliveTests: true });
let user: CLIUser;
let slow: string;
const start = (args: string[], device = newDevice()) => startCLI(args, { kubeconfig: user.kubeconfig, device });
const leases = async () => (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev']))!.items as any[];
const launching = () => waitFor('a Launching Lease', async () => (await leases()).find((l) => l.status?.phase === 'Launching'), 60_000);

beforeAll(async () => {
  user = await cliUser(fx.kubectl, fx.ns, 'cli-user', `lh-cli-int-${fx.suffix}`);
  // Acquire takes 6 s: time to press Ctrl-C while the Lease launches.
  slow = await fx.offer('slow', { ...sshdCommands('SSHD_MACHINE_ACQUIRE_DELAY=6'), idleTimeout: '10m', maxLifetime: '1h' });
}, 60_000);

afterAll(() => cleanupCLI(fx.kubectl, fx.ns, user), 120_000);

describe('Ctrl-C in leasehold run', () => {
  it('while the Lease launches withdraws it, and its machine is released', async () => {
    const run = start(['run', '--where', 'cpus>=1', '--offer', slow, '--', 'true']);
    const lease = await launching();
    run.child.kill('SIGINT');
    const r = await run.result;
    expect(r.code).toBe(130);
    expect(r.stderr).toContain(`interrupted; withdrew Lease ${lease.metadata.name}, so its machine is released`);
    await waitFor('the Lease gone', async () => (await leases()).length === 0, 60_000);
    expect(fx.sshdLeft()).toBe('');
  });

  it('keeps the Lease while another run waits on it; that run goes on to run its command', async () => {
    const first = start(['run', '--where', 'cpus>=1', '--offer', slow, '--', 'true']);
    const lease = await launching();
    const second = start(['run', '--where', 'cpus>=1', '--offer', slow, '--', 'echo', 'second-ran']);
    await waitFor('two waiters', async () => {
      const l = (await leases())[0];
      return (l?.metadata.annotations?.['leasehold.dev/waiters'] ?? '').split(',').length === 2;
    }, 30_000);
    first.child.kill('SIGINT');
    const a = await first.result;
    expect(a.code).toBe(130);
    expect(a.stderr).toContain(`interrupted; Lease ${lease.metadata.name} is kept`);
    const b = await second.result;
    expect(b.stderr).toMatch(new RegExp(`reusing Lease ${lease.metadata.name} \\(Launching`));
    expect(b.code).toBe(0);
    expect(b.stdout).toBe('second-ran\n');
    const [after, ...others] = await leases();
    expect(others).toHaveLength(0);
    expect(after.metadata.annotations?.['leasehold.dev/waiters']).toBeUndefined();
  });

  it('in leasehold ssh while the Lease launches, takes it off the waiters and keeps the Lease', async () => {
    await fx.lease('by-hand', { where: 'cpus>=1,arch=amd64', offer: slow });
    await fx.waitPhase('by-hand', 'Launching');
    const ssh = start(['ssh', 'by-hand', '--', 'true']);
    const waiters = async () => (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', 'by-hand']))?.metadata.annotations?.['leasehold.dev/waiters'];
    await waitFor('ssh waiting on the Lease', async () => /^ssh-[0-9a-f]{12}$/.test((await waiters()) ?? ''), 30_000);
    ssh.child.kill('SIGINT');
    const r = await ssh.result;
    expect(r.code).toBe(130);
    expect(await waiters()).toBeUndefined();
    const { leaseID } = await fx.status('by-hand');
    expect((await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'by-hand', '--timeout=60s'])).code).toBe(0);
    expect(fx.sshdFor(leaseID)).toBe('');
  });

  it('while the command runs, forwards the first Ctrl-C to it', async () => {
    const run = start(['run', '--where', 'cpus>=1', '--', 'trap "echo got-int; exit 7" INT; echo started; sleep 30; echo not-reached']);
    await waitFor('the command started', async () => run.stdoutSoFar().includes('started'), 30_000);
    run.child.kill('SIGINT');
    const r = await run.result;
    expect(r.stdout).toBe('started\ngot-int\n');
    expect(r.code).toBe(7);
  });

  it('detaches on a second Ctrl-C and leaves the command running', async () => {
    const run = start(['run', '--where', 'cpus>=1', '--', 'trap "" INT; echo started; sleep 30; echo finished']);
    await waitFor('the command started', async () => run.stdoutSoFar().includes('started'), 30_000);
    run.child.kill('SIGINT');
    await waitFor('the first Ctrl-C noted', async () => run.stderrSoFar().includes('press Ctrl-C again to detach'), 10_000);
    run.child.kill('SIGINT');
    const r = await run.result;
    expect(r.code).toBe(130);
    expect(r.stderr).toMatch(/detached from the command on .*; it keeps running on Lease/);
    // The wrapper's job record stays while the command runs: the controller counts the machine busy.
    const lease = (await leases()).find((l) => l.spec.where === 'cpus>=1');
    await waitFor('a busy check', async () => ((await fx.status(lease.metadata.name)).usage?.jobs ?? 0) >= 1, 20_000);
    // Released on request even with the detached command still running.
    const released = await start(['release', lease.metadata.name, '--wait']).result;
    expect(released.stdout).toBe(`Lease ${lease.metadata.name}: released\n`);
    expect(fx.sshdLeft()).toBe('');
  });
});
