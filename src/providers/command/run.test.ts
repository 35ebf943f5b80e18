import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { STDERR_DROPPED_NOTE, STDERR_LINES_FORWARDED, STDOUT_CAP_BYTES, runProviderCommand, sanitizeLine } from './run.js';

const NODE = process.execPath;
let dir = '';
const leftovers: number[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-run-'));
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

let scripts = 0;
/** Writes an executable bash script into the test's temp dir and returns its path. */
function bash(body: string): string {
  const path = join(dir, `script-${++scripts}.sh`);
  writeFileSync(path, `#!/bin/bash\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** A process is gone once /proc no longer lists it, or lists it as a zombie nobody reaped yet. */
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
  while (Date.now() < deadline) {
    if (gone(pid)) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return gone(pid);
}

async function pidFrom(file: string): Promise<number> {
  for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 20));
  const pid = Number(readFileSync(file, 'utf8').trim());
  leftovers.push(pid);
  return pid;
}

const PRINT_ARGS = 'process.stdout.write(JSON.stringify(process.argv.slice(1)))';

describe('runProviderCommand', () => {
  it('hands arguments to the program as they are, never to a shell', async () => {
    const pwned = join(dir, 'pwned-arg');
    const args = [`$(touch ${pwned})`, `\`touch ${pwned}\``, `; touch ${pwned}`, `| touch ${pwned}`, '&& true', "'single'", '"double"', '*', '~', 'a b', '', 'line\nbreak', '\\'];
    const result = await runProviderCommand([NODE, '-e', PRINT_ARGS, ...args], {}, { timeoutMs: 10_000 });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(args);
    expect(existsSync(pwned)).toBe(false);
  });

  it('gives the program the controller environment plus the given variables, literally', async () => {
    const pwned = join(dir, 'pwned-env');
    process.env.LEASEHOLD_TEST_KEPT = 'kept';
    process.env.LEASEHOLD_TEST_REMOVED = 'should not be seen';
    try {
      const program = `const e = process.env; process.stdout.write(JSON.stringify({ kept: e.LEASEHOLD_TEST_KEPT, removed: e.LEASEHOLD_TEST_REMOVED, given: e.LEASEHOLD_TEST_GIVEN, path: e.PATH }))`;
      const result = await runProviderCommand(
        [NODE, '-e', program],
        { LEASEHOLD_TEST_GIVEN: `$(touch ${pwned}) "q" 'q'`, LEASEHOLD_TEST_REMOVED: undefined },
        { timeoutMs: 10_000 },
      );
      expect(JSON.parse(result.stdout)).toEqual({ kept: 'kept', given: `$(touch ${pwned}) "q" 'q'`, path: process.env.PATH });
      expect(existsSync(pwned)).toBe(false);
    } finally {
      delete process.env.LEASEHOLD_TEST_KEPT;
      delete process.env.LEASEHOLD_TEST_REMOVED;
    }
  });

  it('closes stdin, so a program reading it sees end of input at once', async () => {
    const result = await runProviderCommand([bash('cat; echo "stdin ended"')], {}, { timeoutMs: 10_000 });
    expect(result).toMatchObject({ code: 0, stdout: 'stdin ended\n', timedOut: false });
  });

  it('reports the exit code and keeps the last stderr lines', async () => {
    const result = await runProviderCommand([bash('for i in 1 2 3 4 5 6 7; do echo "line $i" >&2; done; exit 3')], {}, { timeoutMs: 10_000 });
    expect(result).toMatchObject({ code: 3, signal: null, stdoutTruncated: false, timedOut: false, aborted: false });
    expect(result.stderrTail).toEqual(['line 3', 'line 4', 'line 5', 'line 6', 'line 7']);
  });

  it('forwards stderr line by line, without control characters, each cut to 512 characters', async () => {
    const lines: string[] = [];
    const program = String.raw`process.stderr.write("plain\n\x1b[31mred\x1b[0m\ntab\there\nbell\x07\x00nul\nbidi\u202eevil\n\n   \n" + "a".repeat(2000) + "\ncrlf\r\nno newline at the end")`;
    const result = await runProviderCommand([NODE, '-e', program], {}, { timeoutMs: 10_000, onStderrLine: (l) => lines.push(l) });
    expect(result.code).toBe(0);
    expect(lines).toEqual(['plain', 'red', 'tab here', 'bellnul', 'bidievil', `${'a'.repeat(511)}…`, 'crlf', 'no newline at the end']);
  });

  it(`forwards at most ${STDERR_LINES_FORWARDED} stderr lines, then says once that more were dropped`, async () => {
    const lines: string[] = [];
    const result = await runProviderCommand([bash('for i in $(seq 1 1000); do echo "progress $i" >&2; done')], {}, { timeoutMs: 10_000, onStderrLine: (l) => lines.push(l) });
    expect(lines).toHaveLength(STDERR_LINES_FORWARDED + 1);
    expect(lines[0]).toBe('progress 1');
    expect(lines[STDERR_LINES_FORWARDED - 1]).toBe(`progress ${STDERR_LINES_FORWARDED}`);
    expect(lines[STDERR_LINES_FORWARDED]).toBe(STDERR_DROPPED_NOTE);
    expect(result.stderrTail.at(-1)).toBe('progress 1000');
  });

  it('keeps memory bounded on one endless stderr line', async () => {
    const lines: string[] = [];
    const result = await runProviderCommand([bash('head -c 20000000 /dev/zero | tr "\\0" x >&2')], {}, { timeoutMs: 20_000, onStderrLine: (l) => lines.push(l) });
    expect(result.code).toBe(0);
    expect(lines).toEqual([`${'x'.repeat(511)}…`]);
  });

  it('a throwing progress sink does not break the run', async () => {
    const result = await runProviderCommand([bash('echo one >&2; echo two >&2; echo done')], {}, {
      timeoutMs: 10_000,
      onStderrLine: () => {
        throw new Error('sink failed');
      },
    });
    expect(result).toMatchObject({ code: 0, stdout: 'done\n' });
  });

  describe(`cuts stdout at ${STDOUT_CAP_BYTES} bytes and stops the command`, () => {
    it('10 MB written at once', async () => {
      const started = Date.now();
      const result = await runProviderCommand([NODE, '-e', 'process.stdout.write(Buffer.alloc(10 * 1024 * 1024, 120)); setInterval(() => {}, 1000)'], {}, { timeoutMs: 60_000 });
      expect(result.stdoutTruncated).toBe(true);
      expect(result.stdout).toBe('x'.repeat(STDOUT_CAP_BYTES));
      expect(Date.now() - started).toBeLessThan(10_000);
    });

    it('an endless stream (yes)', async () => {
      const started = Date.now();
      const result = await runProviderCommand(['yes'], {}, { timeoutMs: 60_000 });
      expect(result.stdoutTruncated).toBe(true);
      expect(result.stdout).toBe('y\n'.repeat(STDOUT_CAP_BYTES / 2));
      expect(result.timedOut).toBe(false);
      expect(Date.now() - started).toBeLessThan(10_000);
    });

    it('binary garbage', async () => {
      const result = await runProviderCommand(['head', '-c', '10000000', '/dev/urandom'], {}, { timeoutMs: 60_000 });
      expect(result.stdoutTruncated).toBe(true);
      expect(result.stdout.length).toBeLessThanOrEqual(STDOUT_CAP_BYTES);
    });

    it('exactly the cap is not truncated', async () => {
      const result = await runProviderCommand([NODE, '-e', `process.stdout.write("z".repeat(${STDOUT_CAP_BYTES}))`], {}, { timeoutMs: 10_000 });
      expect(result).toMatchObject({ code: 0, stdoutTruncated: false });
      expect(result.stdout).toHaveLength(STDOUT_CAP_BYTES);
    });

    it('and kills the whole process group, a child it forked included', async () => {
      const pidFile = join(dir, 'forked-yes.pid');
      const result = await runProviderCommand([bash(`sleep 300 & echo $! > ${pidFile}; yes`)], {}, { timeoutMs: 60_000 });
      expect(result.stdoutTruncated).toBe(true);
      expect(await waitGone(await pidFrom(pidFile))).toBe(true);
    });
  });

  it('on timeout stops the whole process group with SIGTERM', async () => {
    const pidFile = join(dir, 'timeout.pid');
    const started = Date.now();
    const result = await runProviderCommand([bash(`sleep 300 & echo $! > ${pidFile}; sleep 300`)], {}, { timeoutMs: 300 });
    expect(result).toMatchObject({ timedOut: true, aborted: false, code: null, signal: 'SIGTERM' });
    expect(Date.now() - started).toBeLessThan(4000);
    expect(await waitGone(await pidFrom(pidFile))).toBe(true);
  });

  it('sends SIGKILL after the grace period to a group that ignores SIGTERM', async () => {
    const pidFile = join(dir, 'stubborn.pid');
    const started = Date.now();
    const result = await runProviderCommand([bash(`trap '' TERM; sleep 300 & echo $! > ${pidFile}; sleep 300`)], {}, { timeoutMs: 200, killGraceMs: 400 });
    const took = Date.now() - started;
    expect(result).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
    expect(took).toBeGreaterThanOrEqual(550);
    expect(took).toBeLessThan(4000);
    expect(await waitGone(await pidFrom(pidFile))).toBe(true);
  });

  it('stops the process group when the signal aborts', async () => {
    const pidFile = join(dir, 'abort.pid');
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 200);
    const result = await runProviderCommand([bash(`sleep 300 & echo $! > ${pidFile}; sleep 300`)], {}, { timeoutMs: 60_000, signal: abort.signal });
    expect(result).toMatchObject({ aborted: true, timedOut: false, signal: 'SIGTERM' });
    expect(await waitGone(await pidFrom(pidFile))).toBe(true);
  });

  it('does not start the command when the signal has already aborted', async () => {
    const marker = join(dir, 'started');
    const abort = new AbortController();
    abort.abort();
    const result = await runProviderCommand([bash(`touch ${marker}`)], {}, { timeoutMs: 10_000, signal: abort.signal });
    expect(result.aborted).toBe(true);
    expect(existsSync(marker)).toBe(false);
  });

  it('returns once the command exits, even when something it left behind holds stdout open', async () => {
    const pidFile = join(dir, 'lingering.pid');
    const started = Date.now();
    const result = await runProviderCommand([bash(`sleep 300 & echo $! > ${pidFile}; echo done`)], {}, { timeoutMs: 60_000 });
    expect(result).toMatchObject({ code: 0, stdout: 'done\n' });
    expect(Date.now() - started).toBeLessThan(4000);
    await pidFrom(pidFile);
  });

  it('stops what the command left running in its process group after a normal exit', async () => {
    const pidFile = join(dir, 'left.pid');
    const stubborn = join(dir, 'stubborn.pid');
    const result = await runProviderCommand([bash(`sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ${pidFile}; (trap '' TERM; exec sleep 300) </dev/null >/dev/null 2>&1 & echo $! > ${stubborn}; exit 0`)], {}, { timeoutMs: 60_000, killGraceMs: 300 });
    expect(result).toMatchObject({ code: 0, timedOut: false, aborted: false });
    expect(await waitGone(await pidFrom(pidFile))).toBe(true);
    expect(await waitGone(await pidFrom(stubborn))).toBe(true);
  });

  it('rejects when the program cannot be started', async () => {
    await expect(runProviderCommand([join(dir, 'no-such-program')], {}, { timeoutMs: 10_000 })).rejects.toThrow(/ENOENT/);
    await expect(runProviderCommand([], {}, { timeoutMs: 10_000 })).rejects.toThrow(/program/);
  });

  it('can send stdout to /dev/null instead of collecting it', async () => {
    const result = await runProviderCommand([bash('head -c 1000000 /dev/zero; echo fine >&2')], {}, { timeoutMs: 10_000, collectStdout: false });
    expect(result).toMatchObject({ code: 0, stdout: '', stdoutTruncated: false, stderrTail: ['fine'] });
  });
});

describe('sanitizeLine', () => {
  it.each([
    ['plain text', 'plain text'],
    ['\x1b[1;32mgreen\x1b[0m', 'green'],
    ['\x1b]0;title\x07after', 'after'],
    ['carriage\rreturn', 'carriagereturn'],
    ['trailing   ', 'trailing'],
    ['\u2066isolate\u2069', 'isolate'],
    ['caf\u00e9 ✓', 'caf\u00e9 ✓'],
  ])('%j → %j', (raw, clean) => {
    expect(sanitizeLine(raw)).toBe(clean);
  });

  it('cuts by code points, never inside a surrogate pair', () => {
    const line = sanitizeLine('😀'.repeat(600));
    expect(Array.from(line)).toHaveLength(512);
    expect(line.endsWith('😀…')).toBe(true);
  });
});
