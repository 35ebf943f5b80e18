// Runs one provider command the way an operator can afford to run a program
// it did not write: no shell, stdin closed, stdout bounded, stderr cleaned
// up line by line, and the whole process group stopped on timeout, on abort
// and after the command exits.
import { spawn, type ChildProcess } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import { realClock, sleep } from '../../kube/clock.js';

export const STDOUT_CAP_BYTES = 16 * 1024;
export const STDERR_LINE_MAX_CHARS = 512;
export const STDERR_LINES_FORWARDED = 200;
export const STDERR_DROPPED_NOTE = '… more lines dropped';
export const KILL_GRACE_MS = 5000;
/**
 * A stderr line that starts with this is meant for the Lease's user (events,
 * status); every other line may hold anything a script or a cloud CLI
 * prints (set -x, debug output, credentials) and goes to the controller's log only.
 */
export const USER_LINE_PREFIX = 'leasehold: ';
/** How many of the last stderr lines a result keeps for error messages. */
const STDERR_TAIL_LINES = 5;
/** Longest partial stderr line held in memory while waiting for its newline. */
const STDERR_PENDING_MAX_CHARS = 4 * STDERR_LINE_MAX_CHARS;
/**
 * After the command exits, how long to keep reading output that a process it
 * left behind still holds open, before letting go of the pipes.
 */
const DRAIN_MS = 1000;
const GROUP_POLL_MS = 20;
/** setTimeout fires at once for anything longer than this. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface RunOptions {
  signal?: AbortSignal;
  timeoutMs: number;
  stdoutCapBytes?: number;
  /** false sends stdout to /dev/null, for commands whose stdout means nothing. */
  collectStdout?: boolean;
  /** Receives each non-blank stderr line, sanitized and cut to 512 characters (the first 200). */
  onStderrLine?(line: string): void;
  /** Receives each line marked for users (USER_LINE_PREFIX, cut off), sanitized (the first 200 such lines). */
  onUserLine?(line: string): void;
  /** Between SIGTERM and SIGKILL when the command has to be stopped. */
  killGraceMs?: number;
}

export interface RunResult {
  /** Exit code, or null when a signal ended the command. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  /** stdout went past the cap: the rest was not read and the command was stopped. */
  stdoutTruncated: boolean;
  timedOut: boolean;
  aborted: boolean;
  /** The last few sanitized stderr lines, including any that were not forwarded. */
  stderrTail: string[];
  /** The last few lines marked for users, prefix cut off: all a user-facing error may quote. */
  userTail: string[];
}

/**
 * Runs argv[0] with argv[1..] as they are (never through a shell), with the
 * controller's environment plus `env`; an undefined value in `env` removes an
 * inherited variable. Resolves once the command has exited; rejects only when
 * it cannot be started.
 */
export async function runProviderCommand(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  opts: RunOptions,
): Promise<RunResult> {
  const [file, ...args] = argv;
  if (file === undefined || file === '') throw new TypeError('a provider command needs a program to run as its first argument');
  if (!(opts.timeoutMs > 0)) throw new RangeError(`timeoutMs must be positive, got ${opts.timeoutMs}`);
  const cap = opts.stdoutCapBytes ?? STDOUT_CAP_BYTES;
  const grace = opts.killGraceMs ?? KILL_GRACE_MS;
  const stderr = new StderrLines(opts.onStderrLine);
  const users = new StderrLines(opts.onUserLine);
  const signal = opts.signal;
  if (signal?.aborted) {
    return { code: null, signal: null, stdout: '', stdoutTruncated: false, timedOut: false, aborted: true, stderrTail: [], userTail: [] };
  }

  // detached: the command leads a new process group, so stopping it also
  // stops everything it started (kill(-pid) below).
  const child = spawn(file, args, {
    env: commandEnv(env),
    stdio: ['ignore', opts.collectStdout === false ? 'ignore' : 'pipe', 'pipe'],
    detached: true,
    shell: false,
  });
  const pid = child.pid;
  const guard = guardGroup(pid);

  let timedOut = false;
  let aborted = false;
  let stopping = false;
  let killSent = false;
  let killTimer: NodeJS.Timeout | undefined;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    signalGroup(pid, 'SIGTERM');
    killTimer = setTimeout(() => {
      killSent = true;
      signalGroup(pid, 'SIGKILL');
    }, grace);
  };

  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  child.stdout?.on('data', (chunk: Buffer) => {
    if (truncated) return;
    const room = cap - size;
    if (chunk.length <= room) {
      chunks.push(chunk);
      size += chunk.length;
      return;
    }
    // Past the cap nothing more is read, so hostile output cannot grow memory.
    chunks.push(Buffer.from(chunk.subarray(0, room)));
    size = cap;
    truncated = true;
    child.stdout?.destroy();
    stop();
  });
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
  stderr.onLine = (line) => {
    if (line.startsWith(USER_LINE_PREFIX)) users.line(line.slice(USER_LINE_PREFIX.length));
  };

  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on('exit', (code, sig) => resolve({ code, signal: sig }));
    child.on('error', reject);
  });
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));

  const timer = setTimeout(() => {
    timedOut = true;
    stop();
  }, Math.min(opts.timeoutMs, MAX_TIMER_MS));
  const onAbort = () => {
    aborted = true;
    stop();
  };
  signal?.addEventListener('abort', onAbort, { once: true });

  try {
    const status = await exited;
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    await settleWithin(closed, DRAIN_MS);
    // A normal exit too: what the command started in its group and left
    // running is stopped (SIGTERM, then SIGKILL), never left to run on unsupervised.
    // A daemon meant to outlive it (sshd) starts a session of its own.
    if (!stopping && groupAlive(pid)) stop();
    // Once we have asked the group to stop, the result means "stopped": wait
    // until nothing in it is left, or until SIGKILL has gone out.
    while (stopping && !killSent && groupAlive(pid)) await sleep(realClock, GROUP_POLL_MS);
    child.stdout?.destroy();
    child.stderr?.destroy();
    stderr.end();
    return {
      code: status.code,
      signal: status.signal,
      stdout: Buffer.concat(chunks).toString('utf8'),
      stdoutTruncated: truncated,
      timedOut,
      aborted,
      stderrTail: stderr.tail,
      userTail: users.tail,
    };
  } finally {
    guard?.kill('SIGKILL');
    clearTimeout(timer);
    clearTimeout(killTimer);
    signal?.removeEventListener('abort', onAbort);
    child.stdout?.destroy();
    child.stderr?.destroy();
  }
}

