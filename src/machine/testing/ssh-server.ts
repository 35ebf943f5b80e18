// An in-process SSH server (ssh2's) for unit tests of what the controller
// does over SSH: it presents a host key, admits one client key by public-key
// authentication (the signature verified, as sshd does), and hands every exec
// request to the test. e2e tests use real OpenSSH instead.
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import ssh2 from 'ssh2';
import type { Connection, ServerChannel } from 'ssh2';
import { generateControllerKey } from '../keys.js';

/** Runs one command a client asked for on `stream`; `conn` is the client's connection. */
export type ExecHandler = (command: string, stream: ServerChannel, conn: Connection) => void;

export interface TestSSHServerOptions {
  /** The host key pair; one is generated when absent. */
  hostKey?: { privateKey: string; publicKey: string };
  /** The one public key (authorized_keys format) the server admits. */
  clientKey: string;
  exec: ExecHandler;
}

export interface TestSSHServer {
  port: number;
  /** The public host key, for a client to pin. */
  hostKey: string;
  /** Connections accepted and authentication attempts seen, for tests that must prove none was made. */
  seen: { connections: number; authentications: number };
  close(): Promise<void>;
}

export async function startTestSSHServer(opts: TestSSHServerOptions): Promise<TestSSHServer> {
  const hostKey = opts.hostKey ?? generateControllerKey('host');
  const admitted = ssh2.utils.parseKey(opts.clientKey) as ssh2.ParsedKey;
  const seen = { connections: 0, authentications: 0 };
  const server = new ssh2.Server({ hostKeys: [hostKey.privateKey] }, (conn) => {
    seen.connections++;
    conn.on('error', () => {});
    conn.on('authentication', (ctx) => {
      seen.authentications++;
      if (ctx.method !== 'publickey') return ctx.reject(['publickey']);
      if (ctx.key.algo !== admitted.type || !ctx.key.data.equals(admitted.getPublicSSH())) return ctx.reject();
      if (ctx.signature && admitted.verify(ctx.blob!, ctx.signature, ctx.hashAlgo) !== true) return ctx.reject();
      ctx.accept();
    });
    conn.on('ready', () =>
      conn.on('session', (accept) => {
        accept().on('exec', (acceptExec, _reject, info) => opts.exec(info.command, acceptExec(), conn));
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    hostKey: hostKey.publicKey,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** An exec handler that runs each command with a local /bin/sh in `env`, as a machine's sshd would. */
export function execInShell(env: Record<string, string>): ExecHandler {
  return (command, stream) => {
    const child = spawn('/bin/sh', ['-c', command], { env });
    stream.pipe(child.stdin);
    child.stdout.pipe(stream, { end: false });
    child.stderr.pipe(stream.stderr, { end: false });
    child.on('close', (code) => {
      stream.exit(code ?? 1);
      stream.end();
    });
  };
}
