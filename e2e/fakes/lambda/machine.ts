// One emulated instance's machine: a real OpenSSH sshd in the foreground
// (`sshd -D -e -f <config>`), run as whoever runs the emulator, on its own
// loopback address. Like e2e/providers/sshd-machine.sh, every machine has its
// own directory (config, host keys, authorized_keys, sshd.log, home/) and sshd
// sets LEASEHOLD_HOME, LEASEHOLD_AUTHORIZED_KEYS and HOME for every session, so
// that machines sharing one Unix user stay apart and the controller's agent
// rewrites this machine's authorized_keys, not the user's.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, existsSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const SSHD = '/usr/sbin/sshd';
const SETPRIV = '/usr/bin/setpriv';
const execFileP = promisify(execFile);

export type HostKeyType = 'ed25519' | 'ecdsa' | 'rsa';

export interface HostKeyInput {
  type: HostKeyType;
  privateKey: string;
  /** What the user data claimed the public half is; checked against the private key. */
  publicKey?: string;
}

export interface MachineOptions {
  dir: string;
  address: string;
  port: number;
  authorizedKeys: readonly string[];
  hostKeys: readonly HostKeyInput[];
  /** Comment of a generated host key. */
  comment: string;
  /** A directory whose commands the machine's sessions find before the system's (first on their PATH). */
  sessionPath?: string;
}

/** sshd's own PATH for sessions (Debian's, for root; a superset of a user's). */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Raised when sshd could not bind its address (another listener got there first). */
export class BindError extends Error {}

export class SshdMachine {
  readonly dir: string;
  address: string;
  readonly port: number;
  readonly user = userInfo().username;
  /** The host public key sshd presents, "ssh-ed25519 AAAA..." (the first one when several). */
  hostKey = '';
  /** Every host public key sshd has. */
  hostKeys: string[] = [];
  /** What happened to the user data's keys, for people reading a failing test. */
  readonly notes: string[] = [];
  pid: number | undefined;
  private listening = false;
  private child: ChildProcess | undefined;
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  private constructor(
    dir: string,
    address: string,
    port: number,
    private readonly sessionPath?: string,
  ) {
    this.dir = dir;
    this.address = address;
    this.port = port;
  }

  get config(): string {
    return join(this.dir, 'sshd_config');
  }

  get authorizedKeysFile(): string {
    return join(this.dir, 'authorized_keys');
  }

  get home(): string {
    return join(this.dir, 'home');
  }