function commandEnv(extra: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/**
 * Stops the command's process group if the controller dies while it runs
 * (SIGKILL, OOM kill, outside a container whose PID 1 it is). A small sh,
 * outside the group, blocks reading a pipe only this process holds and reads
 * end of input once this process is gone. Without it an acquire outlives its
 * controller and makes its machine after the next controller has released
 * the Lease (finding nothing yet) and moved on: a machine nobody releases.
 * Killed once the command has ended.
 */
function guardGroup(pid: number | undefined): ChildProcess | undefined {
  if (pid === undefined || process.platform === 'win32') return undefined;
  try {
    const guard = spawn('/bin/sh', ['-c', 'read _; kill -KILL "-$1" 2>/dev/null', 'leasehold-guard', String(pid)], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
    });
    guard.on('error', () => undefined);
    guard.stdin?.on('error', () => undefined);
    guard.unref();
    return guard;
  } catch {
    return undefined;
  }
}

function signalGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, sig);
  } catch {
    // ESRCH: the group is already gone.
  }
}

function groupAlive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function settleWithin(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([p, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

// ANSI escape sequences (CSI, OSC, and two-character escapes), then every
// other control or invisible formatting character (bidi overrides included,
// so a line cannot disguise itself where users read it).
const ANSI_ESCAPES = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])/g;
const CONTROL_CHARS = /[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

/** Makes one line of untrusted output safe to show: no control characters, at most 512 characters. */
export function sanitizeLine(raw: string): string {
  const line = raw.replace(ANSI_ESCAPES, '').replace(/\t/g, ' ').replace(CONTROL_CHARS, '').trimEnd();
  if (line.length <= STDERR_LINE_MAX_CHARS) return line;
  const points = Array.from(line);
  if (points.length <= STDERR_LINE_MAX_CHARS) return line;
  return `${points.slice(0, STDERR_LINE_MAX_CHARS - 1).join('')}…`;
}

/** Splits stderr into sanitized lines, forwarding the first 200 and keeping the last few. */
class StderrLines {
  private readonly decoder = new StringDecoder('utf8');
  private readonly sink: ((line: string) => void) | undefined;
  /** Sees every sanitized line, forwarded or not. */
  onLine: ((line: string) => void) | undefined;
  private pending = '';
  private forwarded = 0;
  private dropping = false;
  readonly tail: string[] = [];

  constructor(sink: ((line: string) => void) | undefined) {
    this.sink = sink;
  }

  push(chunk: Buffer): void {
    this.take(this.decoder.write(chunk));
  }

  end(): void {
    this.take(this.decoder.end());
    if (this.pending !== '') this.emit();
  }

  private take(text: string): void {
    let start = 0;
    for (;;) {
      const newline = text.indexOf('\n', start);
      if (newline < 0) {
        this.append(text.slice(start));
        return;
      }
      this.append(text.slice(start, newline));
      this.emit();
      start = newline + 1;
    }
  }

  private append(text: string): void {
    const room = STDERR_PENDING_MAX_CHARS - this.pending.length;
    if (room > 0) this.pending += text.length <= room ? text : text.slice(0, room);
  }

  private emit(): void {
    const line = sanitizeLine(this.pending);
    this.pending = '';
    this.line(line);
    if (line !== '') this.onLine?.(line);
  }

  /** Takes one sanitized line: kept in the tail, forwarded while under the limit. */
  line(line: string): void {
    if (line.trim() === '') return;
    this.tail.push(line);
    if (this.tail.length > STDERR_TAIL_LINES) this.tail.shift();
    if (this.forwarded < STDERR_LINES_FORWARDED) {
      this.forwarded++;
      this.deliver(line);
    } else if (!this.dropping) {
      this.dropping = true;
      this.deliver(STDERR_DROPPED_NOTE);
    }
  }

  private deliver(line: string): void {
    try {
      this.sink?.(line);
    } catch {
      // A failing progress sink must not leave the command unsupervised.
    }
  }
}
