// Leases on command Offers against real OpenSSH sshd machines: Ready with a
// pinned host key a real ssh client accepts, refusals that release, idle
// release, release retries, delete releases.
import { describe, it, expect } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getJSON } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const fx = leaseSuite('lifecycle');

const keyDir = mkdtempSync(join(tmpdir(), 'leasehold-device-'));
execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'device', '-f', join(keyDir, 'id')]);
const deviceKey = readFileSync(join(keyDir, 'id.pub'), 'utf8').trim();

const offer = (name: string, opts: { cpus?: number; idleTimeout?: string; maxLifetime?: string; env?: string } = {}) =>
  fx.offer(name, {
    ...sshdCommands(opts.env),
    shape: { os: 'linux', arch: 'amd64', cpus: opts.cpus ?? 1 },
    pricePerHour: 0,
    idleTimeout: opts.idleTimeout ?? '10m',
    maxLifetime: opts.maxLifetime ?? '1h',
  });
const lease = (name: string, offerName: string) => fx.lease(name, { where: 'cpus>=1', offer: offerName, sshKeys: [deviceKey] });
const waitPhase = (name: string, want: string, ms?: number) => fx.waitPhase(name, want, ms);
const sshdFor = (leaseID: string) => fx.sshdFor(leaseID);

describe('leases on command offers with real sshd machines', () => {
  it('goes Ready, a real ssh with the pinned host key and a device key works, and delete releases it', async () => {
    const o = await offer('box');
    await new Promise((r) => setTimeout(r, 1000));
    const writesBefore = await fx.controller.writes();
    const t0 = Date.now();
    await lease('ready', o);
    const st = await waitPhase('ready', 'Ready');
    const toReady = Date.now() - t0;
    expect(st.machine.ssh.hostKey).toMatch(/^ssh-ed25519 /);
    expect(st.facts.os).toBe('linux');
    expect(sshdFor(st.leaseID)).not.toBe('');
    const known = join(keyDir, 'known_hosts');
    writeFileSync(known, `[${st.machine.ssh.host}]:${st.machine.ssh.port} ${st.machine.ssh.hostKey}\n`);
    const out = execFileSync('ssh', ['-i', join(keyDir, 'id'), '-o', `UserKnownHostsFile=${known}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes',
      '-p', String(st.machine.ssh.port), `${st.machine.ssh.user}@${st.machine.ssh.host}`, 'echo hello-from-lease']).toString();
    expect(out.trim()).toBe('hello-from-lease');
    // Each stderr line of acquire is shown to the user as an event.
    const events = await getJSON(fx.kubectl, ['-n', fx.ns, 'events', '--field-selector', 'involvedObject.name=ready']);
    expect(events.items.filter((e: any) => e.reason === 'Provider').map((e: any) => e.message)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^starting sshd on 127\.0\.0\.1:/)]),
    );
    const wait = await fx.kubectl(['-n', fx.ns, 'wait', '--for=condition=Ready', 'leases.leasehold.dev/ready', '--timeout=5s']);
    expect(wait.code).toBe(0);

    const del = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'ready', '--timeout=60s']);
    expect(del.code).toBe(0);
    expect(sshdFor(st.leaseID)).toBe('');
    expect(existsSync(join(fx.machines, st.leaseID))).toBe(false);
    await new Promise((r) => setTimeout(r, 1000));
    process.stdout.write(`kubectl apply to Ready: ${toReady} ms; controller API writes for the whole lifecycle (status, finalizer, events, Offer status): ${(await fx.controller.writes()) - writesBefore}\n`);
  });

  it('refuses a machine that presents another host key, and releases it', async () => {
    const o = await offer('wrongkey', { env: 'SSHD_MACHINE_WRONG_HOST_KEY=1' });
    await lease('wrongkey', o);
    const st = await waitPhase('wrongkey', 'Failed');
    expect(st.reason).toBe('HostKeyMismatch');
    expect(sshdFor(st.leaseID)).toBe('');
  });

  it('fails and releases a machine whose facts do not match the claim', async () => {
    const o = await offer('liar', { cpus: 512 });
    await lease('liar', o);
    const st = await waitPhase('liar', 'Failed');
    expect(st.reason).toBe('FactsMismatch');
    expect(st.message).toMatch(/cpus: offer claims 512/);
    expect(sshdFor(st.leaseID)).toBe('');
  });

  it('releases after idleTimeout, retrying a failing release until it succeeds', async () => {
    const o = await offer('idle', { idleTimeout: '3s', env: 'SSHD_MACHINE_FAIL_RELEASE_TIMES=2' });
    await lease('idle', o);
    const ready = await waitPhase('idle', 'Ready');
    // Idle lasts only until the next check: a slow poll can see Released
    // first, so the IdleTimeout event, not the phase, shows it was passed.
    const st = await waitPhase('idle', 'Released', 50_000);
    const events = await getJSON(fx.kubectl, ['-n', fx.ns, 'events', '--field-selector', 'involvedObject.name=idle']);
    expect(events.items.map((e: any) => e.reason)).toEqual(expect.arrayContaining(['IdleTimeout', 'ReleaseFailed', 'Released']));
    expect(st.releaseAttempts).toBe(3);
    expect(st.lastReleaseError).toMatch(/simulated release failure/);
    expect(sshdFor(ready.leaseID)).toBe('');
  });

  it('releases at maxLifetime', async () => {
    const o = await offer('short', { maxLifetime: '8s' });
    await lease('short', o);
    await waitPhase('short', 'Ready');
    await waitPhase('short', 'Released', 30_000);
    const events = await getJSON(fx.kubectl, ['-n', fx.ns, 'events', '--field-selector', 'involvedObject.name=short']);
    expect(events.items.map((e: any) => e.reason)).toContain('MaxLifetime');
  });
});