  /** Writes the machine directory: host keys (from the input, else a fresh ed25519 one), authorized_keys, config. */
  static async create(opts: MachineOptions): Promise<SshdMachine> {
    const m = new SshdMachine(opts.dir, opts.address, opts.port, opts.sessionPath);
    mkdirSync(m.home, { recursive: true, mode: 0o700 });
    chmodSync(m.dir, 0o700);
    for (const key of opts.hostKeys) {
      const file = join(m.dir, `host_${key.type}_key`);
      if (existsSync(file)) {
        m.notes.push(`ignoring a second ${key.type} host key`);
        continue;
      }
      const text = key.privateKey.endsWith('\n') ? key.privateKey : `${key.privateKey}\n`;
      writeFileSync(file, text, { mode: 0o600 });
      const pub = await publicKeyOf(file);
      if (!pub) {
        rmSync(file, { force: true });
        m.notes.push(`the user data's ${key.type}_private is not a usable private key; ignored`);
        continue;
      }
      if (key.publicKey !== undefined && keyBlob(key.publicKey) !== keyBlob(pub)) {
        m.notes.push(`the user data's ${key.type}_public does not match ${key.type}_private; sshd presents the private key's`);
      }
      m.hostKeys.push(pub);
    }
    if (m.hostKeys.length === 0) {
      const file = join(m.dir, 'host_ed25519_key');
      await execFileP('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', opts.comment, '-f', file]);
      m.hostKeys.push((await publicKeyOf(file))!);
      m.notes.push('no host key in the user data; generated one');
    }
    m.hostKey = m.hostKeys[0]!;
    writeFileSync(m.authorizedKeysFile, opts.authorizedKeys.map((k) => `${k.trim()}\n`).join(''), { mode: 0o600 });
    writeFileSync(join(m.dir, '.lambda-emulator'), `${opts.comment}\n`);
    m.writeConfig();
    return m;
  }

  /** Moves the machine to another address (after a BindError); only before start. */
  rebind(address: string): void {
    this.address = address;
    this.writeConfig();
  }

  private writeConfig(): void {
    const keys = readdirSync(this.dir).filter((f) => /^host_(ed25519|ecdsa|rsa)_key$/.test(f)).sort(byPreference);
    const lines = [
      `ListenAddress ${this.address}`,
      `Port ${this.port}`,
      ...keys.map((k) => `HostKey "${join(this.dir, k)}"`),
      'PidFile none',
      `AuthorizedKeysFile "${this.authorizedKeysFile}"`,
      `AllowUsers ${this.user}`,
      'StrictModes no',
      'UsePAM no',
      'UseDNS no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      'PrintMotd no',
      'PrintLastLog no',
      // HOME too: a fresh machine has its own, and the user's shell start-up files (a ~/.bashrc that
      // bash reads even for `ssh host cmd`) must not slow down or break the machine's sessions.
      `SetEnv "LEASEHOLD_HOME=${this.home}" "LEASEHOLD_AUTHORIZED_KEYS=${this.authorizedKeysFile}" "HOME=${this.home}"${this.sessionPath ? ` "PATH=${this.sessionPath}:${SYSTEM_PATH}"` : ''}`,
      '',
    ];
    writeFileSync(this.config, lines.join('\n'), { mode: 0o600 });
  }

  /** Starts sshd and resolves once it listens. Throws BindError when the address is taken. */
  start(timeoutMs = 15_000): Promise<void> {
    if (this.stopping) return Promise.reject(new Error('machine is stopped'));
    if (userInfo().uid === 0 && !existsSync('/run/sshd')) mkdirSync('/run/sshd', { mode: 0o755, recursive: true });
    const sshdArgs = ['-D', '-e', '-f', this.config];
    // With setpriv, sshd dies with the emulator's process even when that is killed outright.
    const [cmd, args] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', 'KILL', SSHD, ...sshdArgs]] : [SSHD, sshdArgs];
    // sshd writes its log straight to the file, not through a pipe that this
    // process would have to drain: a test blocked in spawnSync must not stall it.
    const logFile = join(this.dir, 'sshd.log');
    const fd = openSync(logFile, 'a');
    const offset = fstatSync(fd).size;
    let child: ChildProcess;
    try {
      child = spawn(cmd, args, { stdio: ['ignore', 'ignore', fd], env: { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' } });
    } finally {
      closeSync(fd);
    }
    this.child = child;
    this.pid = child.pid;
    this.listening = false;
    const listening = `Server listening on ${this.address} port ${this.port}`;
    const seen = () => {
      try {
        return readFileSync(logFile, 'utf8').slice(offset);
      } catch {
        return '';
      }
    };
    this.starting = new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (err?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        clearInterval(poll);
        if (err) reject(err);
        else {
          this.listening = true;
          resolve();
        }
      };
      const timer = setTimeout(() => finish(new Error(`sshd did not listen on ${this.address}:${this.port} within ${timeoutMs} ms: ${tail(seen())}`)), timeoutMs);
      const poll = setInterval(() => {
        if (seen().includes(listening)) finish();
      }, 20);
      child.on('error', (e) => finish(e));
      child.on('exit', (code, signal) => {
        this.pid = undefined;
        const log = seen();
        if (log.includes(listening)) return;
        if (/Bind to port|Cannot bind any address|Address already in use/.test(log)) finish(new BindError(`sshd could not bind ${this.address}:${this.port}`));
        else finish(new Error(`sshd exited (${signal ?? code}) before listening: ${tail(log)}`));
      });
    });
    return this.starting;
  }

  /** Whether the sshd listener runs and accepts connections (a started sshd counts only once it listens). */
  get running(): boolean {
    return this.listening && this.pid !== undefined && isAlive(this.pid);
  }

  /** Stops sshd and every process of its sessions (a power-off, not a shutdown). Safe to call twice. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.starting) await this.starting.catch(() => undefined);
      await killMachineProcesses(this.dir);
    })();
    return this.stopping;
  }

  /** The sshd listener and everything below it that is still alive. */
  processes(): number[] {
    return findMachineProcesses(this.dir);
  }
}

const order: Record<string, number> = { host_ed25519_key: 0, host_ecdsa_key: 1, host_rsa_key: 2 };
function byPreference(a: string, b: string): number {
  return (order[a] ?? 9) - (order[b] ?? 9);
}

