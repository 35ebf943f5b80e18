// SSH to a machine with its host key pinned: the only key accepted is the one
// the provider reported for it (the target's host_key).
import { constants } from 'node:os';
import ssh2 from 'ssh2';
import type { ClientChannel, ServerHostKeyAlgorithm } from 'ssh2';
import { fingerprint, parsePublicKey, sameHostKey, type PublicKeyType } from './keys.js';

const { Client, utils } = ssh2;
type SshClient = InstanceType<typeof Client>;

/** The machine presented a host key other than the pinned one, or there was no usable key to pin. */
export class HostKeyMismatchError extends Error {
  override name = 'HostKeyMismatchError';
}

/** The target gave no host_key, so there is nothing to pin and the controller will not connect. */
export class MissingHostKeyError extends HostKeyMismatchError {
  override name = 'MissingHostKeyError';
}

/** No SSH session could be had: refused, timed out, connection lost, or a remote command hung. */
export class UnreachableError extends Error {
  override name = 'UnreachableError';
}

/** The machine did not admit the controller's key (or that key cannot be used). */
export class AuthError extends Error {
  override name = 'AuthError';
}

export interface ConnectOptions {
  host: string;
  port: number;
  user: string;
  /** The pinned host key, "ssh-ed25519 AAAA...". Required: without it nothing is connected to. */
  hostKey?: string | undefined;
  privateKey: string;
  /** Budget for TCP connect, key exchange and authentication together. */
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface ExecOptions {
  stdin?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface ExecResult {
  /** The exit status; 128 + N when killed by signal N (as a shell reports it); -1 when the server sent none. */
  code: number;
  stdout: string;
  stderr: string;
  /** Whether stdout or stderr passed OUTPUT_CAP_BYTES and was cut there. */
  truncated: boolean;
}

export const OUTPUT_CAP_BYTES = 1024 * 1024;

// Host key algorithms to negotiate for each pinned key type. Offering only
// these makes a server that has several host keys present the pinned one,
// rather than, say, its RSA key when ed25519 was pinned.
export const HOST_KEY_ALGORITHMS: Partial<Record<PublicKeyType, ServerHostKeyAlgorithm[]>> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
};

export class SshSession {
  readonly #client: SshClient;
  readonly #where: string;
  readonly #pending = new Set<(err: Error) => void>();
  #closed = false;
  #lastError: Error | undefined;

