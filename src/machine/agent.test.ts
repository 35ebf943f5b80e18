// The agent script run on this machine through a local shell standing in
// for SSH; e2e/machine.test.ts runs it over real SSH.
import { describe, it, expect, beforeEach, afterEach } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { arch, platform, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { MAX_SSH_KEYS } from '../api/lease.js';
import { AGENT_SCRIPT, authorizedKeys, installAgent, interruptJobCommand, jobCommand, parseProbe, probe, writeAuthorizedKeys, type RemoteShell } from './agent.js';
import { generateControllerKey } from './keys.js';
import type { ExecResult } from './ssh.js';

const controller = generateControllerKey().publicKey;
const devices = [generateControllerKey('alice').publicKey, generateControllerKey('bob').publicKey];

function localShell(env: Record<string, string>): RemoteShell {
  return {
    exec: (command, opts) =>
      new Promise<ExecResult>((resolve, reject) => {
        const child = spawn('/bin/sh', ['-c', command], { env });
        let stdout = '';
        let stderr = '';
        const timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`${command} timed out`));
        }, opts.timeoutMs);
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.on('close', (code) => {
          clearTimeout(timer);
          resolve({ code: code ?? -1, stdout, stderr, truncated: false });
        });
        child.stdin.end(opts.stdin ?? '');
      }),
  };
}

let dir: string;
let env: Record<string, string>;
let shell: RemoteShell;
const lh = () => env.LEASEHOLD_HOME!;
const ak = () => env.LEASEHOLD_AUTHORIZED_KEYS!;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-agent-'));
  env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: join(dir, 'home'), LEASEHOLD_HOME: join(dir, 'lh'), LEASEHOLD_AUTHORIZED_KEYS: join(dir, 'keys', 'authorized_keys') };
  mkdirSync(env.HOME!);
  shell = localShell(env);
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