async function publicKeyOf(file: string): Promise<string | undefined> {
  try {
    const { stdout } = await execFileP('ssh-keygen', ['-y', '-f', file]);
    const pub = stdout.trim().split(/\s+/).slice(0, 2).join(' ');
    return pub || undefined;
  } catch {
    return undefined;
  }
}

function keyBlob(line: string): string {
  return line.trim().split(/\s+/).slice(0, 2).join(' ');
}

function tail(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ') || 'no output';
}

/** Whether a TCP listener could bind address:port right now. */
export function canBind(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ host: address, port, exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/** A TCP port nothing listens on, on any address, at this moment. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen({ host: '0.0.0.0', port: 0, exclusive: true }, () => {
      const addr = s.address();
      s.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

interface Proc {
  pid: number;
  ppid: number;
  state: string;
}

function readProcs(): Map<number, Proc> {
  const procs = new Map<number, Proc>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      procs.set(Number(name), { pid: Number(name), state: rest[0] ?? '', ppid: Number(rest[1]) });
    } catch {
      // gone meanwhile
    }
  }
  return procs;
}

function readProcFile(pid: number, file: string): string {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8');
  } catch {
    return '';
  }
}

export function isAlive(pid: number): boolean {
  const stat = readProcFile(pid, 'stat');
  if (!stat) return false;
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== '' && state !== 'Z' && state !== 'X';
}

/**
 * The live processes of the machine in `dir`: its sshd listener (by the
 * config path on its command line; a PID alone could have been reused), every process whose environment
 * names this machine's LEASEHOLD_HOME (sessions, and what they left running
 * even after leaving their parent), and all their descendants.
 */
export function findMachineProcesses(dir: string): number[] {
  const procs = readProcs();
  const config = join(dir, 'sshd_config');
  const envEntry = `LEASEHOLD_HOME=${join(dir, 'home')}`;
  const self = new Set<number>();
  for (let p: number | undefined = process.pid; p && p > 1 && !self.has(p); p = procs.get(p)?.ppid) self.add(p);
  const roots = new Set<number>();
  for (const { pid } of procs.values()) {
    if (self.has(pid)) continue;
    // sshd rewrites its command line ("sshd: /usr/sbin/sshd -D -e -f CONFIG [listener] ..."), so search it as text.
    if (mentions(readProcFile(pid, 'cmdline'), config)) roots.add(pid);
    else if (readProcFile(pid, 'environ').split('\0').includes(envEntry)) roots.add(pid);
  }
  const children = new Map<number, number[]>();
  for (const p of procs.values()) {
    const list = children.get(p.ppid) ?? [];
    list.push(p.pid);
    children.set(p.ppid, list);
  }
  const found = new Set<number>();
  const queue = [...roots];
  while (queue.length > 0) {
    const pid = queue.pop()!;
    if (found.has(pid) || self.has(pid)) continue;
    found.add(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return [...found].filter((pid) => {
    const s = procs.get(pid)?.state;
    return s !== undefined && s !== 'Z' && s !== 'X';
  });
}

function mentions(cmdline: string, path: string): boolean {
  for (let at = cmdline.indexOf(path); at >= 0; at = cmdline.indexOf(path, at + 1)) {
    const before = at === 0 ? ' ' : cmdline[at - 1]!;
    const after = cmdline[at + path.length] ?? ' ';
    if (/[\s\0]/.test(before) && /[\s\0]/.test(after)) return true;
  }
  return false;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * Kills every process of the machine in `dir`. They are stopped first, so
 * that none can fork a child the sweep misses, then killed, and waited for.
 */
export async function killMachineProcesses(dir: string): Promise<void> {
  for (let round = 0; round < 10; round++) {
    const victims = new Set<number>();
    for (let pass = 0; pass < 10; pass++) {
      let added = false;
      for (const pid of findMachineProcesses(dir)) {
        if (victims.has(pid)) continue;
        victims.add(pid);
        signal(pid, 'SIGSTOP');
        added = true;
      }
      if (!added) break;
    }
    if (victims.size === 0) return;
    for (const pid of victims) signal(pid, 'SIGKILL');
    const until = Date.now() + 5_000;
    while ([...victims].some(isAlive) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  }
  const left = findMachineProcesses(dir);
  if (left.length > 0) throw new Error(`could not stop processes ${left.join(' ')} of ${dir}`);
}
