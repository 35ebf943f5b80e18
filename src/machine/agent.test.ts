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
  const line = '{"os":"linux","arch":"amd64","cpus":4,"memoryGiB":16,"gpus":0,"busy":1,"jobs":3}';

  it('reads the last line of output', () => {
    expect(parseProbe(`motd noise\n${line}\n\n`)).toEqual({ os: 'linux', arch: 'amd64', cpus: 4, memoryGiB: 16, gpus: 0, busy: 1, jobs: 3 });
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

  it('reads GPUs from nvidia-smi: count, first model, smallest memory', async () => {
    const fake = join(dir, 'fakebin');
    mkdirSync(fake);
    writeFileSync(
      join(fake, 'nvidia-smi'),
      `#!/bin/sh\n[ "$*" = "--query-gpu=name,memory.total --format=csv,noheader,nounits" ] || exit 9\n[ -n "\${FAIL:-}" ] && { echo "NVIDIA-SMI has failed"; exit 9; }\nprintf 'NVIDIA H100 80GB HBM3, 81559\\nNVIDIA H100 80GB HBM3, 81000\\n'\n`,
    );
    chmodSync(join(fake, 'nvidia-smi'), 0o755);
    env.PATH = `${fake}:${env.PATH}`;
    await installAgent(shell, { controllerKey: controller, deviceKeys: [] });
    expect(await probe(shell)).toMatchObject({ gpus: 2, gpuModel: 'NVIDIA H100 80GB HBM3', vramGiB: 79 });
    env.FAIL = '1';
    const failed = await probe(shell);
    expect(failed.gpus).toBe(0);
    expect(failed).not.toHaveProperty('gpuModel');
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
