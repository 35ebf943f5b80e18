import { describe, expect, it } from '@jest/globals';
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateControllerKey } from '../../../src/machine/keys.js';
import { startTestSSHServer } from '../../../src/machine/testing/ssh-server.js';
import type { TargetClients } from './providers.js';
import { parseProbe, probeCommand, probeHosts } from './probe.js';
import { parseEvidence, splitHeadOutput } from '../policy/pressure.js';
import { host, NOW, vm } from '../testing/pool.js';

const psi = (some: number) => `some avg10=0.00 avg60=${some.toFixed(2)} avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0`;
const head = (files: Record<string, string>) => Object.entries(files).map(([f, t]) => `==> ${f} <==\n${t}\n`).join('\n');

describe('parseProbe', () => {
  it.each([
    ['a job process', 'running', 'running'],
    ['no job process', 'none', 'none'],
    ['an answer cut short', '', 'unknown'],
  ])('%s', (_what, job, expected) => {
    const out = head({ '/proc/pressure/cpu': psi(12), '/proc/pressure/memory': psi(0), '/proc/pressure/io': psi(3), job });
    expect(parseProbe(out)).toMatchObject({ job: expected, pressure: { cpu: { some: { avg60: 12 } }, io: { some: { avg60: 3 } } } });
  });

  it('the runner cgroup\'s files, named by base name, give its memory use and OOM kills', () => {
    const out = head({
      '/proc/pressure/cpu': psi(1), '/proc/pressure/memory': psi(0), '/proc/pressure/io': psi(0),
      'memory.current': '900', 'memory.max': '1000', 'memory.events': 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1',
      job: 'running',
    });
    expect(parseProbe(out)).toMatchObject({ job: 'running', pressure: { cgroupMemoryUse: 0.9, cgroupOOMKills: 1 } });
  });

  it('a kernel without PSI gives no pressure evidence, but the job answer stands', () => {
    const p = parseProbe(head({ job: 'none' }));
    expect(p).toEqual({ job: 'none' });
  });
});

