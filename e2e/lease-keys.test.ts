// spec.sshKeys on a Ready Lease: a key added can log in, a key removed is
// refused, and routine probes leave authorized_keys alone.
import { describe, it, expect } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const fx = leaseSuite('keys');
const keyDir = mkdtempSync(join(tmpdir(), 'leasehold-device-'));
const device = (name: string) => {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', join(keyDir, name)]);
  return readFileSync(join(keyDir, `${name}.pub`), 'utf8').trim();
};
const laptop = device('laptop');
const phone = device('phone');

describe('device keys follow spec.sshKeys', () => {
  it('admits a key added to a Ready Lease, refuses one removed, and does not rewrite keys on every probe', async () => {
    const o = await fx.offer('box', { ...sshdCommands(), idleTimeout: '10m', maxLifetime: '1h' });
    await fx.lease('keys', { where: 'cpus>=1', offer: o, sshKeys: [laptop] });
    const st = await fx.waitPhase('keys', 'Ready');
    const ssh = st.machine.ssh;
    const known = join(keyDir, 'known_hosts');
    writeFileSync(known, `[${ssh.host}]:${ssh.port} ${ssh.hostKey}\n`);
    const login = (name: string) =>
      spawnSync('ssh', ['-i', join(keyDir, name), '-o', 'IdentitiesOnly=yes', '-o', `UserKnownHostsFile=${known}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes',
        '-p', String(ssh.port), `${ssh.user}@${ssh.host}`, `echo in-as-${name}`], { encoding: 'utf8', timeout: 20_000 });
    expect(login('laptop').stdout.trim()).toBe('in-as-laptop');
    expect(login('phone').status).not.toBe(0);

    // Probes run every second; with spec.sshKeys unchanged none of them writes authorized_keys.
    const file = join(fx.machines, st.leaseID, 'authorized_keys');
    const written = statSync(file).mtimeMs;
    const probesBefore = await fx.controller.metric('leasehold_reconcile_total', { controller: 'lease' });
    await new Promise((r) => setTimeout(r, 4000));
    expect(await fx.controller.metric('leasehold_reconcile_total', { controller: 'lease' })).toBeGreaterThan(probesBefore + 2);
    expect(statSync(file).mtimeMs).toBe(written);

    const patch = (keys: string[]) => fx.kubectl(['-n', fx.ns, 'patch', 'leases.leasehold.dev', 'keys', '--type=merge', '-p', JSON.stringify({ spec: { sshKeys: keys } })]);
    const t0 = Date.now();
    expect((await patch([laptop, phone])).code).toBe(0);
    await waitFor('phone admitted', async () => login('phone').stdout.trim() === 'in-as-phone', 20_000, 250);
    const addedIn = Date.now() - t0;
    expect(login('laptop').stdout.trim()).toBe('in-as-laptop');

    expect((await patch([phone])).code).toBe(0);
    await waitFor('laptop refused', async () => login('laptop').status !== 0, 20_000, 250);
    expect(login('phone').stdout.trim()).toBe('in-as-phone');
    expect(readFileSync(file, 'utf8')).not.toContain(laptop.split(' ')[1]);

    const del = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'keys', '--timeout=60s']);
    expect(del.code).toBe(0);
    expect(fx.sshdFor(st.leaseID)).toBe('');
    process.stdout.write(`device key added to a Ready Lease usable ${addedIn} ms after kubectl patch\n`);
  });
});
