// SSH with the host key pinned: the only key accepted is the one the
// provider reported for this machine. Nothing is ever trusted on first use.
import ssh2 from 'ssh2';
import { fingerprint, parsePublicKey, sameHostKey } from './keys.js';

const { Client } = ssh2;

export class HostKeyMismatchError extends Error {}
export class UnreachableError extends Error {}
export class AuthError extends Error {}

export interface ConnectOptions {
  host: string;
  port: number;
  user: string;
  hostKey?: string;
  privateKey: string;
  timeoutMs: number;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

const OUTPUT_CAP = 1 << 20;

export class SshSession {
  constructor(private readonly client: InstanceType<typeof Client>) {}

  exec(command: string, opts: { stdin?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
    return new Promise((resolve, reject) => {
      this.client.exec(command, (err, stream) => {
        if (err) return reject(new UnreachableError(`ssh exec failed: ${err.message}`));
        let stdout = '';
        let stderr = '';
        const timer = setTimeout(() => {
          stream.close();
          reject(new UnreachableError(`remote command did not finish within ${opts.timeoutMs ?? 60_000} ms`));
        }, opts.timeoutMs ?? 60_000);
        stream.on('data', (d: Buffer) => {
          if (stdout.length < OUTPUT_CAP) stdout += d.toString();
        });
        stream.stderr.on('data', (d: Buffer) => {
          if (stderr.length < OUTPUT_CAP) stderr += d.toString();
        });
        stream.on('close', (code: number | null) => {
          clearTimeout(timer);
          resolve({ code: code ?? -1, stdout, stderr });
        });
        stream.end(opts.stdin ?? '');
      });
    });
  }

  close(): void {
    this.client.end();
  }
}

export function connectPinned(opts: ConnectOptions): Promise<SshSession> {
  if (!opts.hostKey) {
    return Promise.reject(new HostKeyMismatchError('the target gave no host_key; the controller only connects to machines whose host key it was told in advance'));
  }
  const pinned = parsePublicKey(opts.hostKey);
  if (!pinned.ok) return Promise.reject(new HostKeyMismatchError(`the target's host_key is not usable: ${pinned.error}`));
  return new Promise((resolve, reject) => {
    const client = new Client();
    let presented: Buffer | undefined;
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      client.end();
      reject(err);
    };
    client.on('ready', () => {
      settled = true;
      resolve(new SshSession(client));
    });
    client.on('error', (err: Error & { level?: string }) => {
      if (presented && !sameHostKey(opts.hostKey!, presented)) {
        return fail(new HostKeyMismatchError(`${opts.host}:${opts.port} presented host key ${fingerprint(presented)}, not the pinned ${fingerprint(pinned.blob)}`));
      }
      if (err.level === 'client-authentication') return fail(new AuthError(`${opts.user}@${opts.host}:${opts.port} refused the controller's key`));
      fail(new UnreachableError(`cannot reach ${opts.host}:${opts.port}: ${err.message}`));
    });
    client.connect({
      host: opts.host,
      port: opts.port,
      username: opts.user,
      privateKey: opts.privateKey,
      readyTimeout: opts.timeoutMs,
      // Negotiate only the pinned key's type, so the server cannot offer another.
      algorithms: { serverHostKey: [pinned.type as never] },
      hostVerifier: (key: Buffer) => {
        presented = key;
        return sameHostKey(opts.hostKey!, key);
      },
    });
  });
}