const waitFor = async (what: string, check: () => boolean, ms = 5000) => {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('authorizedKeys', () => {
  it('puts the controller key first, then each device key once', () => {
    const text = authorizedKeys(controller, [devices[0]!, `${devices[1]!}\n`, devices[0]!.replace('alice', 'alice-again'), controller]);
    expect(text).toBe(`${controller}\n${devices[0]}\n${devices[1]}\n`);
  });

  it('keeps the controller key when there are no device keys', () => {
    expect(authorizedKeys(controller, [])).toBe(`${controller}\n`);
  });

  it(`refuses more than ${MAX_SSH_KEYS} device keys`, () => {
    const many = Array.from({ length: MAX_SSH_KEYS + 1 }, (_, i) => generateControllerKey(`d${i}`).publicKey);
    expect(() => authorizedKeys(controller, many)).toThrow(/at most 16 device keys, and spec.sshKeys has 17/);
    expect(() => authorizedKeys(controller, many.slice(0, MAX_SSH_KEYS))).not.toThrow();
  });

  it('names the device key that is not a public key', () => {
    expect(() => authorizedKeys(controller, [devices[0]!, `${devices[1]!}\nssh-ed25519 AAAA injected`])).toThrow(/^spec\.sshKeys\[1\] is not an OpenSSH public key: .*single line/);
    expect(() => authorizedKeys('nonsense', [])).toThrow(/controller's public key/);
  });
});

describe('parseProbe', () => {
  const line = '{"os":"linux","arch":"amd64","cpus":4,"memoryGiB":16,"gpus":0,"busy":1,"jobs":3,"sessions":2,"gpuProcesses":0}';

  it('reads the last line of output', () => {
    expect(parseProbe(`motd noise\n${line}\n\n`)).toEqual({ os: 'linux', arch: 'amd64', cpus: 4, memoryGiB: 16, gpus: 0, busy: 1, jobs: 3, sessions: 2, gpuProcesses: 0 });
  });

  it('keeps what nvidia-smi said when it failed', () => {
    expect(parseProbe(line.replace('"gpus":0', '"gpus":0,"gpuError":"nvidia-smi --query-gpu did not answer within 10s"'))).toMatchObject({ gpus: 0, gpuError: 'nvidia-smi --query-gpu did not answer within 10s' });
    expect(() => parseProbe(line.replace(',"sessions":2', ''))).toThrow(/unexpected facts \(sessions: /);
  });

  it('keeps the GPU model and VRAM only when there are GPUs', () => {
    expect(parseProbe(line.replace('"gpus":0', '"gpus":0,"gpuModel":"","vramGiB":0'))).not.toHaveProperty('gpuModel');
    expect(parseProbe(line.replace('"gpus":0', '"gpus":2,"gpuModel":"NVIDIA A10","vramGiB":22'))).toMatchObject({ gpus: 2, gpuModel: 'NVIDIA A10', vramGiB: 22 });
  });

  it('says what is wrong with output that is not the facts', () => {
    expect(() => parseProbe('')).toThrow(/printed no JSON: nothing/);
    expect(() => parseProbe('sh: leasehold-agent: not found')).toThrow(/printed no JSON: sh: leasehold-agent/);
    expect(() => parseProbe(line.replace('"cpus":4', '"cpus":-1'))).toThrow(/unexpected facts \(cpus: /);
    expect(() => parseProbe(line.replace(',"jobs":3', ''))).toThrow(/unexpected facts \(jobs: /);
  });
});

describe('the agent on a machine', () => {
  it('runs a job through leasehold-run with its exit code, and interrupts the job by its tag', async () => {
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    const done = await shell.exec(jobCommand(`echo "it's"; exit 3`, 'plain'), { timeoutMs: 10_000 });
    expect(done).toMatchObject({ code: 3, stdout: "it's\n" });
    expect((await probe(shell)).jobs).toBe(1);

    // A session of its own, as sshd gives each command: the interrupt signals the job's process group.
    const tag = `int-${process.pid}`;
    // exec: the login shell's place, which sshd's bash -c takes by exec too.
    const job = spawn('/bin/sh', ['-c', `exec ${jobCommand('trap "echo got-int; exit 7" INT; echo started; sleep 20; echo not-reached', tag)}`], { env, detached: true });
    let out = '';
    job.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => job.on('close', (code) => r(code)));
    await waitFor('the job started', () => out.includes('started'));
    expect((await shell.exec(interruptJobCommand(tag), { timeoutMs: 10_000 })).code).toBe(0);
    // leasehold-run waits for the job and exits with its code, not its own.
    expect(await exited).toBe(7);
    expect(out).toBe('started\ngot-int\n');
    expect(() => jobCommand('true', 'no spaces')).toThrow(/a job tag is letters, digits and hyphens/);
  });

  it('installs idempotently: the agent, leasehold-run, and authorized_keys with mode 600', async () => {
    await installAgent(shell, { controllerKey: controller, deviceKeys: devices });
    const agent = join(lh(), 'bin', 'leasehold-agent');
    expect(readFileSync(agent, 'utf8')).toBe(AGENT_SCRIPT);
    expect(statSync(agent).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(lh(), 'bin', 'leasehold-run'))).toBe('leasehold-agent');
    expect(readFileSync(ak(), 'utf8')).toBe(`${controller}\n${devices.join('\n')}\n`);
    expect(statSync(ak()).mode & 0o777).toBe(0o600);

    await installAgent(shell, { controllerKey: controller, deviceKeys: [devices[1]!] });
    expect(readFileSync(agent, 'utf8')).toBe(AGENT_SCRIPT);
    expect(readFileSync(ak(), 'utf8')).toBe(`${controller}\n${devices[1]}\n`);
    expect(readdirSync(join(lh(), 'bin')).sort()).toEqual(['leasehold-agent', 'leasehold-run']);
    expect(readdirSync(join(dir, 'keys'))).toEqual(['authorized_keys']);
  });

  it('uses ~/.leasehold and ~/.ssh/authorized_keys when nothing says otherwise', async () => {
    delete env.LEASEHOLD_HOME;
    delete env.LEASEHOLD_AUTHORIZED_KEYS;
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    expect(existsSync(join(env.HOME!, '.leasehold', 'bin', 'leasehold-agent'))).toBe(true);
    expect(readFileSync(join(env.HOME!, '.ssh', 'authorized_keys'), 'utf8')).toBe(`${controller}\n`);
    expect((await probe(shell)).busy).toBe(0);
  });

  it('never writes an empty authorized_keys', async () => {
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    await expect(writeAuthorizedKeys(shell, '\n \n')).rejects.toThrow(/refusing to write an empty authorized_keys/);
    expect(readFileSync(ak(), 'utf8')).toBe(`${controller}\n`);
  });

  it('measures this machine', async () => {
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    const p = await probe(shell);
    const nproc = Number(execFileSync('nproc', { env: { PATH: env.PATH! } }).toString());
    expect(p).toMatchObject({ os: platform(), arch: arch() === 'x64' ? 'amd64' : arch(), cpus: nproc, memoryGiB: Math.round(totalmem() / 2 ** 30), busy: 0, jobs: 0 });
  });

  // A stand-in nvidia-smi that answers the two queries the agent asks, from files in its directory.
  function fakeSmi(): string {
    const fake = join(dir, 'fakebin');
    mkdirSync(fake, { recursive: true });
    writeFileSync(
      join(fake, 'nvidia-smi'),
      [
        '#!/bin/sh',
        'd=$(dirname "$0")',
        '[ -e "$d/hang" ] && exec sleep 600',
        '[ -e "$d/fail" ] && { echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver" >&2; exit 9; }',
        'case "$*" in',
        '  "--query-gpu=name,memory.total --format=csv,noheader,nounits") printf \'NVIDIA H100 80GB HBM3, 81559\\nNVIDIA H100 80GB HBM3, 81000\\n\' ;;',
        '  "--query-compute-apps=pid --format=csv,noheader") cat "$d/apps" 2>/dev/null || true ;;',
        '  *) exit 9 ;;',
        'esac',
        '',
      ].join('\n'),
    );
    chmodSync(join(fake, 'nvidia-smi'), 0o755);
    env.PATH = `${fake}:${env.PATH}`;
    return fake;
  }

  it('reads GPUs from nvidia-smi: count, first model, smallest memory, and the processes holding them', async () => {
    const fake = fakeSmi();
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    expect(await probe(shell)).toMatchObject({ gpus: 2, gpuModel: 'NVIDIA H100 80GB HBM3', vramGiB: 79, gpuProcesses: 0 });
    expect(await probe(shell)).not.toHaveProperty('gpuError');
    // One process on both GPUs counts once.
    writeFileSync(join(fake, 'apps'), '4242\n4242\n4343\n');
    expect(await probe(shell)).toMatchObject({ gpus: 2, gpuProcesses: 2 });
  });

  it('reports an nvidia-smi that fails, with what it said, instead of a machine without GPUs', async () => {
    const fake = fakeSmi();
    writeFileSync(join(fake, 'fail'), '');
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    const failed = await probe(shell);
    expect(failed).toMatchObject({ gpus: 0, gpuProcesses: 0, gpuError: 'nvidia-smi --query-gpu exited 9: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' });
    expect(failed).not.toHaveProperty('gpuModel');
  });

  it('bounds a hung nvidia-smi and says it did not answer', async () => {
    const fake = fakeSmi();
    writeFileSync(join(fake, 'hang'), '');
    env.LEASEHOLD_NVIDIA_SMI_TIMEOUT = '1';
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    const t0 = Date.now();
    const hung = await probe(shell);
    expect(Date.now() - t0).toBeLessThan(8000);
    expect(hung).toMatchObject({ gpus: 0, gpuError: 'nvidia-smi --query-gpu did not answer within 1s' });
  });

  it("counts authenticated SSH sessions of this machine's sshd, leaving out the one the probe runs in", async () => {
    // A stand-in ps: this process's real ancestors, the oldest of them placed
    // under a made-up sshd session (the controller's, as over SSH), then the
    // sessions of the case.
    const fake = join(dir, 'fakebin');
    mkdirSync(fake, { recursive: true });
    writeFileSync(
      join(fake, 'ps'),
      [
        '#!/bin/sh',
        '[ "$*" = "-eo pid=,ppid=,comm=,args=" ] || exit 9',
        'pid=$PPID',
        'while [ "$pid" -gt 1 ]; do',
        '  ppid=$(sed \'s/^.*) //\' "/proc/$pid/stat" | cut -d" " -f2)',
        '  [ "$ppid" = "$FAKE_PS_STOP" ] && ppid=900001',
        '  echo "$pid $ppid $(cat /proc/$pid/comm) $(tr "\\000" " " < /proc/$pid/cmdline)"',
        '  [ "$ppid" = 900001 ] && break',
        '  pid=$ppid',
        'done',
        'cat "$(dirname "$0")/ps.txt"',
        '',
      ].join('\n'),
    );
    chmodSync(join(fake, 'ps'), 0o755);
    writeFileSync(
      join(fake, 'ps.txt'),
      [
        '900000 1 sshd sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups',
        '900001 900000 sshd sshd: root@notty', // the controller's: the probe runs in it
        '900002 900000 sshd sshd: alice [priv]', // alice's shell: its monitor does not count...
        '900003 900002 sshd sshd: alice@pts/0', // ...its session does: 1
        '900004 900000 sshd sshd: root', // a port forward (ssh -N), no channel open: 2
        '900005 900000 sshd sshd: unknown [preauth]', // still logging in: not a session
        '900006 1 sshd sshd: bob@notty', // left by a restarted sshd: 3
        '900008 900009 sshd-session sshd-session: carol@notty', // OpenSSH 9.8: 4
        '900009 900000 sshd-session sshd-session: carol [priv]',
        '900010 900000 bash sshd: mallory@pts/9', // not sshd, whatever its title says
        '910000 1 sshd sshd: /usr/sbin/sshd -f /other/sshd_config [listener] 0 of 10-100 startups',
        '910001 910000 sshd sshd: root@pts/1', // another machine on this host
        '',
      ].join('\n'),
    );
    env.PATH = `${fake}:${env.PATH}`;
    env.FAKE_PS_STOP = String(process.pid);
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    expect((await probe(shell)).sessions).toBe(4);
    // Not under any sshd (this test's own shell): every session on the host counts.
    writeFileSync(join(fake, 'ps.txt'), readFileSync(join(fake, 'ps.txt'), 'utf8').replace('900001 900000 sshd sshd: root@notty', '900001 900000 bash bash'));
    expect((await probe(shell)).sessions).toBe(5);
  });

  it('fails the probe when it cannot count sessions', async () => {
    const fake = join(dir, 'fakebin');
    mkdirSync(fake, { recursive: true });
    writeFileSync(join(fake, 'ps'), '#!/bin/sh\nexit 1\n');
    chmodSync(join(fake, 'ps'), 0o755);
    env.PATH = `${fake}:${env.PATH}`;
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    await expect(probe(shell)).rejects.toThrow(/exit 3.*cannot count SSH sessions/);
  });

  it('counts jobs run through leasehold-run while they run, and drops records of dead ones', async () => {
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    const run = join(lh(), 'bin', 'leasehold-run');
    const job = spawn(run, ['sleep', '30'], { env, detached: true, stdio: 'ignore' });
    const exited = new Promise((r) => job.on('exit', r));
    const record = join(lh(), 'jobs', String(job.pid));
    await waitFor('the job record', () => existsSync(record));
    expect(await probe(shell)).toMatchObject({ busy: 1, jobs: 1 });

    // Killed outright, the wrapper cannot remove its record: the probe must.
    process.kill(-job.pid!, 'SIGKILL');
    await exited;
    expect(existsSync(record)).toBe(true);
    expect(await probe(shell)).toMatchObject({ busy: 0, jobs: 1 });
    expect(existsSync(record)).toBe(false);
  });

  it('passes the exit status through leasehold-run and removes the record when the job ends', async () => {
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    const r = await shell.exec(`"$LEASEHOLD_HOME/bin/leasehold-run" sh -c 'ls "$LEASEHOLD_HOME/jobs"; exit 7'`, { timeoutMs: 10_000 });
    expect(r.code).toBe(7);
    expect(r.stdout.trim()).toMatch(/^\d+$/);
    expect(readdirSync(join(lh(), 'jobs'))).toEqual([]);
    expect((await shell.exec(`"$LEASEHOLD_HOME/bin/leasehold-run"`, { timeoutMs: 10_000 })).code).toBe(2);
    expect(await probe(shell)).toMatchObject({ busy: 0, jobs: 1 });
  });

  it('does not count a record whose PID now belongs to another process', async () => {
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    const jobs = join(lh(), 'jobs');
    const stat = readFileSync(`/proc/${process.pid}/stat`, 'utf8');
    const startTime = stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[19];
    writeFileSync(join(jobs, String(process.pid)), `${startTime}\n`);
    writeFileSync(join(jobs, '1'), '12345\n');
    writeFileSync(join(jobs, 'junk'), '');
    expect((await probe(shell)).busy).toBe(1);
    expect(readdirSync(jobs)).toEqual([String(process.pid)]);
    expect(lstatSync(join(jobs, String(process.pid))).isFile()).toBe(true);
  });
});
