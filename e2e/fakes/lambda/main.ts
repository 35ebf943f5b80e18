// Starts one Lambda Cloud emulator in the foreground:
//
//   node --import tsx e2e/fakes/lambda/main.ts [--port N] [--host H] [--api-key K]
//     [--ssh-port N] [--boot-ms N] [--terminate-ms N] [--launch-interval-ms N]
//     [--requests-per-second N] [--no-sshd] [--dir D]
//
// The API key may also come from LAMBDA_EMULATOR_API_KEY. Once it listens it
// prints one JSON line on stdout:
//   {"url":".../api/v1","apiKey":"...","controlUrl":".../_emulator","sshPort":N,"sshUser":"...","dir":"...","pid":N}
// and runs until SIGINT or SIGTERM (or stdin closing, with --exit-on-stdin-close),
// when it terminates every instance and exits.
import { parseArgs } from 'node:util';
import { startLambdaEmulator, type LambdaEmulatorOptions } from './server.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    'api-key': { type: 'string' },
    'ssh-port': { type: 'string' },
    'boot-ms': { type: 'string' },
    'terminate-ms': { type: 'string' },
    'launch-interval-ms': { type: 'string' },
    'requests-per-second': { type: 'string' },
    'no-sshd': { type: 'boolean' },
    dir: { type: 'string' },
    'exit-on-stdin-close': { type: 'boolean' },
  },
  strict: true,
});

function int(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    process.stderr.write(`--${name} must be a whole number >= 0\n`);
    process.exit(2);
  }
  return n;
}

const opts: LambdaEmulatorOptions = {};
const set = <K extends keyof LambdaEmulatorOptions>(k: K, v: LambdaEmulatorOptions[K] | undefined) => {
  if (v !== undefined) opts[k] = v;
};
set('port', int('port', values.port));
set('host', values.host);
set('apiKey', values['api-key'] ?? (process.env.LAMBDA_EMULATOR_API_KEY || undefined));
set('sshPort', int('ssh-port', values['ssh-port']));
set('bootMs', int('boot-ms', values['boot-ms']));
set('terminateMs', int('terminate-ms', values['terminate-ms']));
set('launchIntervalMs', int('launch-interval-ms', values['launch-interval-ms']));
set('requestsPerSecond', int('requests-per-second', values['requests-per-second']));
set('dir', values.dir);
if (values['no-sshd']) opts.sshd = false;

const emulator = await startLambdaEmulator(opts);
let stopping: Promise<void> | undefined;
const shutdown = (why: string) => {
  stopping ??= (async () => {
    process.stderr.write(`lambda emulator: ${why}; terminating instances\n`);
    try {
      await emulator.stop();
      process.exit(0);
    } catch (e) {
      process.stderr.write(`lambda emulator: stopping failed: ${(e as Error).message}\n`);
      process.exit(1);
    }
  })();
};
process.on('SIGINT', () => shutdown('SIGINT'));
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGHUP', () => shutdown('SIGHUP'));
if (values['exit-on-stdin-close']) {
  process.stdin.on('end', () => shutdown('stdin closed'));
  process.stdin.resume();
}

process.stdout.write(
  `${JSON.stringify({
    url: emulator.url,
    apiKey: emulator.apiKey,
    controlUrl: `${emulator.origin}/_emulator`,
    sshPort: emulator.sshPort,
    sshUser: emulator.sshUser,
    dir: emulator.dir,
    pid: process.pid,
  })}\n`,
);
process.stderr.write(`lambda emulator: listening on ${emulator.url}\n`);