  /** @internal connectPinned makes sessions; the client must already be ready. */
  constructor(client: SshClient, where: string) {
    this.#client = client;
    this.#where = where;
    // An 'error' event with no listener would crash the process.
    client.on('error', (err: Error) => {
      this.#lastError = err;
    });
    client.on('close', () => {
      this.#closed = true;
      const why = this.#lastError ? `: ${this.#lastError.message}` : '';
      for (const fail of [...this.#pending]) fail(new UnreachableError(`the SSH connection to ${where} was lost${why}`));
    });
  }

  /** Runs a command through the remote user's shell; stdin, when given, is written and closed. */
  exec(command: string, opts: ExecOptions): Promise<ExecResult> {
    if (this.#closed) return Promise.reject(new UnreachableError(`the SSH session to ${this.#where} is closed`));
    if (opts.signal?.aborted) return Promise.reject(aborted(opts.signal));
    return new Promise((resolve, reject) => {
      let settled = false;
      let channel: ClientChannel | undefined;
      const settle = (err: Error | undefined, result?: ExecResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#pending.delete(onLost);
        opts.signal?.removeEventListener('abort', onAbort);
        if (err) {
          stop(channel);
          reject(err);
        } else {
          resolve(result!);
        }
      };
      const onLost = (err: Error) => settle(err);
      const onAbort = () => settle(aborted(opts.signal!));
      const timer = setTimeout(
        () => settle(new UnreachableError(`a command on ${this.#where} did not finish within ${opts.timeoutMs} ms`)),
        opts.timeoutMs,
      );
      this.#pending.add(onLost);
      opts.signal?.addEventListener('abort', onAbort, { once: true });

      this.#client.exec(command, (err, stream) => {
        if (err) return settle(new UnreachableError(`cannot run a command on ${this.#where}: ${err.message}`));
        if (settled) return stop(stream);
        channel = stream;
        const out = new Capped();
        const errOut = new Capped();
        let code = -1;
        stream.on('data', (d: Buffer) => out.add(d));
        stream.stderr.on('data', (d: Buffer) => errOut.add(d));
        stream.on('exit', (status: number | null, signal?: string) => {
          if (typeof status === 'number') code = status;
          else if (signal) code = 128 + (constants.signals[signal as NodeJS.Signals] ?? 0);
        });
        stream.on('close', () =>
          settle(undefined, { code, stdout: out.text(), stderr: errOut.text(), truncated: out.truncated || errOut.truncated }),
        );
        stream.end(opts.stdin ?? '');
      });
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#client.end();
  }
}

/**
 * Opens an SSH session to a machine, accepting only its pinned host key. A
 * machine that presents any other key is refused (HostKeyMismatchError); a
 * target without a host key is never connected to (MissingHostKeyError).
 */
export function connectPinned(opts: ConnectOptions): Promise<SshSession> {
  const hostPort = `${opts.host}:${opts.port}`;
  const where = `${opts.user}@${hostPort}`;
  // Trusting whatever key shows up first would let anyone on the path pose
  // as the machine and receive the users' sessions: no pin, no connection.
  if (!opts.hostKey?.trim()) {
    return Promise.reject(
      new MissingHostKeyError(
        `${hostPort} has no pinned host key: the target must give host_key ("ssh-ed25519 AAAA..."), since the controller never trusts a host key on first use`,
      ),
    );
  }
  const pinnedLine = opts.hostKey;
  const pinned = parsePublicKey(pinnedLine);
  if (!pinned.ok) return Promise.reject(new HostKeyMismatchError(`the target's host_key for ${hostPort} cannot be used: ${pinned.error}`));
  const algorithms = HOST_KEY_ALGORITHMS[pinned.type];
  if (!algorithms) return Promise.reject(new HostKeyMismatchError(`the target's host_key for ${hostPort} is a ${pinned.type} key, which cannot be a host key`));
  // Checked here so that no error from the SSH library about the key (let
  // alone the key) reaches a log or a Lease status.
  if (!isPrivateKey(opts.privateKey)) {
    return Promise.reject(new AuthError("the controller's private key cannot be parsed; recreate its Secret"));
  }
  if (opts.signal?.aborted) return Promise.reject(aborted(opts.signal));

  return new Promise((resolve, reject) => {
    const client = new Client();
    let mismatch: HostKeyMismatchError | undefined;
    let settled = false;
    const settle = (err: Error | undefined) => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener('abort', onAbort);
      client.removeListener('error', onError);
      client.removeListener('close', onClose);
      if (err) {
        client.on('error', () => {}); // a late socket error after giving up must not crash the process
        client.end();
        client.destroy();
        reject(err);
      } else {
        resolve(new SshSession(client, where));
      }
    };
    const onError = (err: Error & { level?: string }) => {
      if (mismatch) return settle(mismatch);
      switch (err.level) {
        case 'client-authentication':
          return settle(new AuthError(`${where} did not accept the controller's key: the machine must admit the key given to the provider as LEASEHOLD_LEASE_SSH_KEY`));
        case 'client-timeout':
          return settle(new UnreachableError(`${where}: no SSH session within ${opts.timeoutMs} ms`));
        case 'client-socket':
        case 'client-dns':
          return settle(new UnreachableError(`cannot reach ${hostPort}: ${err.message}`));
        default:
          return settle(new UnreachableError(`SSH to ${where} failed: ${err.message}`));
      }
    };
    const onClose = () => settle(mismatch ?? new UnreachableError(`${where} closed the connection before an SSH session was set up`));
    const onAbort = () => settle(aborted(opts.signal!));
    client.on('error', onError);
    client.on('close', onClose);
    client.once('ready', () => settle(undefined));
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    try {
      client.connect({
        host: opts.host,
        port: opts.port,
        username: opts.user,
        privateKey: opts.privateKey,
        readyTimeout: opts.timeoutMs,
        keepaliveInterval: 15_000,
        keepaliveCountMax: 4,
        tryKeyboard: false,
        algorithms: { serverHostKey: algorithms },
        hostVerifier: (presented: Buffer) => {
          if (sameHostKey(pinnedLine, presented)) return true;
          mismatch = new HostKeyMismatchError(
            `${hostPort} presented host key ${fingerprint(presented)}, but the pinned host_key is ${fingerprint(pinned.blob)}; the machine is not the one the provider reported, so it is refused`,
          );
          return false;
        },
      });
      // Every command is a few small request/reply packets; with Nagle's
      // algorithm on, each waits for the peer's delayed ACK (up to 40-200 ms).
      client.setNoDelay(true);
    } catch {
      settle(new AuthError(`cannot start SSH to ${where} with the controller's private key`));
    }
  });
}

class Capped {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  truncated = false;

  add(chunk: Buffer): void {
    const room = OUTPUT_CAP_BYTES - this.#bytes;
    if (chunk.length > room) this.truncated = true;
    if (room <= 0) return;
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.#chunks.push(kept);
    this.#bytes += kept.length;
  }

  text(): string {
    return Buffer.concat(this.#chunks).toString('utf8');
  }
}

function stop(channel: ClientChannel | undefined): void {
  if (!channel) return;
  try {
    channel.signal('KILL');
  } catch {
    // the server may not take signal requests; closing the channel is enough
  }
  channel.close();
}

function isPrivateKey(text: string): boolean {
  try {
    const key = utils.parseKey(text);
    return !(key instanceof Error) && key.isPrivateKey();
  } catch {
    return false;
  }
}

function aborted(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}