/** A loopback port nothing listens on: the SSH connection is refused at once. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe('probeHosts', () => {
  it.each([
    ['the address from the check\'s list: no instances.get per host', '127.0.0.1', 0],
    ['no address in the list: the VM is read for it', undefined, 1],
  ])('%s', async (_what, address, gets) => {
    const key = generateControllerKey();
    const calls = { hostKeys: 0, get: 0 };
    const gce = {
      hostKeys: async () => (calls.hostKeys++, [key.publicKey.split(' ').slice(0, 2).join(' ')]),
      get: async () => (calls.get++, { address: '127.0.0.1' }),
    };
    const clients = { gce, github: {} } as unknown as TargetClients;
    const observation = { at: NOW, jobs: [], runners: [], vms: [vm('h1', 'RUNNING', { address })], probes: new Map() };
    const probes = await probeHosts([host('h1', 'Idle')], observation, clients, { ...key, user: 'leasehold', port: await closedPort() });
    expect(calls).toEqual({ hostKeys: 1, get: gets });
    // Refused: unknown, which keeps the host.
    expect(probes.get('h1')).toEqual({ job: 'unknown' });
  });
});

describe('probeHosts, host keys', () => {
  it('reads a VM\'s guest attributes once its key is confirmed, again for a VM made anew under the name, and again after a failed connection', async () => {
    const controller = generateControllerKey();
    const hostKey = generateControllerKey('host');
    const server = await startTestSSHServer({ hostKey, clientKey: controller.publicKey, exec: (_cmd, stream) => { stream.write('==> job <==\nnone\n'); stream.exit(0); stream.end(); } });
    let published = [hostKey.publicKey.split(' ').slice(0, 2).join(' ')];
    const calls = { hostKeys: 0 };
    const gce = { hostKeys: async () => (calls.hostKeys++, published), get: async () => ({ address: '127.0.0.1' }) };
    const clients = { gce, github: {} } as unknown as TargetClients;
    const access = { ...controller, user: 'leasehold', port: server.port };
    const probe = (createdAt: string) =>
      probeHosts([host('h1', 'Idle')], { at: NOW, jobs: [], runners: [], vms: [vm('h1', 'RUNNING', { address: '127.0.0.1', createdAt })], probes: new Map() }, clients, access);
    try {
      expect((await probe('2026-12-03T10:00:00Z')).get('h1')).toEqual({ job: 'none' });
      expect((await probe('2026-12-03T10:00:00Z')).get('h1')).toEqual({ job: 'none' });
      expect(calls.hostKeys).toBe(1);
      // Another VM under the same name: its own keys, read again.
      expect((await probe('2026-12-03T11:00:00Z')).get('h1')).toEqual({ job: 'none' });
      expect(calls.hostKeys).toBe(2);
      // The kept key no longer answers: that probe is unknown, the key is forgotten and the next one reads the attributes.
      await server.close();
      expect((await probe('2026-12-03T11:00:00Z')).get('h1')).toEqual({ job: 'unknown' });
      published = [];
      expect((await probe('2026-12-03T11:00:00Z')).get('h1')).toEqual({ job: 'unknown' });
      expect(calls.hostKeys).toBe(3);
    } finally {
      await server.close().catch(() => {});
    }
  });
});

describe('probeCommand', () => {
  /** Runs the probe as the host's shell would, with HOME and the cgroup root in a scratch directory. */
  const run = (home: string, root: string) =>
    new Promise<string>((resolve, reject) =>
      execFile('bash', ['-c', probeCommand(root)], { env: { ...process.env, HOME: home } }, (err, stdout) => (err ? reject(err) : resolve(stdout))),
    );

  it('finds the runner service\'s cgroup from its Listener process and reads the memory files from inside it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'probe-'));
    const home = join(dir, 'home');
    mkdirSync(join(home, 'actions-runner', 'bin'), { recursive: true });
    const listener = join(home, 'actions-runner', 'bin', 'Runner.Listener');
    copyFileSync('/bin/sleep', listener);
    const proc = spawn(listener, ['60'], { stdio: 'ignore' });
    try {
      // The cgroup the probe will find: this machine's v2 path of the process (under a fake root).
      const cg = /^0::(.*)$/m.exec(readFileSync(`/proc/${proc.pid}/cgroup`, 'utf8'))![1]!;
      const root = join(dir, 'cgroup');
      mkdirSync(join(root, cg), { recursive: true });
      writeFileSync(join(root, cg, 'memory.current'), '750\n');
      writeFileSync(join(root, cg, 'memory.max'), '1000\n');
      writeFileSync(join(root, cg, 'memory.events'), 'low 0\nhigh 0\nmax 0\noom 0\noom_kill 2\n');
      const out = await run(home, root);
      expect(parseProbe(out).job).toBe('none');
      // /proc/pressure differs between machines; the cgroup part is what is checked, through the evidence parser.
      const files = splitHeadOutput(out);
      expect([...files.keys()].filter((f) => f.startsWith('memory.'))).toEqual(['memory.current', 'memory.max', 'memory.events']);
      const psiFiles = new Map([...files].filter(([f]) => f.startsWith('memory.')).concat([['/proc/pressure/cpu', psi(0)], ['/proc/pressure/memory', psi(0)], ['/proc/pressure/io', psi(0)]]));
      expect(parseEvidence(psiFiles)).toMatchObject({ ok: true, value: { cgroupMemoryUse: 0.75, cgroupOOMKills: 2 } });
    } finally {
      proc.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without a Listener process the probe reads no cgroup and still answers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'probe-'));
    try {
      const out = await run(join(dir, 'home'), join(dir, 'cgroup'));
      expect(out).not.toContain('==> memory.');
      expect(parseProbe(out).job).toBe('none');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
