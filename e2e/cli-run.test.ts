// leasehold run against the real control plane, the real controller and
// real sshd machines, as a user bound only to the chart's lease-editor role.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { cleanupCLI, cliUser, newDevice, runCLI, type CLIOptions, type CLIUser } from './support/cli.js';
import { getJSON, waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

// The Leases stay Ready between tests (each test builds on the one before): machines outlive tests.
const fx = leaseSuite('cli', { machinesOutliveTests: true });
let user: CLIUser;
let offer: string;
const laptop = newDevice();
const run = (args: string[], device = laptop, countOnly = false, program?: CLIOptions['program']) => runCLI(args, { kubeconfig: user.kubeconfig, device, countOnly, ...(program ? { program } : {}) });
const leases = async () => (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev']))!.items as any[];
const jobsStarted = (leaseID: string) => readFileSync(join(fx.machines, leaseID, 'home', 'jobs.log'), 'utf8').trim().split('\n').length;

beforeAll(async () => {
  user = await cliUser(fx.kubectl, fx.ns, 'cli-user', `lh-cli-${fx.suffix}`);
  offer = await fx.offer('box', { ...sshdCommands(), idleTimeout: '10m', maxLifetime: '1h', pricePerHour: 0.25 });
}, 60_000);

afterAll(() => cleanupCLI(fx.kubectl, fx.ns, user), 120_000);

describe('leasehold run', () => {
  it('creates a Lease on first use and runs the command there through the job wrapper, with the pinned key', async () => {
    const r = await run(['run', '--where', 'cpus>=1', '--', 'uname', '-a']);
    expect(r.stderr).toMatch(/no Lease in .* matches cpus>=1; creating Lease cpus-1-[0-9a-f]{4}/);
    expect(r.stderr).toMatch(/Offer box-\w+, \$0\.25\/h; launching/);
    expect(r.stderr).toMatch(/ready after \d+s \(linux\/amd64, \d+ cpu\)/);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Linux /);
    const [lease, ...others] = await leases();
    expect(others).toHaveLength(0);
    expect(lease.metadata.annotations['leasehold.dev/created-by']).toBe('leasehold-run');
    expect(lease.metadata.annotations['leasehold.dev/activity']).toBeDefined();
    expect(lease.metadata.annotations['leasehold.dev/waiters']).toBeUndefined();
    expect(lease.spec.sshKeys).toEqual([readFileSync(join(laptop, 'leasehold', 'id_ed25519.pub'), 'utf8').trim()]);
    expect(jobsStarted(lease.status.leaseID)).toBe(1);
  });

  it('reuses the Lease, renews its idle window, and exits with the remote code', async () => {
    const [before] = await leases();
    // The annotation holds whole seconds, and a run now takes less than one: a run in the same second would mark the same time.
    await waitFor('the second of the last mark over', async () => Date.now() >= Date.parse(before.metadata.annotations['leasehold.dev/activity']) + 1000, 5_000);
    const r = await run(['run', '--where', 'cpus>=1', '--', 'exit', '3']);
    expect(r.stderr).toMatch(new RegExp(`reusing Lease ${before.metadata.name} \\((Ready|Idle), Offer ${offer}, \\$0\\.25/h\\)`));
    expect(r.code).toBe(3);
    const [after, ...others] = await leases();
    expect(others).toHaveLength(0);
    expect(jobsStarted(after.status.leaseID)).toBe(2);
    const marked = after.metadata.annotations['leasehold.dev/activity'];
    expect(Date.parse(marked)).toBeGreaterThan(Date.parse(before.metadata.annotations['leasehold.dev/activity']));
    // The controller counts the run as activity: the idle window starts again from it.
    await waitFor('lastActivityAt renewed', async () => Date.parse((await fx.status(after.metadata.name)).lastActivityAt) >= Date.parse(marked), 30_000);
  });

  it('lets a second device share the Lease with a key of its own', async () => {
    const phone = newDevice();
    const r = await run(['run', '--where', 'cpus>=1', '--', 'echo', 'from-phone'], phone);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('from-phone\n');
    const [lease, ...others] = await leases();
    expect(others).toHaveLength(0);
    expect(lease.spec.sshKeys).toHaveLength(2);
    expect(lease.spec.sshKeys[1]).toBe(readFileSync(join(phone, 'leasehold', 'id_ed25519.pub'), 'utf8').trim());
    expect((await run(['run', '--where', 'cpus>=1', '--', 'echo', 'from-laptop'])).stdout).toBe('from-laptop\n');
  });

  it('refuses a device key other users can read, before touching the cluster', async () => {
    const shared = newDevice();
    expect((await run(['leases'], shared)).code).toBe(0);
    await run(['run', '--where', 'cpus>=1', '--', 'true'], shared);
    const key = join(shared, 'leasehold', 'id_ed25519');
    const [before] = await leases();
    chmodSync(key, 0o644);
    const r = await run(['run', '--where', 'cpus>=1', '--', 'touch', '/tmp/never'], shared);
    expect(r.code).toBe(255);
    expect(r.stderr).toContain(`${key} has mode 644, so other users can read the private key; run chmod 600 ${key}`);
    const [after] = await leases();
    expect(after.spec.sshKeys).toEqual(before.spec.sshKeys);
    expect(after.metadata.annotations['leasehold.dev/activity']).toBe(before.metadata.annotations['leasehold.dev/activity']);
  });

  it('streams 100 MB of stdout with flat memory', async () => {
    const small = await run(['run', '--where', 'cpus>=1', '--', 'head', '-c', '1000', '/dev/zero']);
    const big = await run(['run', '--where', 'cpus>=1', '--', 'head', '-c', '100000000', '/dev/zero'], laptop, true);
    expect(big.code).toBe(0);
    expect(big.stdoutBytes).toBe(100_000_000);
    process.stdout.write(`leasehold run peak RSS: ${(small.peakRSS / 2 ** 20).toFixed(0)} MiB for 1 kB of output, ${(big.peakRSS / 2 ** 20).toFixed(0)} MiB for 100 MB\n`);
    expect(small.peakRSS).toBeGreaterThan(0);
    expect(big.peakRSS - small.peakRSS).toBeLessThan(64 * 2 ** 20);
  });

  it('ssh: runs OpenSSH with the device key and only the pinned host key, or prints that command', async () => {
    const [lease] = await leases();
    const r = await run(['ssh', lease.metadata.name, '--', 'echo', 'over-openssh']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('over-openssh\n');
    const printed = await run(['ssh', lease.metadata.name, '--print']);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/^ssh -i \S+id_ed25519 -o IdentitiesOnly=yes -o UserKnownHostsFile=\S+ .*-o StrictHostKeyChecking=yes .*-p \d+ -- \S+@127\.0\.0\.1\n$/);
  });

  it('installs as leasehold (production build) and as kubectl-leasehold (krew archive), and measures run overhead on a Ready Lease against plain ssh', async () => {
    // The production build, as npm installs it: bin entries point at the bundle dist/bin/leasehold.mjs, started by its shebang.
    await promisify(execFile)('npm', ['run', '--silent', 'build'], { timeout: 300_000 });
    const entry = join(process.cwd(), 'dist/bin/leasehold.mjs');
    chmodSync(entry, 0o755);
    const bin = mkdtempSync(join(tmpdir(), 'leasehold-bin-'));
    symlinkSync(entry, join(bin, 'leasehold'));
    const kubectl = { command: join(process.env.E2E_BIN_DIR!, 'kubectl'), args: [] };
    expect((await run(['leases'], laptop, false, { command: join(bin, 'leasehold'), args: [] })).stdout).toMatch(/^NAME\s+PHASE\s+WHERE/);
    // The krew archive: one bundled file, run by kubectl as a plugin from a directory with no package.json.
    await promisify(execFile)('make', ['--silent', 'krew-archive'], { timeout: 300_000 });
    const krew = mkdtempSync(join(tmpdir(), 'leasehold-krew-'));
    await promisify(execFile)('tar', ['-xzf', join(process.cwd(), 'dist/krew/leasehold-krew.tar.gz'), '-C', krew]);
    const manifest = readFileSync(join(process.cwd(), 'dist/krew/leasehold.yaml'), 'utf8');
    const sha = (await promisify(execFile)('sha256sum', [join(process.cwd(), 'dist/krew/leasehold-krew.tar.gz')])).stdout.split(' ')[0];
    expect(manifest).toContain(`sha256: ${sha}`);
    expect(manifest).toMatch(/bin: kubectl-leasehold/);
    const viaKubectl = await run(['leasehold', 'leases'], laptop, false, { ...kubectl, path: krew });
    expect(viaKubectl.stderr).toBe('');
    expect(viaKubectl.code).toBe(0);
    expect(viaKubectl.stdout).toMatch(/^NAME\s+PHASE\s+WHERE/);
    const compiled = { command: entry, args: [] };

    const [lease] = await leases();
    const ssh = lease.status.machine.ssh;
    const knownHosts = join(laptop, 'known_hosts');
    writeFileSync(knownHosts, `[${ssh.host}]:${ssh.port} ${ssh.hostKey}\n`);
    const key = join(laptop, 'leasehold', 'id_ed25519');
    // From the command's start to the remote process's start (one clock: the machine is this host).
    const startDelay = async (command: () => Promise<string>) => {
      const t0 = Date.now();
      const remoteNs = (await command()).trim();
      return Number(BigInt(remoteNs) / 1000n) / 1000 - t0;
    };
    const plain = () => promisify(execFile)('ssh', ['-i', key, '-o', 'IdentitiesOnly=yes', '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes',
      '-p', String(ssh.port), `${ssh.user}@${ssh.host}`, 'date +%s%N']).then((r) => r.stdout);
    const viaRun = (program: CLIOptions['program']) => async () => {
      const r = await run(['run', '--where', 'cpus>=1', '--', 'date', '+%s%N'], laptop, false, program);
      expect(r.code).toBe(0);
      return r.stdout;
    };
    const bundled = { command: join(krew, 'kubectl-leasehold'), args: [] };
    const startup = async () => {
      const t0 = Date.now();
      expect((await run(['--help'], laptop, false, compiled)).code).toBe(0);
      return Date.now() - t0;
    };
    const runs: number[] = [];
    const bundledRuns: number[] = [];
    const ssh1: number[] = [];
    const boots: number[] = [];
    for (let i = 0; i < 5; i++) {
      runs.push(await startDelay(viaRun(compiled)));
      bundledRuns.push(await startDelay(viaRun(bundled)));
      ssh1.push(await startDelay(plain));
      boots.push(await startup());
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const [r, k, p, b] = [median(runs), median(bundledRuns), median(ssh1), median(boots)];
    process.stdout.write(`command start to remote process start, median of 5: plain ssh ${p.toFixed(0)} ms; leasehold run ${r.toFixed(0)} ms (npm build, x${(r / p).toFixed(1)}), ` +
      `${k.toFixed(0)} ms (krew bundle, x${(k / p).toFixed(1)}); starting the npm build alone (--help) takes ${b.toFixed(0)} ms of its ${r.toFixed(0)}\n`);
    expect(Math.min(...runs, ...bundledRuns, ...ssh1)).toBeGreaterThan(0);
  });

  it('refuses a run once the release is recorded, before anything runs', async () => {
    const [lease] = await leases();
    const name = lease.metadata.name;
    // A finalizer of the test's keeps the Lease readable after the controller's release.
    await fx.kubectl(['-n', fx.ns, 'patch', 'leases.leasehold.dev', name, '--type=json', '-p', JSON.stringify([{ op: 'add', path: '/metadata/finalizers/-', value: 'e2e.leasehold.dev/hold' }])]);
    await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', name, '--wait=false']);
    const r = await run(['run', '--lease', name, '--', 'touch', join(fx.machines, lease.status.leaseID, 'ran')]);
    expect(r.code).toBe(253);
    expect(r.stderr).toMatch(new RegExp(`Lease ${name} (is being deleted|is Releasing|is Released)`));
    expect(existsSync(join(fx.machines, lease.status.leaseID, 'ran'))).toBe(false);
    await fx.waitPhase(name, 'Released');
    await fx.kubectl(['-n', fx.ns, 'patch', 'leases.leasehold.dev', name, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
    expect(fx.sshdFor(lease.status.leaseID)).toBe('');
  });
});

describe('the other commands', () => {
  it('lists Leases, names a missing one, and exits 2 on a bad flag', async () => {
    const r = await run(['leases', '--json']);
    expect(r.code).toBe(0);
    expect(Array.isArray(JSON.parse(r.stdout))).toBe(true);
    const missing = await run(['release', 'no-such-lease']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('Lease no-such-lease not found in namespace');
    // Offers are cluster-scoped: a RoleBinding to lease-editor does not reach them, a ClusterRoleBinding to lease-viewer does.
    const refused = await run(['offers']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/offers: forbidden .*leasehold-lease-viewer/);
    expect((await fx.kubectl(['create', 'clusterrolebinding', `lh-cli-${fx.suffix}-viewer`, `--clusterrole=lh-cli-${fx.suffix}-lease-viewer`, '--user=cli-user'])).code).toBe(0);
    const listed = await waitFor('offers readable', async () => {
      const o = await run(['offers']);
      return o.code === 0 && o;
    });
    expect(listed.stdout).toMatch(new RegExp(`^${offer}\\s+command\\s+linux/amd64, 1 cpu\\s+\\$0\\.25`, 'm'));
    await fx.kubectl(['delete', 'clusterrolebinding', `lh-cli-${fx.suffix}-viewer`]);
    const none = await run(['run', '--where', 'gpu=h100', '--offer', offer, '--', 'true']);
    expect(none.code).toBe(250);
    expect(none.stderr).toMatch(/cannot be scheduled \(NoMatchingOffer\): .*; withdrew it/);
    await waitFor('the refused Lease withdrawn', async () => (await leases()).every((l) => l.spec.where !== 'gpu=h100'), 30_000);
    // maxLeases is 2 here: with two Leases active, a third is refused, and the run withdraws the one it made.
    for (const name of ['hold-a', 'hold-b']) await fx.lease(name, { where: 'cpus>=1', offer });
    await fx.waitPhase('hold-a', 'Ready');
    await fx.waitPhase('hold-b', 'Ready');
    const full = await run(['run', '--where', 'cpus>=1,arch=amd64', '--', 'true']);
    expect(full.code).toBe(252);
    expect(full.stderr).toMatch(/cannot be scheduled \(MaxLeases\): 2 leases are active, the controller's maxLeases is 2; .*; withdrew it/);
    await waitFor('the refused Lease withdrawn', async () => (await leases()).every((l) => l.spec.where !== 'cpus>=1,arch=amd64'), 30_000);
    for (const name of ['hold-a', 'hold-b']) expect((await run(['release', name, '--wait'])).stdout).toBe(`Lease ${name}: released\n`);
    expect(fx.sshdLeft()).toBe('');
    const bad = await run(['leases', '--all']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown flag --all');
  });
});
