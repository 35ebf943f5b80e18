// The CLI connects where a Lease's status says. Whoever managed to write
// that status (no controller runs here, and the chart's admission policy is
// not installed, so an admin writes it as a tenant with status rights
// could), a host or user that ssh would read as an option never reaches
// ssh, and `leasehold ssh` and `leasehold run` stop with an error naming the
// field.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sshKeysHash } from '../src/api/lease.js';
import { cleanupCLI, cliUser, newDevice, runCLI, type CLIUser } from './support/cli.js';
import { apply, freshNamespace, testKubectl } from './support/kube.js';
import { leaseManifest } from './support/builders.js';

const kubectl = testKubectl();
let ns: string;
let user: CLIUser;
const device = newDevice();
const dir = mkdtempSync(join(tmpdir(), 'leasehold-target-'));
const canary = join(dir, 'canary');
/** An `ssh` first on PATH that records that it ran: it never should. */
const bin = join(dir, 'bin');
const sshRan = join(dir, 'ssh-ran');
let publicKey: string;
let hostKey: string;

beforeAll(async () => {
  ns = await freshNamespace(kubectl, 'cli-target');
  user = await cliUser(kubectl, ns, 'cli-target-user', `lh-tgt-${Date.now().toString(36)}`);
  mkdirSync(join(device, 'leasehold'), { recursive: true, mode: 0o700 });
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(device, 'leasehold', 'id_ed25519')]);
  publicKey = readFileSync(join(device, 'leasehold', 'id_ed25519.pub'), 'utf8').trim();
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'host')]);
  hostKey = readFileSync(join(dir, 'host.pub'), 'utf8').trim().split(' ').slice(0, 2).join(' ');
  mkdirSync(bin);
  writeFileSync(join(bin, 'ssh'), `#!/bin/sh\necho "$@" >> ${sshRan}\n`);
  chmodSync(join(bin, 'ssh'), 0o755);
});

afterAll(async () => {
  await cleanupCLI(kubectl, ns, user);
});

async function leaseWithTarget(name: string, ssh: Record<string, unknown>): Promise<void> {
  await apply(kubectl, leaseManifest(name, ns, { where: 'cpus>=1', sshKeys: [publicKey] }));
  const status = { phase: 'Ready', installedKeysHash: sshKeysHash([publicKey]), machine: { ssh: { port: 22, hostKey, ...ssh } } };
  const r = await kubectl(['-n', ns, 'patch', 'leases.leasehold.dev', name, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
  if (r.code !== 0) throw new Error(`status patch refused: ${r.stderr}`);
}

const cli = (args: string[]) =>
  runCLI(args, { kubeconfig: user.kubeconfig, device, program: { command: process.execPath, args: ['--import', 'tsx', join(process.cwd(), 'cmd/leasehold.ts')], path: bin } });

describe('a Lease status naming an SSH target that is an option', () => {
  it.each([
    ['host', { host: `-oProxyCommand=touch ${canary}`, user: 'u' }, /status\.machine\.ssh\.host "-oProxyCommand=touch .*" is not a host name or IP address/],
    ['user', { host: '127.0.0.1', user: `-oProxyCommand=touch ${canary}` }, /status\.machine\.ssh\.user "-oProxyCommand=touch .*" is not a POSIX user name/],
  ])('in its %s never reaches ssh, and leasehold ssh says which field is wrong', async (field, target, message) => {
    const name = `bad-${field}`;
    await leaseWithTarget(name, target);
    for (const args of [['ssh', name], ['ssh', name, '--print']]) {
      const r = await cli(args);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).not.toContain('ProxyCommand');
    }
    expect(existsSync(sshRan)).toBe(false);
    expect(existsSync(canary)).toBe(false);
  }, 60_000);

  it('stops leasehold run before it connects', async () => {
    await leaseWithTarget('bad-run', { host: `-oProxyCommand=touch ${canary}`, user: 'u' });
    const r = await cli(['run', '--lease', 'bad-run', '--', 'true']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/status\.machine\.ssh\.host .* is not a host name or IP address/);
    expect(existsSync(canary)).toBe(false);
  }, 60_000);
});
