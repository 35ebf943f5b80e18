// connectPinned and SshSession against an in-process SSH server (ssh2's);
// e2e/machine.test.ts does the same against real OpenSSH.
import { describe, it, expect, beforeAll, afterAll, jest } from '@jest/globals';
import { createServer, Socket, type AddressInfo, type Server as NetServer } from 'node:net';
import type { Connection, ServerChannel } from 'ssh2';
import { fingerprint, generateControllerKey } from './keys.js';
import { AuthError, connectPinned, HostKeyMismatchError, MissingHostKeyError, OUTPUT_CAP_BYTES, UnreachableError, type ConnectOptions } from './ssh.js';
import { startTestSSHServer, type TestSSHServer } from './testing/ssh-server.js';

const hostKey = generateControllerKey('host');
const otherHostKey = generateControllerKey('impostor');
const controller = generateControllerKey();

// What the test server does with each command it is asked to run.
function run(command: string, stream: ServerChannel, conn: Connection): void {
  const [verb, arg = ''] = command.split(' ');
  switch (verb) {
    case 'echo':
      stream.write(`${arg}\n`);
      stream.stderr.write('to stderr\n');
      stream.exit(Number(arg) || 0);
      return void stream.end();
    case 'cat': {
      const chunks: Buffer[] = [];
      stream.on('data', (d: Buffer) => chunks.push(d));
      stream.on('end', () => {
        stream.write(Buffer.concat(chunks));
        stream.exit(0);
        stream.end();
      });
      return;
    }
    case 'flood':
      stream.write(Buffer.alloc(OUTPUT_CAP_BYTES + 1000, 'x'));
      stream.exit(0);
      return void stream.end();
    case 'killed':
      stream.exit('KILL');
      return void stream.end();
    case 'hang':
      return;
    case 'drop':
      return void conn.end();
  }
}

let server: TestSSHServer;

beforeAll(async () => {
  server = await startTestSSHServer({ hostKey, clientKey: controller.publicKey, exec: run });
});

afterAll(() => server.close());

const opts = (over: Partial<ConnectOptions> = {}): ConnectOptions => ({
  host: '127.0.0.1',
  port: server.port,
  user: 'tester',
  hostKey: hostKey.publicKey,
  privateKey: controller.privateKey,
  timeoutMs: 5000,
  ...over,
});

async function silentServer(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  const sockets: Socket[] = [];
  const s: NetServer = createServer((sock) => sockets.push(sock));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    port: (s.address() as AddressInfo).port,
    connections: () => sockets.length,
    close: () => {
      for (const sock of sockets) sock.destroy();
      return new Promise<void>((r) => s.close(() => r()));
    },
  };
}

const rejection = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
};

