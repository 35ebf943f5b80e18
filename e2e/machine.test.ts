// The machine layer against real OpenSSH, no Kubernetes: the sshd-machine
// provider acquires a machine, the controller's side connects with the host
// key pinned, installs the agent and measures it, a real ssh client gets in
// with a device key, busy counts a leasehold-run job, and release leaves no
// sshd behind.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { installAgent, probe } from '../src/machine/agent.js';
import { compareFacts } from '../src/machine/facts.js';
import { generateControllerKey } from '../src/machine/keys.js';
import { connectPinned, HostKeyMismatchError, type SshSession } from '../src/machine/ssh.js';
import { sshdListeners } from './support/chaos.js';

const provider = join(process.cwd(), 'e2e/providers/sshd-machine.sh');
const work = mkdtempSync(join(tmpdir(), 'leasehold-machine-e2e-'));
const machines = join(work, 'machines');
const suffix = Date.now().toString(36);
const controller = generateControllerKey();

execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'device', '-f', join(work, 'device')]);
const deviceKey = readFileSync(join(work, 'device.pub'), 'utf8').trim();

interface MachineState {
  ssh: { host: string; port: number; user: string; host_key: string };
  dir: string;
  pid: number;
}

// Every lease ID acquire ran for, with what it printed, so that afterAll can release them all.
const acquired = new Map<string, MachineState | undefined>();

