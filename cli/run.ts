// leasehold run --where EXPR [--offer NAME] [--lease NAME] -- CMD...
// Finds or makes a Lease, waits for this device's key on its Ready machine,
// marks it active, and runs CMD there through the agent's job wrapper,
// exiting with CMD's code. Ctrl-C while the Lease launches withdraws it
// (unless another run waits on it); while CMD runs, the first Ctrl-C goes
// to CMD and a second one detaches.
import { randomBytes } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import type { Lease } from '../src/api/lease.js';
import { parseWhere } from '../src/api/where.js';
import { interruptJobCommand, jobCommand } from '../src/machine/job.js';
import { createLease, leave, leaseName, newLease, reusable, waitUsable, type Waiting } from './acquire.js';
import { defaultKeyPath, loadDeviceKey, type DeviceKey } from './device-key.js';
import { EXIT, ExitError } from './exit-codes.js';
import { commonFlags, parseCommand, UsageError } from './flags.js';
import { connect } from './kube.js';
import type { Cluster } from './leaseapi.js';
import { markActivity, nameOf } from './lease-use.js';
import { Progress } from './output.js';
import { connectMachine, DetachedError, type MachineConnection, type RemoteJob } from './remote.js';
import { sshTargetOf } from './target.js';

export const RUN_USAGE = 'usage: leasehold run --where EXPR [--offer NAME] [--lease NAME] [-n NAMESPACE] [--key FILE] -- CMD [ARG...]';

export interface RunIO {
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
  stdin: Readable & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Where Ctrl-C comes from (the process); tests pass an emitter. */
  interrupts: { on(event: 'SIGINT', fn: () => void): unknown; off(event: 'SIGINT', fn: () => void): unknown };
}

export interface RunFlags {
  where: string | undefined;
  offer: string | undefined;
  lease: string | undefined;
  command: string;
}

