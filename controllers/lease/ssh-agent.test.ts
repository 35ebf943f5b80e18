// The machine driver with the real SSH agent against an in-process SSH server
// (ssh2's) that runs each command with a local /bin/sh: device keys are
// written when a machine is made ready and when spec.sshKeys changes, never on
// a routine probe.
import { describe, it, expect, beforeAll, afterAll, beforeEach } from '@jest/globals';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { Lease, Offer } from '../../src/api/index.js';
import { generateControllerKey } from '../../src/machine/keys.js';
import { execInShell, startTestSSHServer, type TestSSHServer } from '../../src/machine/testing/ssh-server.js';
import { sshKeysHash as keysHash } from '../../src/api/lease.js';
import { MachineDriver } from './machine-driver.js';
import { sshAgent } from './ssh-agent.js';

// Probes here are never cancelled.
const never = new AbortController().signal;
const hostKey = generateControllerKey('host');
const controller = generateControllerKey();
const alice = generateControllerKey('alice').publicKey;
const bob = generateControllerKey('bob').publicKey;

let dir: string;
let server: TestSSHServer;
let commands: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-ssh-agent-'));
  mkdirSync(join(dir, 'home'));
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: join(dir, 'home'), LEASEHOLD_HOME: join(dir, 'lh'), LEASEHOLD_AUTHORIZED_KEYS: join(dir, 'keys', 'authorized_keys') };
  const shell = execInShell(env);
  server = await startTestSSHServer({
    hostKey,
    clientKey: controller.publicKey,
    exec: (command, stream, conn) => {
      commands.push(command);
      shell(command, stream, conn);
    },
  });
});

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  commands = [];
});

const offers = { get: (): Offer | undefined => undefined, list: (): Offer[] => [] };
const driver = new MachineDriver({
  offers,
  key: async () => controller,
  agent: sshAgent(5000),
  compare: () => [],
  acquireTimeoutMs: 10_000,
  releaseTimeoutMs: 10_000,
  log: pino({ level: 'silent' }),
});

function lease(sshKeys: string[], installedKeysHash?: string): Lease {
  return {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: { name: 'l', namespace: 'ns', uid: 'u' },
    spec: { where: 'cpus>=1', sshKeys },
    status: {
      phase: 'Ready',
      offer: 'box',
      machine: { ssh: { host: '127.0.0.1', port: server.port, user: 'tester', hostKey: hostKey.publicKey } },
      ...(installedKeysHash ? { installedKeysHash } : {}),
    },
  } as Lease;
}

const keyWrites = () => commands.filter((c) => /leasehold-agent" keys/.test(c)).length;
const authorized = () => readFileSync(join(dir, 'keys', 'authorized_keys'), 'utf8');

describe('device keys on a machine', () => {
  it('writes them when the machine is made ready, even if a hash was recorded before', async () => {
    const r = await driver.prepare(lease([alice], keysHash([alice])), never);
    expect(r.kind).toBe('ok');
    expect(keyWrites()).toBe(1);
    expect(authorized()).toBe(`${controller.publicKey}\n${alice}\n`);
    expect(r.kind === 'ok' && r.keysHash).toBe(keysHash([alice]));
  });

  it('leaves authorized_keys alone on a probe while spec.sshKeys is what was installed', async () => {
    await driver.prepare(lease([alice]), never);
    const before = statSync(join(dir, 'keys', 'authorized_keys')).mtimeMs;
    commands = [];
    for (let i = 0; i < 3; i++) {
      const r = await driver.check(lease([alice], keysHash([alice])), never);
      expect(r.kind === 'ok' && r.keysHash).toBe(keysHash([alice]));
    }
    expect(commands.some((c) => /leasehold-agent" probe/.test(c))).toBe(true);
    expect(keyWrites()).toBe(0);
    expect(statSync(join(dir, 'keys', 'authorized_keys')).mtimeMs).toBe(before);
    expect(authorized()).toBe(`${controller.publicKey}\n${alice}\n`);
  });

  it('rewrites them when spec.sshKeys changes: a key added, then one removed', async () => {
    await driver.prepare(lease([alice]), never);
    commands = [];
    const added = await driver.check(lease([alice, bob], keysHash([alice])), never);
    expect(keyWrites()).toBe(1);
    expect(authorized()).toBe(`${controller.publicKey}\n${alice}\n${bob}\n`);
    expect(added.kind === 'ok' && added.keysHash).toBe(keysHash([alice, bob]));

    commands = [];
    const removed = await driver.check(lease([bob], keysHash([alice, bob])), never);
    expect(keyWrites()).toBe(1);
    expect(authorized()).toBe(`${controller.publicKey}\n${bob}\n`);
    expect(removed.kind === 'ok' && removed.keysHash).toBe(keysHash([bob]));
  });

  it('writes them on a probe when no hash was recorded', async () => {
    await driver.check(lease([bob]), never);
    expect(keyWrites()).toBe(1);
  });
});