function providerRun(verb: 'acquire' | 'release', id: string, env: Record<string, string> = {}) {
  return spawnSync(provider, [verb], {
    env: { ...process.env, LEASEHOLD_MACHINES_DIR: machines, LEASEHOLD_LEASE_ID: id, LEASEHOLD_LEASE_SSH_KEY: controller.publicKey, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

function acquire(id: string, env: Record<string, string> = {}): MachineState {
  acquired.set(id, undefined);
  const r = providerRun('acquire', id, env);
  if (r.status !== 0) throw new Error(`acquire ${id} exited ${r.status}: ${r.stderr}`);
  const state = JSON.parse(r.stdout.trim().split('\n').pop()!) as MachineState;
  acquired.set(id, state);
  return state;
}

const release = (id: string, state: string) => providerRun('release', id, { LEASEHOLD_LEASE_STATE: state }).status;

/** The sshd listener of a machine directory (its connection handlers left out), as pgrep prints pids. */
const sshdsFor = (dir: string) => sshdListeners(join(dir, 'sshd_config')).map((l) => l.pid).join('\n');

const connect = (state: MachineState, hostKey = state.ssh.host_key) =>
  connectPinned({ host: state.ssh.host, port: state.ssh.port, user: state.ssh.user, hostKey, privateKey: controller.privateKey, timeoutMs: 10_000 });

// A real OpenSSH client, trusting nothing but the pinned host key.
function realSsh(state: MachineState, command: string) {
  const knownHosts = join(work, `known_hosts-${state.ssh.port}`);
  writeFileSync(knownHosts, `[${state.ssh.host}]:${state.ssh.port} ${state.ssh.host_key}\n`);
  return spawnSync(
    '/usr/bin/ssh',
    ['-i', join(work, 'device'), '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes',
      '-o', 'ConnectTimeout=10', '-p', String(state.ssh.port), `${state.ssh.user}@${state.ssh.host}`, command],
    { encoding: 'utf8', timeout: 30_000 },
  );
}

const waitFor = async <T>(what: string, check: () => Promise<T | undefined>, ms = 15_000): Promise<T> => {
  const until = Date.now() + ms;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
};

afterAll(() => {
  for (const [id, state] of acquired) {
    release(id, state ? JSON.stringify(state) : '');
    if (!state) continue;
    // Should release itself be broken, stop the sshd this suite started, by its PID.
    try {
      if (readFileSync(`/proc/${state.pid}/cmdline`, 'utf8').includes(state.dir)) process.kill(state.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(work, { recursive: true, force: true });
});

describe('a machine from the sshd-machine provider', () => {
  const id = `m${suffix}`;
  let state: MachineState;
  let session: SshSession;

  beforeAll(async () => {
    state = acquire(id);
    session = await connect(state);
  });

  afterAll(() => session?.close());

  it('is described on the last stdout line: endpoint, host key, directory and sshd PID', () => {
    expect(state.ssh).toEqual({ host: '127.0.0.1', port: expect.any(Number), user: execFileSync('id', ['-un']).toString().trim(), host_key: expect.stringMatching(/^ssh-ed25519 AAAA\S+$/) });
    expect(state.dir).toBe(join(machines, id));
    expect(sshdsFor(state.dir)).toBe(String(state.pid));
  });

  it('takes the agent and the device key, and its facts are the real ones', async () => {
    await installAgent(session, { deviceKeys: [deviceKey], controllerKey: controller.publicKey });
    await installAgent(session, { deviceKeys: [deviceKey], controllerKey: controller.publicKey });
    const facts = await probe(session);
    const machine = execFileSync('uname', ['-m']).toString().trim();
    const nproc = Number(execFileSync('nproc', { env: { PATH: process.env.PATH } }).toString());
    expect(facts).toMatchObject({
      os: execFileSync('uname', ['-s']).toString().trim().toLowerCase(),
      arch: { x86_64: 'amd64', aarch64: 'arm64' }[machine] ?? machine,
      cpus: nproc,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      busy: 0,
      jobs: 0,
      // The probe's own session (the controller's) is not counted; there is no GPU.
      sessions: 0,
      gpuProcesses: 0,
    });
    expect(compareFacts({ os: facts.os, arch: facts.arch, cpus: nproc }, facts)).toEqual({ ok: true });
    expect(compareFacts({ os: facts.os, arch: facts.arch, cpus: nproc + 24 }, facts)).toEqual({ ok: false, differences: [`cpus: offer claims ${nproc + 24}, machine has ${nproc}`] });
    // The agent lives where sshd's SetEnv points, not in the shared user's home.
    expect(existsSync(join(state.dir, 'home', 'bin', 'leasehold-agent'))).toBe(true);
    expect(readFileSync(join(state.dir, 'authorized_keys'), 'utf8')).toBe(`${controller.publicKey}\n${deviceKey}\n`);
  });

  it('lets a real ssh client in with the device key and the pinned host key, no prompt', () => {
    const r = realSsh(state, 'true');
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('is busy while a job started through leasehold-run runs, and idle after', async () => {
    const started = realSsh(state, 'setsid nohup "$LEASEHOLD_HOME/bin/leasehold-run" sleep 5 </dev/null >/dev/null 2>&1 &');
    expect(started.status).toBe(0);
    const busy = await waitFor('busy 1', async () => {
      const p = await probe(session);
      return p.busy === 1 ? p : undefined;
    });
    expect(busy.jobs).toBe(1);
    const idle = await waitFor('busy 0', async () => {
      const p = await probe(session);
      return p.busy === 0 ? p : undefined;
    });
    expect(idle.jobs).toBe(1);
  });

  it('keeps authorized_keys in step: a removed device key no longer gets in, the controller still does', async () => {
    await installAgent(session, { deviceKeys: [], controllerKey: controller.publicKey });
    const r = realSsh(state, 'true');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/Permission denied/);
    const again = await connect(state);
    again.close();
    await installAgent(session, { deviceKeys: [deviceKey], controllerKey: controller.publicKey });
    expect(realSsh(state, 'true').status).toBe(0);
  });

  it('is refused when the pinned host key is another one', async () => {
    const other = generateControllerKey('someone-else').publicKey;
    await expect(connect(state, other)).rejects.toThrow(HostKeyMismatchError);
  });

  it('is gone after release, and releasing again succeeds', () => {
    session.close();
    expect(release(id, JSON.stringify(state))).toBe(0);
    expect(sshdsFor(state.dir)).toBe('');
    expect(existsSync(state.dir)).toBe(false);
    expect(release(id, JSON.stringify(state))).toBe(0);
    expect(release(id, '')).toBe(0);
  });
});

describe('the sshd-machine provider', () => {
  it('can report a host key its sshd does not have, which connectPinned refuses', async () => {
    const state = acquire(`w${suffix}`, { SSHD_MACHINE_WRONG_HOST_KEY: '1' });
    const err = await connect(state).then(
      (s) => {
        s.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(HostKeyMismatchError);
    expect((err as Error).message).toMatch(/presented host key SHA256:\S+, but the pinned host_key is SHA256:/);
    expect(release(`w${suffix}`, JSON.stringify(state))).toBe(0);
  });

  it('releases by lease ID when the state is empty', () => {
    const state = acquire(`e${suffix}`);
    expect(sshdsFor(state.dir)).not.toBe('');
    expect(release(`e${suffix}`, '')).toBe(0);
    expect(sshdsFor(state.dir)).toBe('');
    expect(existsSync(state.dir)).toBe(false);
  });

  it('fails release the first N times when told to, then succeeds', () => {
    const state = acquire(`f${suffix}`);
    const env = { LEASEHOLD_LEASE_STATE: JSON.stringify(state), SSHD_MACHINE_FAIL_RELEASE_TIMES: '2' };
    const codes = [1, 2, 3].map(() => providerRun('release', `f${suffix}`, env).status);
    expect(codes).toEqual([1, 1, 0]);
    expect(sshdsFor(state.dir)).toBe('');
  });

  it('replaces the machine when a lease ID is acquired again, leaving one sshd', () => {
    const first = acquire(`r${suffix}`);
    const second = acquire(`r${suffix}`);
    expect(second.ssh.host_key).not.toBe(first.ssh.host_key);
    expect(sshdsFor(second.dir)).toBe(String(second.pid));
    expect(release(`r${suffix}`, JSON.stringify(second))).toBe(0);
    expect(sshdsFor(second.dir)).toBe('');
  });

  it('never deletes a directory the state points at unless it made it', () => {
    const bystander = mkdtempSync(join(work, 'bystander-'));
    writeFileSync(join(bystander, 'keep'), 'x');
    expect(release(`b${suffix}`, JSON.stringify({ dir: bystander }))).toBe(0);
    expect(existsSync(join(bystander, 'keep'))).toBe(true);
  });
});
