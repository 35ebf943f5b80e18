import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProviderError, isProviderError } from '../errors.js';
import type { LaunchRequest, ReleaseRequest } from '../types.js';
import { CONTRACT_ENV, CommandProvider } from './provider.js';
import type { CommandProviderConfig } from './provider.js';

const NODE = process.execPath;
const CONTROLLER_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBcSsYOJcAf4L5+P1tE3cpXVv3qqHlgqFgDg1VTnhUv6 leasehold-controller';
const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBcSsYOJcAf4L5+P1tE3cpXVv3qqHlgqFgDg1VTnhUv6';

let dir = '';
/** fixture <envFile> <stdout> [exitCode] [stderr line...]: records its LEASEHOLD_* environment, then prints. */
let fixture = '';
const leftovers: number[] = [];

beforeAll(() => {
  // LEASEHOLD_* settings of whoever runs the tests (LEASEHOLD_CACHE, say) are
  // passed on like any variable, but are not what these tests compare.
  for (const name of Object.keys(process.env)) if (name.startsWith('LEASEHOLD_')) delete process.env[name];
  dir = mkdtempSync(join(tmpdir(), 'leasehold-provider-'));
  fixture = join(dir, 'fixture.mjs');
  writeFileSync(
    fixture,
    `import { writeFileSync } from 'node:fs';
const [envFile, stdout = '', code = '0', ...stderr] = process.argv.slice(2);
const seen = Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('LEASEHOLD_')));
writeFileSync(envFile, JSON.stringify(seen));
for (const line of stderr) process.stderr.write(line + '\\n');
process.stdout.write(stdout);
process.exitCode = Number(code);
`,
  );
});
afterEach(() => {
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function tempPath(name: string): string {
  return join(dir, `${++files}-${name}`);
}

function bash(body: string): string {
  const path = tempPath('script.sh');
  writeFileSync(path, `#!/bin/bash\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

function readEnv(file: string): Record<string, string> {
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
}

function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

async function waitGone(pid: number, ms = 2000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !gone(pid)) await new Promise((r) => setTimeout(r, 20));
  return gone(pid);
}

function pidFrom(file: string): number {
  const pid = Number(readFileSync(file, 'utf8').trim());
  leftovers.push(pid);
  return pid;
}

function provider(config: Partial<CommandProviderConfig> & Pick<CommandProviderConfig, 'acquire'>): CommandProvider {
  return new CommandProvider({ release: ['true'], acquireTimeoutMs: 20_000, releaseTimeoutMs: 20_000, killGraceMs: 500, ...config });
}

function launchRequest(progress: string[] = [], signal: AbortSignal = new AbortController().signal): LaunchRequest {
  return {
    leaseID: 'b1946ac9-2f0e-4c34-a3f4-5c1d0e2c7a11',
    machineName: 'leasehold-b1946ac9',
    offer: 'box',
    where: 'gpu=h100,gpus>=2',
    controllerPublicKey: CONTROLLER_KEY,
    signal,
    onProgress: (line) => progress.push(line),
  };
}

function releaseRequest(state: string, signal: AbortSignal = new AbortController().signal): ReleaseRequest {
  return { leaseID: 'b1946ac9-2f0e-4c34-a3f4-5c1d0e2c7a11', machineName: 'leasehold-b1946ac9', offer: 'box', state, signal };
}

async function launchError(p: CommandProvider, req: LaunchRequest = launchRequest()): Promise<ProviderError> {
  const err: unknown = await p.launch(req).then(
    (launched) => new Error(`expected launch to fail, it returned ${JSON.stringify(launched)}`),
    (e: unknown) => e,
  );
  if (!(err instanceof ProviderError)) throw err;
  return err;
}

async function releaseError(p: CommandProvider, req: ReleaseRequest): Promise<ProviderError> {
  const err: unknown = await p.release(req).then(
    () => new Error('expected release to fail, it resolved'),
    (e: unknown) => e,
  );
  if (!(err instanceof ProviderError)) throw err;
  return err;
}

/** Runs `fn` with extra variables in the controller's own environment. */
async function withControllerEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const name of Object.keys(vars)) delete process.env[name];
  }
}

describe('CommandProvider.launch', () => {
  it('runs acquire with exactly its contract variables and keeps the whole target line as state', async () => {
    const envFile = tempPath('acquire.env');
    const pwned = tempPath('pwned');
    const line = JSON.stringify({ ssh: { host: '10.0.0.5', port: 2222, user: 'ubuntu', host_key: HOST_KEY }, instance_id: 'i-0abc', zone: 'us-east-1a' });
    const progress: string[] = [];
    const req = { ...launchRequest(progress), where: `gpu=h100,$(touch ${pwned})` };

    const launched = await withControllerEnv({ [CONTRACT_ENV.state]: 'inherited, not for acquire', LEASEHOLD_UNRELATED: 'kept' }, () =>
      provider({ acquire: [NODE, fixture, envFile, `instance i-0abc booting\n${line}\n`, '0', 'leasehold: creating instance i-0abc', '+ curl -H "Authorization: Bearer s3cret"', 'leasehold: waiting for ssh'] }).launch(req),
    );

    expect(launched).toEqual({ target: { ssh: { host: '10.0.0.5', port: 2222, user: 'ubuntu', hostKey: HOST_KEY } }, state: line });
    expect(readEnv(envFile)).toEqual({
      LEASEHOLD_LEASE_ID: req.leaseID,
      LEASEHOLD_OFFER: 'box',
      LEASEHOLD_LEASE_WHERE: `gpu=h100,$(touch ${pwned})`,
      LEASEHOLD_LEASE_SSH_KEY: CONTROLLER_KEY,
      LEASEHOLD_UNRELATED: 'kept',
    });
    expect(existsSync(pwned)).toBe(false);
    expect(progress).toEqual(['creating instance i-0abc', 'waiting for ssh']);
  });

  it('shows users only the stderr lines marked for them; the rest go to the log, also when acquire fails', async () => {
    const progress: string[] = [];
    const logged: string[] = [];
    const acquire = bash(`echo '+ export API_KEY=s3cret' >&2; echo 'leasehold: asking the cloud' >&2; echo 'DEBUG token=s3cret' >&2; exit 3`);
    const err = await launchError(provider({ acquire: [acquire], log: (verb, line) => void logged.push(`${verb}: ${line}`) }), launchRequest(progress));
    expect(progress).toEqual(['asking the cloud']);
    expect(err.message).toBe('acquire for offer box exited with code 3; its last stderr line: asking the cloud');
    expect(err.message).not.toContain('s3cret');
    expect(logged).toEqual(['acquire: + export API_KEY=s3cret', 'acquire: leasehold: asking the cloud', 'acquire: DEBUG token=s3cret']);
  });

  it('accepts a url target', async () => {
    const launched = await provider({ acquire: [NODE, fixture, tempPath('env'), '{"url":"https://10.0.0.5:7070","id":"vm-7"}'] }).launch(launchRequest());
    expect(launched).toEqual({ target: { url: 'https://10.0.0.5:7070/' }, state: '{"url":"https://10.0.0.5:7070","id":"vm-7"}' });
  });

  describe('refuses a bad target as InvalidTarget, with the state release should get', () => {
    const bomb = `{"a":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    it.each([
      ['no output', '', /offer box: acquire printed nothing on stdout; print one JSON object/, ''],
      ['no JSON', 'machine is up\n', /printed no JSON object on its last stdout line \(it printed "machine is up"\); print one like \{"ssh"/, ''],
      ['a JSON array', '[{"ssh":{"host":"h"}}]\n', /is a JSON array, not a JSON object/, ''],
      ['a JSON scalar', '"10.0.0.5"\n', /is the string "10\.0\.0\.5", not a JSON object/, ''],
      ['a deep JSON bomb', bomb, /nests JSON deeper than 32 levels/, ''],
      ['a unix socket url', '{"url":"unix:///run/x.sock","id":"i-1"}', /local sockets are refused/, '{"url":"unix:///run/x.sock","id":"i-1"}'],
      ['a socket path as host', '{"ssh":{"host":"/var/run/sock"}}', /local sockets are refused/, '{"ssh":{"host":"/var/run/sock"}}'],
      ['a bad port', '{"ssh":{"host":"h","port":99999},"id":"i-2"}', /ssh\.port is the number 99999; it must be a whole number from 1 to 65535/, '{"ssh":{"host":"h","port":99999},"id":"i-2"}'],
    ])('%s', async (_, stdout, reason, state) => {
      const err = await launchError(provider({ acquire: [NODE, fixture, tempPath('env'), stdout] }));
      expect(err).toMatchObject({ kind: 'InvalidTarget', retryable: false, state });
      expect(err.message).toMatch(reason);
      expect(isProviderError(err, 'InvalidTarget')).toBe(true);
    });
  });

  it('stops an acquire printing more than 16 KiB, its forked child too, and keeps the JSON it printed before', async () => {
    const pidFile = tempPath('child.pid');
    const acquire = bash(`echo '{"id":"i-3"}'; sleep 300 & echo $! > ${pidFile}; yes`);
    const err = await launchError(provider({ acquire: [acquire] }));
    expect(err).toMatchObject({ kind: 'InvalidTarget', state: '{"id":"i-3"}' });
    expect(err.message).toMatch(/acquire for offer box printed more than 16 KiB on stdout and was stopped; print only the target JSON object on stdout and send logs to stderr/);
    expect(await waitGone(pidFrom(pidFile))).toBe(true);
  });

  it('refuses 10 MB of binary garbage with empty state', async () => {
    const err = await launchError(provider({ acquire: ['head', '-c', '10000000', '/dev/urandom'] }));
    expect(err).toMatchObject({ kind: 'InvalidTarget', state: '' });
  });

  it('turns a non-zero exit into Unknown, quoting the last stderr lines', async () => {
    const err = await launchError(
      provider({ acquire: [NODE, fixture, tempPath('env'), '{"id":"i-4"}\n', '7', 'leasehold: starting', 'leasehold: quota check', 'leasehold: no capacity in us-east-1', 'a debug line', 'leasehold: giving up'] }),
    );
    expect(err).toMatchObject({ kind: 'Unknown', retryable: true, state: '{"id":"i-4"}' });
    expect(err.message).toBe('acquire for offer box exited with code 7; its last stderr lines: quota check | no capacity in us-east-1 | giving up');
  });

  it('says so when acquire failed without a word', async () => {
    const err = await launchError(provider({ acquire: ['false'] }));
    expect(err.message).toBe('acquire for offer box exited with code 1; it printed no stderr line for users (lines starting "leasehold: "; the others are in the controller\'s log)');
  });

  it('stops an acquire that runs past its timeout, with its whole process group', async () => {
    const pidFile = tempPath('child.pid');
    const acquire = bash(`sleep 300 & echo $! > ${pidFile}; echo 'waiting for capacity' >&2; sleep 300`);
    const err = await launchError(provider({ acquire: [acquire], acquireTimeoutMs: 300 }));
    expect(err).toMatchObject({ kind: 'Timeout', retryable: true, state: '' });
    expect(err.message).toMatch(/^acquire for offer box did not exit within 300ms; its process group was stopped \(SIGTERM, then SIGKILL after 500ms\)$/);
    expect(await waitGone(pidFrom(pidFile))).toBe(true);
  });

  it('stops acquire when the caller aborts', async () => {
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 200);
    const err = await launchError(provider({ acquire: ['sleep', '300'] }), launchRequest([], abort.signal));
    expect(err).toMatchObject({ kind: 'Unknown', state: '' });
    expect(err.message).toMatch(/was cancelled/);
  });

  it('reports an acquire program that cannot be started', async () => {
    const missing = join(dir, 'no-such-provider.sh');
    const err = await launchError(provider({ acquire: [missing, 'acquire'] }));
    expect(err).toMatchObject({ kind: 'Unknown', state: '' });
    expect(err.message).toMatch(/^acquire for offer box could not be started \(.*ENOENT.*\); spec\.command\.acquire\[0\] must be a program/);
  });
});

describe('CommandProvider.release', () => {
  const state = '{"ssh":{"host":"10.0.0.5"},"instance_id":"i-0abc","note":"$(touch /tmp/x) \'q\'"}';

  it('runs release with exactly its contract variables and the state verbatim', async () => {
    const envFile = tempPath('release.env');
    await withControllerEnv({ [CONTRACT_ENV.where]: 'inherited', [CONTRACT_ENV.sshKey]: 'inherited' }, () =>
      provider({ acquire: ['true'], release: [NODE, fixture, envFile] }).release(releaseRequest(state)),
    );
    expect(readEnv(envFile)).toEqual({
      LEASEHOLD_LEASE_ID: 'b1946ac9-2f0e-4c34-a3f4-5c1d0e2c7a11',
      LEASEHOLD_OFFER: 'box',
      LEASEHOLD_LEASE_STATE: state,
    });
  });

  it('passes empty state when acquire never printed any', async () => {
    const envFile = tempPath('release.env');
    await provider({ acquire: ['true'], release: [NODE, fixture, envFile] }).release(releaseRequest(''));
    expect(readEnv(envFile)).toMatchObject({ LEASEHOLD_LEASE_STATE: '' });
  });

  it('does not mind a release that prints a lot on stdout', async () => {
    await expect(provider({ acquire: ['true'], release: [bash('yes | head -c 5000000')] }).release(releaseRequest(state))).resolves.toBeUndefined();
  });

  it('throws on a non-zero exit with the code and the last stderr line', async () => {
    const release = bash(`echo 'leasehold: deleting i-0abc' >&2; echo 'leasehold: instance i-0abc is still terminating' >&2; echo 'curl: (22) 409' >&2; exit 4`);
    const err = await releaseError(provider({ acquire: ['true'], release: [release] }), releaseRequest(state));
    expect(err).toMatchObject({ kind: 'Unknown', retryable: true });
    expect(err.message).toBe(
      'release for offer box exited with code 4; its last stderr line: instance i-0abc is still terminating; the machine may still exist, so release runs again later',
    );
  });

  it('throws Timeout when release runs past its timeout', async () => {
    const err = await releaseError(provider({ acquire: ['true'], release: ['sleep', '300'], releaseTimeoutMs: 200 }), releaseRequest(state));
    expect(err).toMatchObject({ kind: 'Timeout' });
    expect(err.message).toMatch(/^release for offer box did not exit within 200ms/);
  });
});

describe('CommandProvider configuration', () => {
  it('refuses a command with no program', () => {
    expect(() => provider({ acquire: [] })).toThrow('spec.command.acquire must name a program');
    expect(() => provider({ acquire: ['x'], release: [''] })).toThrow('spec.command.release must name a program');
  });

  it('names the contract variables', () => {
    expect(Object.values(CONTRACT_ENV).sort()).toEqual(['LEASEHOLD_LEASE_ID', 'LEASEHOLD_LEASE_SSH_KEY', 'LEASEHOLD_LEASE_STATE', 'LEASEHOLD_LEASE_WHERE', 'LEASEHOLD_OFFER']);
  });
});
