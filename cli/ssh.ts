// leasehold ssh NAME [--print] [-- CMD...]: OpenSSH to a Lease's machine with
// the device key and a known_hosts file holding only the host key the
// Lease's status pins, so ssh neither prompts nor trusts anything else. The
// device key is added to the Lease first, as run does.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Lease } from '../src/api/lease.js';
import { leave, waitUsable } from './acquire.js';
import { defaultKeyPath, loadDeviceKey } from './device-key.js';
import { EXIT, ExitError } from './exit-codes.js';
import { commonFlags, parseCommand, positionals } from './flags.js';
import { connect } from './kube.js';
import { markActivity } from './lease-use.js';
import type { Out } from './leases.js';
import { sshTargetOf } from './target.js';
import { Progress, type ProgressSink } from './output.js';

export const SSH_USAGE = 'usage: leasehold ssh NAME [--print] [-n NAMESPACE] [--key FILE] [-- CMD...]';

/** The known_hosts line for the machine: "[host]:port key" (plain "host key" on port 22). */
export function knownHostsLine(ssh: { host: string; port?: number | undefined; hostKey: string }): string {
  const port = ssh.port ?? 22;
  return `${port === 22 ? ssh.host : `[${ssh.host}]:${port}`} ${ssh.hostKey.trim()}\n`;
}

/**
 * The ssh argv for the machine: only this key, only the pinned host key, no
 * prompts. `--` ends ssh's options before the destination, so neither it
 * nor the command after it is read as one.
 */
export function sshArgs(ssh: { host: string; port?: number | undefined; user: string }, keyPath: string, knownHosts: string, command: string[]): string[] {
  return [
    '-i', keyPath,
    '-o', 'IdentitiesOnly=yes',
    '-o', `UserKnownHostsFile=${knownHosts}`,
    '-o', 'GlobalKnownHostsFile=/dev/null',
    '-o', 'StrictHostKeyChecking=yes',
    '-o', 'UpdateHostKeys=no',
    '-p', String(ssh.port ?? 22),
    '--',
    `${ssh.user}@${ssh.host}`,
    ...command,
  ];
}

const quote = (a: string) => (/^[A-Za-z0-9_./:=@%+,-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`);

export async function ssh(args: string[], out: Out, err: ProgressSink, env: NodeJS.ProcessEnv): Promise<number> {
  const { values, positionals: pos, rest } = parseCommand(args, { print: { type: 'boolean' } }, SSH_USAGE);
  if (values.help) return void out.write(`${SSH_USAGE}\n`), 0;
  const [name] = positionals(pos, ['NAME'], SSH_USAGE) as [string];
  const common = commonFlags(values);
  const key = loadDeviceKey(common.key ?? defaultKeyPath(env));
  const cluster = await connect(common, env);
  const found = await cluster.leases.get(cluster.namespace, name);
  if (!found) throw new ExitError(`Lease ${name} not found in namespace ${cluster.namespace}; leasehold leases lists them`, EXIT.error);
  const progress = new Progress(err);
  const abort = new AbortController();
  const waiting = { api: cluster.leases, progress, runID: `ssh-${randomBytes(6).toString('hex')}`, signal: abort.signal };
  const interrupt = () => abort.abort();
  process.once('SIGINT', interrupt);
  let lease: Lease;
  try {
    lease = await waitUsable(waiting, found, key, false);
    lease = await markActivity(cluster.leases, lease);
  } catch (e) {
    if (!abort.signal.aborted) throw e;
    // Off the waiters, so a run that stops later may still withdraw the Lease; never withdrawn from here.
    await leave(waiting, found, false);
    throw new ExitError('interrupted', EXIT.interrupted);
  } finally {
    process.off('SIGINT', interrupt);
    progress.done();
  }
  const target = sshTargetOf(`${cluster.namespace}/${name}`, lease.status?.machine?.ssh);
  if (values.print) {
    const file = join(dirname(key.path), 'known_hosts.d', `${cluster.namespace}.${name}`);
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, knownHostsLine(target), { mode: 0o600 });
    out.write(`ssh ${sshArgs(target, key.path, file, rest ?? []).map(quote).join(' ')}\n`);
    return EXIT.ok;
  }
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-ssh-'));
  const file = join(dir, 'known_hosts');
  writeFileSync(file, knownHostsLine(target), { mode: 0o600 });
  // ssh owns the terminal now: Ctrl-C is its to handle, not this process's.
  const ignore = () => undefined;
  process.on('SIGINT', ignore);
  try {
    const child = spawn('ssh', sshArgs(target, key.path, file, rest ?? []), { stdio: 'inherit' });
    return await new Promise<number>((resolve, reject) => {
      child.once('error', (e) => reject(new ExitError(`cannot run ssh: ${e.message}; install OpenSSH, or use --print`, EXIT.error)));
      child.once('exit', (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
    });
  } finally {
    process.off('SIGINT', ignore);
    rmSync(dir, { recursive: true, force: true });
  }
}
