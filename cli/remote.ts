// The user's command on the machine: one SSH connection with the device key,
// accepting only the host key the Lease's status pins (no known_hosts, no
// prompt), one exec through the agent's job wrapper, output streamed with
// backpressure (memory stays flat however much the command prints).
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import ssh2 from 'ssh2';
import type { ClientChannel } from 'ssh2';
import { fingerprint, parsePublicKey, sameHostKey } from '../src/machine/keys.js';
import { HOST_KEY_ALGORITHMS } from '../src/machine/ssh.js';

const { Client } = ssh2;

export interface SshTarget {
  host: string;
  port: number;
  user: string;
  hostKey: string;
}

export interface JobIO {
  stdout: Writable;
  stderr: Writable;
  /** Sent to the command's stdin; none: stdin is closed at once. */
  stdin?: Readable | undefined;
}

export interface RemoteJob {
  /** The command's exit code (128 + N when a signal N ended it). */
  readonly exit: Promise<number>;
  /** Sends SIGINT to the command's process group (over a second session on the same connection). */
  interrupt(): void;
  /** Leaves the command running and closes the connection; `exit` rejects with DetachedError. */
  detach(): void;
}

export class DetachedError extends Error {
  override readonly name = 'DetachedError';
}

/** The remote command lines: the job, and what interrupts it. */
export interface JobCommands {
  run: string;
  interrupt: string;
}

/** An open SSH connection to the machine, on which nothing has run yet. */
export interface MachineConnection {
  /** Starts the job. Rejects when no session or exec could be had. */
  start(command: JobCommands, io: JobIO): Promise<RemoteJob>;
  /** Closes the connection without running anything. */
  close(): void;
}

/** Connects with the pinned host key and the device key. Rejects when the machine cannot be reached, or refuses the key. */
export function connectMachine(target: SshTarget, privateKey: string, keyPath: string, timeoutMs = 30_000): Promise<MachineConnection> {
  const where = `${target.user}@${target.host}:${target.port}`;
  const pinned = parsePublicKey(target.hostKey);
  if (!pinned.ok) return Promise.reject(new Error(`the Lease's status.machine.ssh.hostKey cannot be used: ${pinned.error}`));
  const algorithms = HOST_KEY_ALGORITHMS[pinned.type];
  if (!algorithms) return Promise.reject(new Error(`the Lease's host key is a ${pinned.type} key, which cannot be a host key`));
  return new Promise((resolve, reject) => {
    const client = new Client();
    let mismatch: string | undefined;
    let ready = false;
    let started = false;
    let lost: Error | undefined;
    client.on('error', (err: Error & { level?: string }) => {
      if (started) return;
      if (ready) {
        lost ??= new Error(`SSH to ${where} failed: ${err.message}`);
        return;
      }
      if (mismatch) return reject(new Error(mismatch));
      if (err.level === 'client-authentication') {
        return reject(new Error(`${where} did not accept the device key ${keyPath}: it is not in the machine's authorized keys yet, or was removed from the Lease's spec.sshKeys`));
      }
      reject(new Error(`SSH to ${where} failed: ${err.message}`));
    });
    client.on('close', () => {
      if (ready && !started) lost ??= new Error(`the connection to ${where} closed before the command started`);
    });
    client.on('ready', () => {
      ready = true;
      resolve({
        close: () => client.end(),
        start: (command, io) =>
          new Promise((resolveJob, failed) => {
            if (lost) return failed(lost);
            client.exec(command.run, (err, channel) => {
              if (err) {
                client.end();
                return failed(new Error(`cannot start the command on ${where}: ${err.message}`));
              }
              started = true;
              resolveJob(job(client, channel, io, where, command.interrupt));
            });
          }),
      });
    });
    client.connect({
      host: target.host,
      port: target.port,
      username: target.user,
      privateKey,
      readyTimeout: timeoutMs,
      keepaliveInterval: 15_000,
      keepaliveCountMax: 4,
      tryKeyboard: false,
      algorithms: { serverHostKey: algorithms },
      hostVerifier: (presented: Buffer) => {
        if (sameHostKey(target.hostKey, presented)) return true;
        mismatch = `${target.host}:${target.port} presented host key ${fingerprint(presented)}, not the ${fingerprint(pinned.blob)} the Lease pins; refusing to connect`;
        return false;
      },
    });
    // Without ssh2's native crypto (the bundle leaves it out) a packet goes
    // out in more than one write, and Nagle's algorithm then holds each
    // handshake step for the peer's delayed ACK: 0.2 s of a 0.05 s handshake.
    client.setNoDelay(true);
  });
}

function job(client: InstanceType<typeof Client>, channel: ClientChannel, io: JobIO, where: string, interruptCommand: string): RemoteJob {
  let detached = false;
  const exit = new Promise<number>((resolve, reject) => {
    let code: number | undefined;
    channel.on('exit', (status: number | null, signal?: string) => {
      if (typeof status === 'number') code = status;
      else if (signal) code = 128 + (constants.signals[signal as NodeJS.Signals] ?? 0);
    });
    client.on('close', () => {
      if (detached) return reject(new DetachedError(`detached from the command on ${where}; it keeps running`));
      if (code === undefined) return reject(new Error(`the connection to ${where} was lost before the command ended`));
      resolve(code);
    });
    channel.on('close', () => client.end());
  });
  // pipe() pauses the channel while stdout is full, and SSH flow control
  // then pauses the remote command: nothing piles up in this process.
  channel.pipe(io.stdout, { end: false });
  channel.stderr.pipe(io.stderr, { end: false });
  if (io.stdin) io.stdin.pipe(channel);
  else channel.end();
  return {
    exit,
    interrupt: () => {
      client.exec(interruptCommand, (err, stream) => {
        if (err) return io.stderr.write(`leasehold: could not forward Ctrl-C to ${where}: ${err.message}\n`);
        stream.resume();
        stream.stderr.resume();
      });
    },
    detach: () => {
      detached = true;
      io.stdin?.unpipe(channel);
      client.end();
    },
  };
}