describe('connectPinned', () => {
  it('connects when the machine presents the pinned key, and runs commands', async () => {
    const session = await connectPinned(opts());
    try {
      expect(await session.exec('echo 3', { timeoutMs: 5000 })).toEqual({ code: 3, stdout: '3\n', stderr: 'to stderr\n', truncated: false });
      expect((await session.exec('cat', { stdin: 'fed through stdin', timeoutMs: 5000 })).stdout).toBe('fed through stdin');
    } finally {
      session.close();
    }
  });

  it('turns Nagle off on its socket, so a small command packet is not held for a delayed ACK', async () => {
    const noDelay = jest.spyOn(Socket.prototype, 'setNoDelay');
    try {
      const session = await connectPinned(opts());
      session.close();
      expect(noDelay).toHaveBeenCalledWith(true);
    } finally {
      noDelay.mockRestore();
    }
  });

  it('refuses a machine that presents another key, naming both by fingerprint, before authenticating', async () => {
    const before = server.seen.authentications;
    const err = await rejection(connectPinned(opts({ hostKey: otherHostKey.publicKey })));
    expect(err).toBeInstanceOf(HostKeyMismatchError);
    expect(err.message).toContain(`presented host key ${fingerprint(hostKey.publicKey)}`);
    expect(err.message).toContain(`pinned host_key is ${fingerprint(otherHostKey.publicKey)}`);
    expect(server.seen.authentications).toBe(before);
  });

  it('does not connect at all without a pinned key', async () => {
    const before = server.seen.connections;
    for (const missing of [undefined, '', '  ']) {
      const err = await rejection(connectPinned(opts({ hostKey: missing })));
      expect(err).toBeInstanceOf(MissingHostKeyError);
      expect(err).toBeInstanceOf(HostKeyMismatchError);
      expect(err.message).toMatch(/the target must give host_key/);
    }
    const bad = await rejection(connectPinned(opts({ hostKey: 'ssh-ed25519 AAAA' })));
    expect(bad).toBeInstanceOf(HostKeyMismatchError);
    expect(bad.message).toMatch(/host_key for 127\.0\.0\.1:\d+ cannot be used/);
    expect(server.seen.connections).toBe(before);
  });

  it('reports a machine that does not admit the controller key as AuthError', async () => {
    const err = await rejection(connectPinned(opts({ privateKey: generateControllerKey().privateKey })));
    expect(err).toBeInstanceOf(AuthError);
    expect(err.message).toMatch(/did not accept the controller's key/);
  });

  it('reports a closed port as UnreachableError', async () => {
    const closed = await silentServer();
    await closed.close();
    const err = await rejection(connectPinned(opts({ port: closed.port })));
    expect(err).toBeInstanceOf(UnreachableError);
    expect(err.message).toMatch(/ECONNREFUSED/);
  });

  it('gives up on a machine that never speaks SSH after timeoutMs', async () => {
    const silent = await silentServer();
    try {
      const started = Date.now();
      const err = await rejection(connectPinned(opts({ port: silent.port, timeoutMs: 300 })));
      expect(err).toBeInstanceOf(UnreachableError);
      expect(err.message).toMatch(/no SSH session within 300 ms/);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await silent.close();
    }
  });

  it('stops when the signal aborts', async () => {
    const silent = await silentServer();
    try {
      const ac = new AbortController();
      const pending = connectPinned(opts({ port: silent.port, timeoutMs: 60_000, signal: ac.signal }));
      setTimeout(() => ac.abort(new Error('shutting down')), 100);
      expect((await rejection(pending)).message).toBe('shutting down');
      await expect(connectPinned(opts({ signal: AbortSignal.abort(new Error('already')) }))).rejects.toThrow('already');
    } finally {
      await silent.close();
    }
  });

  it('never puts the private key in an error', async () => {
    const broken = controller.privateKey.replace(/[A-Za-z]{20}/, 'x');
    const errs = await Promise.all([
      rejection(connectPinned(opts({ privateKey: broken }))),
      rejection(connectPinned(opts({ privateKey: 'not a key' }))),
      rejection(connectPinned(opts({ privateKey: generateControllerKey().privateKey }))),
    ]);
    const body = controller.privateKey.split('\n')[1]!;
    for (const err of errs) {
      expect(err.message).not.toContain(body.slice(0, 16));
      expect(err.message).not.toContain('PRIVATE KEY');
    }
    expect(errs[0]).toBeInstanceOf(AuthError);
  });
});

describe('SshSession.exec', () => {
  it(`caps each output stream at ${OUTPUT_CAP_BYTES} bytes`, async () => {
    const session = await connectPinned(opts());
    try {
      const r = await session.exec('flood', { timeoutMs: 10_000 });
      expect(r.stdout.length).toBe(OUTPUT_CAP_BYTES);
      expect(r.truncated).toBe(true);
    } finally {
      session.close();
    }
  });

  it('reports death by signal as 128 + N, like a shell', async () => {
    const session = await connectPinned(opts());
    try {
      expect((await session.exec('killed', { timeoutMs: 5000 })).code).toBe(137);
    } finally {
      session.close();
    }
  });

  it('gives up on a command after timeoutMs, and the session stays usable', async () => {
    const session = await connectPinned(opts());
    try {
      const err = await rejection(session.exec('hang', { timeoutMs: 200 }));
      expect(err).toBeInstanceOf(UnreachableError);
      expect(err.message).toMatch(/did not finish within 200 ms/);
      expect((await session.exec('echo 0', { timeoutMs: 5000 })).code).toBe(0);
    } finally {
      session.close();
    }
  });

  it('fails running commands when the connection is lost, and refuses new ones once closed', async () => {
    const session = await connectPinned(opts());
    const hung = session.exec('hang', { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 100));
    await session.exec('drop', { timeoutMs: 5000 }).catch(() => undefined);
    const err = await rejection(hung);
    expect(err).toBeInstanceOf(UnreachableError);
    expect(err.message).toMatch(/lost/);
    await expect(session.exec('echo 0', { timeoutMs: 1000 })).rejects.toThrow(/closed/);
    session.close();
  });
});