export function parseRunFlags(args: string[]): { run: RunFlags; common: ReturnType<typeof commonFlags>; help: boolean } {
  const { values, positionals, rest } = parseCommand(args, { where: { type: 'string' }, offer: { type: 'string' }, lease: { type: 'string' } }, RUN_USAGE);
  const common = commonFlags(values);
  if (values.help) return { run: { where: undefined, offer: undefined, lease: undefined, command: '' }, common, help: true };
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}: put the command after --\n${RUN_USAGE}`);
  if (!rest?.length) throw new UsageError(`nothing to run: give the command after --\n${RUN_USAGE}`);
  if (values.where === undefined && values.lease === undefined) throw new UsageError(`--where is required (or --lease naming a Lease)\n${RUN_USAGE}`);
  if (values.where !== undefined) {
    const parsed = parseWhere(values.where);
    if (!parsed.ok) throw new UsageError(`--where ${values.where}: ${parsed.error}`);
  }
  // As ssh does: the words are joined with spaces and the remote shell reads the line.
  return { run: { where: values.where, offer: values.offer, lease: values.lease, command: rest.join(' ') }, common, help: false };
}

type Stage = { kind: 'preparing' } | { kind: 'waiting'; lease: Lease; abort: AbortController } | { kind: 'running'; job: RemoteJob; interrupted: boolean };

export async function run(args: string[], io: RunIO): Promise<number> {
  const { run: flags, common, help } = parseRunFlags(args);
  if (help) {
    io.stdout.write(`${RUN_USAGE}\n`);
    return EXIT.ok;
  }
  const progress = new Progress(io.stderr);
  let key: DeviceKey;
  try {
    key = loadDeviceKey(common.key ?? defaultKeyPath(io.env));
  } catch (err) {
    throw new ExitError(`device key: ${err instanceof Error ? err.message : String(err)}`, EXIT.runFailed);
  }
  const cluster = await connect(common, io.env);
  const runID = randomBytes(6).toString('hex');
  let stage: Stage = { kind: 'preparing' };
  let interrupted = false;
  const onInterrupt = () => {
    if (stage.kind === 'running') {
      if (!stage.interrupted) {
        stage.interrupted = true;
        stage.job.interrupt();
        progress.note('sent Ctrl-C to the command; press Ctrl-C again to detach and leave it running');
      } else {
        stage.job.detach();
      }
      return;
    }
    interrupted = true;
    if (stage.kind === 'waiting') stage.abort.abort(new ExitError('interrupted', EXIT.interrupted));
  };
  io.interrupts.on('SIGINT', onInterrupt);
  try {
    const abort = new AbortController();
    const waiting: Waiting = { api: cluster.leases, progress, runID, signal: abort.signal };
    const { lease: found, created } = await findOrCreate(cluster, waiting, flags, key);
    stage = { kind: 'waiting', lease: found, abort };
    let lease: Lease;
    try {
      if (interrupted) throw new ExitError('interrupted', EXIT.interrupted);
      lease = await waitUsable(waiting, found, key, created);
    } catch (err) {
      if (!abort.signal.aborted && !interrupted) throw err;
      progress.done();
      const withdrawn = await leave(waiting, found, true);
      throw new ExitError(
        withdrawn
          ? `interrupted; withdrew Lease ${nameOf(found)}, so its machine is released`
          : `interrupted; Lease ${nameOf(found)} is kept (another run waits on it, it is Ready, or it was not made by leasehold run)`,
        EXIT.interrupted,
      );
    }
    stage = { kind: 'preparing' };
    const target = sshTargetOf(nameOf(lease), lease.status?.machine?.ssh);
    // The SSH handshake runs while the activity is written; the command is
    // sent only once that write is accepted, so a run that asks after the
    // release was recorded is still refused before anything runs.
    const connecting = connectMachine(target, key.privateKey, key.path);
    // Handled here, awaited below: a refused connection must not end the process as an unhandled rejection meanwhile.
    connecting.catch(() => undefined);
    let connection: MachineConnection;
    try {
      lease = await markActivity(cluster.leases, lease);
      connection = await connecting;
    } catch (err) {
      void connecting.then((c) => c.close(), () => undefined);
      throw err;
    }
    if (JSON.stringify(sshTargetOf(nameOf(lease), lease.status?.machine?.ssh)) !== JSON.stringify(target)) {
      connection.close();
      throw new ExitError(`Lease ${nameOf(lease)} names another machine than when this run connected; run again`, EXIT.runFailed);
    }
    if (interrupted) {
      connection.close();
      throw new ExitError('interrupted before the command started', EXIT.interrupted);
    }
    progress.done();
    const job = await connection.start({ run: jobCommand(flags.command, runID), interrupt: interruptJobCommand(runID) }, {
      stdout: io.stdout,
      stderr: io.stderr,
      stdin: io.stdin.isTTY ? undefined : io.stdin,
    });
    stage = { kind: 'running', job, interrupted: false };
    // A Ctrl-C pressed while connecting is the command's first one.
    if (interrupted) onInterrupt();
    try {
      return await job.exit;
    } catch (err) {
      if (err instanceof DetachedError) throw new ExitError(`${err.message} on Lease ${nameOf(lease)}`, EXIT.interrupted);
      throw err;
    }
  } finally {
    progress.done();
    io.interrupts.off('SIGINT', onInterrupt);
  }
}

async function findOrCreate(cluster: Cluster, w: Waiting, flags: RunFlags, key: DeviceKey): Promise<{ lease: Lease; created: boolean }> {
  const ns = cluster.namespace;
  if (flags.lease) {
    const named = await cluster.leases.get(ns, flags.lease);
    if (named) {
      w.progress.note(`using Lease ${flags.lease} (${named.status?.phase ?? 'new'})`);
      return { lease: named, created: false };
    }
    if (!flags.where) throw new ExitError(`Lease ${flags.lease} does not exist in namespace ${ns}; add --where to create it`, EXIT.leaseUnusable);
  }
  const where = flags.where!;
  if (!flags.lease) {
    const found = reusable(await cluster.leases.list(ns), where, flags.offer);
    if (found) {
      const st = found.status ?? {};
      w.progress.note(`reusing Lease ${nameOf(found)} (${st.phase}, Offer ${st.offer ?? '-'}${st.pricePerHour === undefined ? '' : `, $${st.pricePerHour.toFixed(2)}/h`})`);
      return { lease: found, created: false };
    }
  }
  const name = flags.lease ?? leaseName(where);
  w.progress.note(`no Lease in ${ns} matches ${where}${flags.offer ? ` on Offer ${flags.offer}` : ''}; creating Lease ${name}`);
  return { lease: await createLease(w, newLease(ns, name, where, flags.offer, key, w.runID)), created: true };
}
