// What keeps a Lease: an interactive shell a user holds open and a process
// holding a GPU keep the machine past many idle windows; once both end it is
// released about one idle window later. A check whose nvidia-smi never
// answers is a failed check: the Lease is not handed out, the GPU work it
// cannot see renews nothing, and it is released at its idle deadline.
// Machines are real sshd machines with the nvidia-smi stand-in
// (e2e/providers/nvidia-smi-standin.sh), whose gpu/ directory the test writes.
import { describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const IDLE_S = 5;
const fx = leaseSuite('busy');
const shape = { os: 'linux', arch: 'amd64', cpus: 1, gpu: 'H100', gpus: 1 };

const keys = mkdtempSync(join(tmpdir(), 'leasehold-busy-keys-'));
execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'busy-test', '-f', join(keys, 'id')]);
const publicKey = readFileSync(join(keys, 'id.pub'), 'utf8').trim();

/** ssh arguments for the Lease's machine, as a user would run them: the device key, the pinned host key. */
function sshTo(st: any): string[] {
  const ssh = st.machine.ssh;
  const knownHosts = join(keys, `known_hosts-${ssh.port}`);
  writeFileSync(knownHosts, `[${ssh.host}]:${ssh.port} ${ssh.hostKey}\n`);
  return ['-i', join(keys, 'id'), '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes', '-p', String(ssh.port), `${ssh.user}@${ssh.host}`];
}

const gpuDir = (st: any) => join(fx.machines, st.leaseID, 'gpu');

/** Polls the Lease for `forMs`, failing as soon as it is seen leaving Ready. */
async function staysReady(name: string, forMs: number): Promise<void> {
  const end = Date.now() + forMs;
  let left = '';
  await waitFor(`${name} Ready for ${forMs} ms`, async () => {
    const st = await fx.status(name);
    if (st.phase !== 'Ready') left = `${name} left Ready: phase ${st.phase}, reason ${st.reason}, usage ${JSON.stringify(st.usage)}`;
    return left || Date.now() >= end;
  }, forMs + 30_000);
  if (left) throw new Error(left);
}

describe('a Lease in use by a person', () => {
  it('is kept while a shell is open or a GPU process runs, and released one idle window after both end', async () => {
    const offer = await fx.offer('box', { ...sshdCommands('SSHD_MACHINE_GPUS=1'), shape, idleTimeout: `${IDLE_S}s`, maxLifetime: '1h' });
    await fx.lease('work', { where: 'gpu=h100', offer, sshKeys: [publicKey] });
    const st = await fx.waitPhase('work', 'Ready', 90_000);
    const args = sshTo(st);

    let shell: ChildProcess | undefined;
    let gpuPid = 0;
    try {
      // An interactive shell with a terminal, its stdin held open.
      shell = spawn('ssh', ['-tt', ...args], { stdio: ['pipe', 'ignore', 'ignore'] });
      shell.stdin!.write('echo hello\n');
      // A training run left behind in the background: it outlives the session that started it.
      const started = execFileSync('ssh', [...args, 'nohup sleep 600 >/dev/null 2>&1 </dev/null & echo $!'], { encoding: 'utf8' }).trim();
      gpuPid = Number(started);
      expect(gpuPid).toBeGreaterThan(1);
      appendFileSync(join(gpuDir(st), 'pids'), `${gpuPid}\n`);

      const both = await waitFor('the check to see the shell and the GPU process', async () => {
        const s = await fx.status('work');
        return s.usage?.sessions === 1 && s.usage?.gpuProcesses === 1 ? s : undefined;
      }, 30_000);
      expect(both.usage).toMatchObject({ jobs: 0, busy: '1 session, 1 GPU process' });
      const table = await fx.kubectl(['-n', fx.ns, 'get', 'leases.leasehold.dev', 'work']);
      expect(table.stdout).toMatch(/BUSY/);
      expect(table.stdout).toContain('1 session, 1 GPU process');

      // Several idle windows with both running.
      await staysReady('work', 4 * IDLE_S * 1000);

      // The shell ends; the GPU process alone keeps the machine.
      shell.stdin!.end('exit\n');
      await waitFor('the shell to end', async () => shell!.exitCode !== null || shell!.signalCode !== null, 30_000);
      await waitFor('the check to see the GPU process alone', async () => {
        const s = await fx.status('work');
        return s.usage?.sessions === 0 && s.usage?.gpuProcesses === 1 ? s : undefined;
      }, 30_000);
      expect((await fx.status('work')).usage.busy).toBe('1 GPU process');
      await staysReady('work', 2 * IDLE_S * 1000);
    } finally {
      shell?.kill();
      if (gpuPid > 1) {
        try {
          process.kill(gpuPid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    const ended = Date.now();
    const released = await fx.waitPhase('work', 'Released', 60_000);
    expect(released.endReason).toBe('IdleTimeout');
    // Released one idle window after the last work was seen: not before the work ended, and not many checks late.
    const last = Date.parse(released.lastActivityAt);
    expect(last).toBeGreaterThanOrEqual(ended - 3_000);
    expect(Date.now() - ended).toBeLessThan((IDLE_S + 15) * 1000);
  }, 240_000);
});

describe('a check whose nvidia-smi does not answer', () => {
  it('fails as FactsMismatch with the evidence, is not renewed by GPU work, and is released at its idle deadline', async () => {
    const idle = 40;
    const offer = await fx.offer('hung', { ...sshdCommands('SSHD_MACHINE_GPUS=1'), shape, idleTimeout: `${idle}s`, maxLifetime: '1h' });
    await fx.lease('hung', { where: 'gpu=h100', offer, sshKeys: [publicKey] });
    const st = await fx.waitPhase('hung', 'Ready', 90_000);
    // A GPU process runs, and then nvidia-smi stops answering: the check cannot see it.
    const sleeper = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
    try {
      appendFileSync(join(gpuDir(st), 'pids'), `${sleeper.pid}\n`);
      await waitFor('the check to see the GPU process', async () => (await fx.status('hung')).usage?.gpuProcesses === 1, 30_000);
      writeFileSync(join(gpuDir(st), 'hang'), '');
      const failed = await waitFor('Ready=False FactsMismatch', async () => {
        const s = await fx.status('hung');
        const ready = (s.conditions ?? []).find((c: any) => c.type === 'Ready');
        return ready?.status === 'False' && ready.reason === 'FactsMismatch' ? { s, ready } : undefined;
      }, 60_000);
      expect(failed.s.phase).toBe('Idle');
      expect(failed.ready.message).toContain('the GPU check failed: nvidia-smi --query-gpu did not answer within 10s');
      const deadline = Date.parse(failed.s.lastActivityAt) + idle * 1000;
      const released = await fx.waitPhase('hung', 'Released', idle * 1000 + 60_000);
      expect(released.endReason).toBe('IdleTimeout');
      // Not renewed by the GPU process it could not see: released at the deadline the last answer set.
      expect(Date.parse(released.lastActivityAt)).toBe(deadline - idle * 1000);
      expect(Date.parse(released.releasedAt)).toBeGreaterThanOrEqual(deadline - 1000);
    } finally {
      sleeper.kill('SIGKILL');
    }
  }, 240_000);
});
