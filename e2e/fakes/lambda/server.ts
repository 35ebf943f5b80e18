// An HTTP emulator of the Lambda Cloud public API v1 (base path /api/v1), for
// end-to-end tests of the controller's Lambda provider. Instances are real
// OpenSSH sshds on loopback addresses (see machine.ts). Tests steer it
// through the returned handle, or over HTTP under /_emulator/ (see README.md).
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_CATALOG, DEFAULT_REGIONS, type Capacity, type CatalogEntry, type InstanceType, type Region } from './catalog.js';
import { BindError, SSHD, SshdMachine, canBind, findMachineProcesses, freePort, killMachineProcesses, type HostKeyInput, type HostKeyType } from './machine.js';

export type { Capacity, CatalogEntry, InstanceType, InstanceTypeSpecs, Region } from './catalog.js';
export { DEFAULT_CATALOG, DEFAULT_REGIONS } from './catalog.js';

const execFileP = promisify(execFile);

/** The code the emulator puts in a 429's body. Lambda documents the 429 but not its body: key on the status. */
export const RATE_LIMIT_CODE = 'global/rate-limited';

export type InstanceStatus = 'booting' | 'active' | 'unhealthy' | 'terminating' | 'terminated';

export type FaultOp = 'launch' | 'terminate' | 'restart' | 'list-types' | 'list-instances' | 'get-instance' | 'ssh-keys' | 'file-systems' | 'any';
export type FaultMode = 'drop' | 'status' | 'delay' | 'hang';

export interface FaultSpec {
  op: FaultOp;
  /**
   * drop: do the work, then destroy the socket without an answer;
   * status: answer `status` in Lambda's error shape without doing the work;
   * delay: wait `ms`, then handle the request normally;
   * hang: never answer (the socket stays open until the client gives up or stop()).
   */
  mode: FaultMode;
  /** For mode status: the HTTP status (default 500). */
  status?: number;
  /** For mode status: error.code (default from the status: 400 global/invalid-parameters, 401 global/invalid-api-key, 404 global/object-does-not-exist, 429 RATE_LIMIT_CODE, else global/unknown). */
  code?: string;
  message?: string;
  /** For mode delay: milliseconds (default 1000). */
  ms?: number;
  /** How many matching requests it hits; then it is gone. Unlimited when absent. */
  times?: number;
  /** Chance 0..1 that a matching request is hit (default 1); a miss does not use up `times`. */
  rate?: number;
  /** Only requests made with this API key (default: any key, or none). */
  apiKey?: string;
}

export interface Fault extends FaultSpec {
  id: string;
  /** Requests it has hit so far. */
  hits: number;
}

export type LaunchOutcome =
  | 'launched'
  | 'rate-limited'
  | 'insufficient-capacity'
  | 'invalid-parameters'
  | 'not-found'
  | 'file-system-in-wrong-region'
  | 'quota-exceeded'
  | 'unauthorized'
  | 'fault';

export interface LaunchRecord {
  /** ms since the epoch, when the request arrived. */
  time: number;
  /** Account ID (never the key). Undefined when the key was wrong. */
  account: string | undefined;
  type: string | undefined;
  region: string | undefined;
  name: string | undefined;
  outcome: LaunchOutcome;
  /** HTTP status answered (0 for a dropped or hung answer). */
  status: number;
  code?: string;
  instanceIds: string[];
  /** Set when a fault hit this request. */
  fault?: FaultMode;
}

export interface RequestRecord {
  time: number;
  method: string;
  /** Path without the query string. */
  path: string;
  op: FaultOp | 'unknown';
  /** 0 when no answer was sent (drop, hang) or none yet. */
  status: number;
  account: string | undefined;
  fault?: FaultMode;
}

export interface Account {
  id: string;
  name: string;
  apiKey: string;
}

export interface SshKey {
  id: string;
  name: string;
  public_key: string;
}

export interface FileSystem {
  id: string;
  name: string;
  region: Region;
  mount_point: string;
  created: string;
}

/** An instance as the API shows it. */
export interface ApiInstance {
  id: string;
  name: string | null;
  ip: string | null;
  private_ip: string | null;
  status: InstanceStatus;
  ssh_key_names: string[];
  file_system_names: string[];
  region: Region;
  instance_type: InstanceType;
  hostname: string | null;
  jupyter_token: string | null;
  jupyter_url: string | null;
  is_reserved: boolean;
}

/** An instance as the emulator knows it: the API view plus where its machine is. */
export interface EmulatedInstance extends ApiInstance {
  account: string;
  /** The loopback address sshd listens on (the API's ip, which shows once active). */
  address: string;
  sshPort: number;
  sshUser: string;
  /** The machine directory (sshd_config, authorized_keys, sshd.log, home/); removed once terminated. */
  dir: string;
  /** The host public key sshd presents ("ssh-ed25519 AAAA..."); empty before the machine is made. */
  hostKey: string;
  /** PID of the sshd listener while it runs. */
  sshdPid: number | undefined;
  userData: string | undefined;
  launchedAt: number;
  activeAt: number | undefined;
  terminatedAt: number | undefined;
  /** What the emulator did with the user data, and anything that went wrong booting. */
  notes: string[];
}

export interface LambdaEmulatorOptions {
  /** Address the HTTP server listens on (default 127.0.0.1). */
  host?: string;
  /** Port (default: any free one). */
  port?: number;
  /** The first account's API key (default: a fresh random one). */
  apiKey?: string;
  /** More accounts, by API key. */
  extraApiKeys?: string[];
  /** booting -> active after this long (default 1000). */
  bootMs?: number;
  /** terminating -> terminated after this long (default 500). */
  terminateMs?: number;
  /** At most one launch request per API key per this many ms, else 429 (default 12000; 0 turns it off). */
  launchIntervalMs?: number;
  /** Whether launch requests that fail (capacity, bad parameters) count towards launchIntervalMs (default true, as a request limit does). */
  launchLimitCountsFailures?: boolean;
  /** A general limit: at most this many API requests per key per second, else 429 (default: off). */
  requestsPerSecond?: number;
  /** Most non-terminated instances per account, else 400 global/quota-exceeded (default: no limit). */
  instanceQuota?: number;
  /** Port every instance's sshd listens on (default: one free port picked at start). */
  sshPort?: number;
  /** First two octets of instance addresses (default "127.77": instances get 127.77.0.1, 127.77.0.2, ...). */
  addressPrefix?: string;
  /** Run a real sshd per instance (default true). Without, instances still get an address but nothing listens. */
  sshd?: boolean;
  /** Start sshd this long after the instance turns active, as on a real machine where sshd lags "active" (default 0: sshd listens before active). */
  sshLagMs?: number;
  /** Directory for machine directories (default: a fresh one under the OS temp dir); removed by stop(). */
  dir?: string;
  regions?: readonly Region[];
  catalog?: readonly CatalogEntry[];
  /** File systems of the first account. */
  fileSystems?: readonly { name: string; region: string }[];
}

export interface LambdaEmulator {
  /** The API base URL, "http://127.0.0.1:PORT/api/v1". */
  readonly url: string;
  /** "http://127.0.0.1:PORT"; the control API is under `${origin}/_emulator/`. */
  readonly origin: string;
  /** The first account's API key. */
  readonly apiKey: string;
  readonly sshPort: number;
  /** The Unix user that instances log in (whoever runs the emulator). */
  readonly sshUser: string;
  readonly dir: string;
  bootMs: number;
  terminateMs: number;
  launchIntervalMs: number;
  requestsPerSecond: number;
  instanceQuota: number;
  readonly accounts: readonly Account[];
  /** Adds an account and returns its fresh API key. */
  addAccount(name?: string): string;
  readonly regions: readonly Region[];
  /** Each instance type with its capacity. */
  catalog(): CatalogEntry[];
  /** Replaces the instance types (and their capacity, from each entry's regions). */
  setCatalog(types: readonly CatalogEntry[]): void;
  setCapacity(typeName: string, regions: Capacity): void;
  setPrice(typeName: string, cents: number): void;
  /** Adds a file system to an account (default: the first); returns its ID. */
  addFileSystem(name: string, region: string, apiKey?: string): string;
  fault(spec: FaultSpec): string;
  clearFaults(): void;
  readonly faults: readonly Fault[];
  readonly launches: readonly LaunchRecord[];
  readonly requests: readonly RequestRecord[];
  /** Instances of one account (by API key or account ID), or of all. */
  instances(apiKeyOrAccount?: string): EmulatedInstance[];
  instance(id: string): EmulatedInstance | undefined;
  /** Resolves once the instance has the status; throws after timeoutMs (default 30000). */
  waitForStatus(id: string, status: InstanceStatus, timeoutMs?: number): Promise<EmulatedInstance>;
  /** PIDs of every live process of every machine (listeners and sessions). */
  sshdProcesses(): number[];
  /** Terminates everything, closes the server, removes the directories. */
  stop(): Promise<void>;
}

interface AccountState extends Account {
  sshKeys: SshKey[];
  fileSystems: FileSystem[];
}

interface InstanceState {
  id: string;
  account: AccountState;
  name: string | null;
  status: InstanceStatus;
  sshKeyNames: string[];
  fileSystemNames: string[];
  region: Region;
  type: InstanceType;
  address: string;
  privateIp: string;
  jupyterToken: string;
  dir: string;
  userData: string | undefined;
  machine: SshdMachine | undefined;
  boot: Promise<void> | undefined;
  /** Making the machine and starting its sshd, once begun. */
  sshdStart: Promise<void> | undefined;
  launchedAt: number;
  activeAt: number | undefined;
  terminatedAt: number | undefined;
  notes: string[];
  /** Whether it holds one unit of a counted capacity. */
  holdsCapacity: boolean;
}

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly suggestion?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

const hex = (bytes = 16) => randomBytes(bytes).toString('hex');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const MAX_LOG = 20_000;
const MAX_BODY = 2 * 1024 * 1024;
const MAX_USER_DATA = 1024 * 1024;

function defaultCode(status: number): string {
  switch (status) {
    case 400:
      return 'global/invalid-parameters';
    case 401:
      return 'global/invalid-api-key';
    case 403:
      return 'global/account-inactive';
    case 404:
      return 'global/object-does-not-exist';
    case 429:
      return RATE_LIMIT_CODE;
    default:
      return 'global/unknown';
  }
}

function errorBody(code: string, message: string, suggestion?: string) {
  return { error: suggestion === undefined ? { code, message } : { code, message, suggestion } };
}

function sameKey(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function validName(v: unknown): v is string {
  return typeof v === 'string' && v.length >= 1 && v.length <= 64;
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/** The host keys cloud-init would install from `#cloud-config` user data (ssh_keys: {<type>_private, <type>_public}). */
export function hostKeysFromUserData(userData: string | undefined): { keys: HostKeyInput[]; notes: string[]; authorizedKeys: string[] } {
  const out = { keys: [] as HostKeyInput[], notes: [] as string[], authorizedKeys: [] as string[] };
  if (userData === undefined || userData === '') return out;
  if (userData.split('\n', 1)[0]!.trim() !== '#cloud-config') {
    out.notes.push('user_data is not #cloud-config; nothing taken from it');
    return out;
  }
  let doc: unknown;
  try {
    doc = parseYaml(userData);
  } catch (e) {
    out.notes.push(`user_data is not valid YAML (${(e as Error).message.split('\n')[0]}); nothing taken from it`);
    return out;
  }
  if (!doc || typeof doc !== 'object') return out;
  const d = doc as Record<string, unknown>;
  const keys = d.ssh_keys;
  if (keys && typeof keys === 'object') {
    const k = keys as Record<string, unknown>;
    for (const type of ['ed25519', 'ecdsa', 'rsa'] as HostKeyType[]) {
      const priv = k[`${type}_private`];
      const pub = k[`${type}_public`];
      if (typeof priv === 'string') out.keys.push(typeof pub === 'string' ? { type, privateKey: priv, publicKey: pub } : { type, privateKey: priv });
      else if (typeof pub === 'string') out.notes.push(`user_data has ${type}_public without ${type}_private; ignored`);
    }
  }
  if (isStringArray(d.ssh_authorized_keys)) out.authorizedKeys.push(...d.ssh_authorized_keys);
  return out;
}

function looksLikePublicKey(key: string): boolean {
  const parts = key.trim().split(/\s+/);
  return parts.length >= 2 && /^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)$/.test(parts[0]!) && /^[A-Za-z0-9+/]+={0,2}$/.test(parts[1]!) && !key.includes('\n');
}

function copyType(t: InstanceType): InstanceType {
  return { name: t.name, description: t.description, gpu_description: t.gpu_description, price_cents_per_hour: t.price_cents_per_hour, specs: { ...t.specs } };
}

export async function startLambdaEmulator(opts: LambdaEmulatorOptions = {}): Promise<LambdaEmulator> {
  const useSshd = opts.sshd ?? true;
  if (useSshd && !existsSync(SSHD)) throw new Error(`${SSHD} is missing: install openssh-server (make deps), or start the emulator with sshd: false`);
  const root = resolve(opts.dir ?? mkdtempSync(join(tmpdir(), 'leasehold-lambda-')));
  if (/[\s"\\]/.test(root)) throw new Error(`emulator directory "${root}" must not hold spaces, quotes or backslashes`);
  const ownsRoot = opts.dir === undefined;
  const sshPort = opts.sshPort ?? (await freePort());
  const sshUser = userInfo().username;
  const prefix = opts.addressPrefix ?? '127.77';
  if (!/^127\.\d{1,3}$/.test(prefix)) throw new Error(`addressPrefix "${prefix}" must be "127.N"`);

  const settings = {
    bootMs: opts.bootMs ?? 1000,
    terminateMs: opts.terminateMs ?? 500,
    launchIntervalMs: opts.launchIntervalMs ?? 12_000,
    requestsPerSecond: opts.requestsPerSecond ?? 0,
    instanceQuota: opts.instanceQuota ?? Infinity,
  };
  const countFailures = opts.launchLimitCountsFailures ?? true;
  const sshLagMs = opts.sshLagMs ?? 0;

  const regions: Region[] = (opts.regions ?? DEFAULT_REGIONS).map((r) => ({ ...r }));
  const regionByName = (name: string) => regions.find((r) => r.name === name);
  let types = new Map<string, InstanceType>();
  // type -> region -> remaining (Infinity when uncounted)
  let capacity = new Map<string, Map<string, number>>();

  const capacityMap = (typeName: string, c: Capacity | undefined): Map<string, number> => {
    const m = new Map<string, number>();
    if (c === undefined) return m;
    const entries: [string, number][] = Array.isArray(c) ? (c as readonly string[]).map((r) => [r, Infinity]) : Object.entries(c as Record<string, number>);
    for (const [region, n] of entries) {
      if (!regionByName(region)) throw new Error(`setCapacity(${typeName}): unknown region "${region}"; regions are ${regions.map((r) => r.name).join(', ')}`);
      if (!(n >= 0)) throw new Error(`setCapacity(${typeName}): capacity of ${region} must be >= 0`);
      m.set(region, n);
    }
    return m;
  };

  const setCatalog = (entries: readonly CatalogEntry[]) => {
    const t = new Map<string, InstanceType>();
    const c = new Map<string, Map<string, number>>();
    for (const e of entries) {
      if (!e.name) throw new Error('setCatalog: an instance type has no name');
      t.set(e.name, copyType(e));
      c.set(e.name, capacityMap(e.name, e.regions));
    }
    types = t;
    capacity = c;
  };
  setCatalog(opts.catalog ?? DEFAULT_CATALOG);

  const accounts: AccountState[] = [];
  let accountSeq = 0;
  const newAccount = (apiKey?: string, name?: string): AccountState => {
    accountSeq++;
    const key = apiKey ?? `secret_emulator-${accountSeq}_${hex()}.${hex()}`;
    if (accounts.some((a) => a.apiKey === key)) throw new Error('an account with this API key exists');
    const a: AccountState = { id: `account-${accountSeq}`, name: name ?? `account ${accountSeq}`, apiKey: key, sshKeys: [], fileSystems: [] };
    accounts.push(a);
    return a;
  };
  const first = newAccount(opts.apiKey);
  for (const k of opts.extraApiKeys ?? []) newAccount(k);

  const accountByKey = (key: string) => accounts.find((a) => sameKey(a.apiKey, key));
  const accountByRef = (ref: string) => accounts.find((a) => a.id === ref) ?? accountByKey(ref);

  const addFileSystem = (name: string, region: string, ref?: string): string => {
    const account = ref === undefined ? first : accountByRef(ref);
    if (!account) throw new Error('addFileSystem: no such account');
    const r = regionByName(region);
    if (!r) throw new Error(`addFileSystem: unknown region "${region}"`);
    if (account.fileSystems.some((f) => f.name === name)) throw new Error(`addFileSystem: ${name} exists`);
    const fs: FileSystem = { id: hex(), name, region: { ...r }, mount_point: `/lambda/nfs/${name}`, created: new Date().toISOString() };
    account.fileSystems.push(fs);
    return fs.id;
  };
  for (const f of opts.fileSystems ?? []) addFileSystem(f.name, f.region);

  const faults: Fault[] = [];
  let faultSeq = 0;
  const launches: LaunchRecord[] = [];
  const requests: RequestRecord[] = [];
  const pushCapped = <T>(list: T[], item: T) => {
    list.push(item);
    if (list.length > MAX_LOG) list.splice(0, list.length - MAX_LOG);
  };
  const lastLaunch = new Map<string, number>();
  const recentRequests = new Map<string, number[]>();

  const instances = new Map<string, InstanceState>();
  let addressSeq = 0;
  let stopping = false;
  // Waits that stop() cuts short, so that nothing it awaits sleeps on.
  const waiters = new Set<() => void>();
  const wait = (ms: number) =>
    new Promise<void>((r) => {
      if (stopping) return r();
      const done = () => {
        clearTimeout(t);
        waiters.delete(done);
        r();
      };
      const t = setTimeout(done, ms);
      waiters.add(done);
    });
  const tasks = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    tasks.add(p);
    void p.finally(() => tasks.delete(p)).catch(() => undefined);
    return p;
  };

  const nextAddress = async (): Promise<string> => {
    for (let tries = 0; tries < 200; tries++) {
      addressSeq++;
      const n = addressSeq - 1;
      const third = Math.floor(n / 254);
      if (third > 255) throw new Error('out of loopback addresses');
      const address = `${prefix}.${third}.${(n % 254) + 1}`;
      if (!useSshd || (await canBind(address, sshPort))) return address;
    }
    throw new Error(`no free loopback address for port ${sshPort}`);
  };

  const apiView = (i: InstanceState): ApiInstance => {
    const up = i.activeAt !== undefined;
    return {
      id: i.id,
      name: i.name,
      ip: up ? i.address : null,
      private_ip: up ? i.privateIp : null,
      status: i.status,
      ssh_key_names: [...i.sshKeyNames],
      file_system_names: [...i.fileSystemNames],
      region: { ...i.region },
      instance_type: copyType(i.type),
      hostname: up ? `${i.address.replaceAll('.', '-')}.lambda-emulator.invalid` : null,
      jupyter_token: up ? i.jupyterToken : null,
      jupyter_url: up ? `https://jupyter-${i.id}.lambda-emulator.invalid/?token=${i.jupyterToken}` : null,
      is_reserved: false,
    };
  };
  const emulatedView = (i: InstanceState): EmulatedInstance => ({
    ...apiView(i),
    account: i.account.id,
    address: i.address,
    sshPort,
    sshUser,
    dir: i.dir,
    hostKey: i.machine?.hostKey ?? '',
    sshdPid: i.machine?.running ? i.machine.pid : undefined,
    userData: i.userData,
    launchedAt: i.launchedAt,
    activeAt: i.activeAt,
    terminatedAt: i.terminatedAt,
    notes: [...i.notes, ...(i.machine?.notes ?? [])],
  });

  // Boots an instance: makes its machine and starts sshd, and turns it active after bootMs.
  const boot = async (i: InstanceState, authorizedKeys: string[]): Promise<void> => {
    const parsed = hostKeysFromUserData(i.userData);
    i.notes.push(...parsed.notes);
    const keys = [...authorizedKeys, ...parsed.authorizedKeys];
    const started = Date.now();
    const gone = () => i.status === 'terminating' || i.status === 'terminated' || stopping;
    const startSshd = () =>
      (i.sshdStart = (async () => {
      if (gone()) return;
      const m = await SshdMachine.create({ dir: i.dir, address: i.address, port: sshPort, authorizedKeys: keys, hostKeys: parsed.keys, comment: `lambda-emulator-${i.id}` });
      i.machine = m;
      for (let attempt = 1; ; attempt++) {
        if (gone()) return;
        try {
          await m.start();
          return;
        } catch (e) {
          if (!(e instanceof BindError) || attempt >= 5) throw e;
          i.notes.push(`${i.address}:${sshPort} was taken; moving to another address`);
          i.address = await nextAddress();
          m.rebind(i.address);
        }
      }
    })());
    let failed: string | undefined;
    if (useSshd && sshLagMs === 0) {
      await startSshd().catch((e: Error) => {
        failed = e.message;
      });
    }
    const left = settings.bootMs - (Date.now() - started);
    if (left > 0) await wait(left);
    if (i.status !== 'booting' || stopping) return;
    i.activeAt = Date.now();
    if (failed !== undefined) {
      i.status = 'unhealthy';
      i.notes.push(`sshd failed: ${failed}`);
      return;
    }
    i.status = 'active';
    if (useSshd && sshLagMs > 0) {
      await wait(sshLagMs);
      if (i.status !== 'active' || stopping) return;
      await startSshd().catch((e: Error) => {
        i.status = 'unhealthy';
        i.notes.push(`sshd failed: ${e.message}`);
      });
    }
  };

  const giveBackCapacity = (i: InstanceState) => {
    if (!i.holdsCapacity) return;
    i.holdsCapacity = false;
    const m = capacity.get(i.type.name);
    const n = m?.get(i.region.name);
    if (m && n !== undefined && n !== Infinity) m.set(i.region.name, n + 1);
  };

  const terminate = (i: InstanceState) => {
    if (i.status === 'terminating' || i.status === 'terminated') return;
    i.status = 'terminating';
    giveBackCapacity(i);
    track(
      (async () => {
        const since = Date.now();
        await i.sshdStart?.catch(() => undefined);
        await i.machine?.stop().catch((e: Error) => i.notes.push(`stopping sshd: ${e.message}`));
        rmSync(i.dir, { recursive: true, force: true });
        const left = settings.terminateMs - (Date.now() - since);
        if (left > 0) await wait(left);
        if (stopping) return;
        i.status = 'terminated';
        i.terminatedAt = Date.now();
      })(),
    );
  };

  // ---- the API ----

  const authenticate = (req: IncomingMessage): AccountState | undefined => {
    const h = req.headers.authorization;
    if (!h) return undefined;
    const [scheme, value = ''] = h.trim().split(/\s+/, 2);
    if (!scheme) return undefined;
    if (scheme.toLowerCase() === 'bearer') return accountByKey(value);
    if (scheme.toLowerCase() === 'basic') {
      // Lambda takes the key as the user name of basic auth, or the bare key.
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const user = decoded.includes(':') ? decoded.slice(0, decoded.indexOf(':')) : undefined;
      return (user !== undefined ? accountByKey(user) : undefined) ?? accountByKey(value);
    }
    return undefined;
  };

  const opOf = (method: string, path: string): FaultOp | 'unknown' => {
    if (path === '/instance-types' && method === 'GET') return 'list-types';
    if (path === '/instances' && method === 'GET') return 'list-instances';
    if (/^\/instances\/[^/]+$/.test(path) && method === 'GET') return 'get-instance';
    if (path === '/instance-operations/launch' && method === 'POST') return 'launch';
    if (path === '/instance-operations/terminate' && method === 'POST') return 'terminate';
    if (path === '/instance-operations/restart' && method === 'POST') return 'restart';
    if ((path === '/ssh-keys' && (method === 'GET' || method === 'POST')) || (/^\/ssh-keys\/[^/]+$/.test(path) && method === 'DELETE')) return 'ssh-keys';
    if (path === '/file-systems' && method === 'GET') return 'file-systems';
    return 'unknown';
  };

  const pickFault = (op: FaultOp | 'unknown', key: string | undefined): Fault | undefined => {
    for (const f of faults) {
      if (f.op !== 'any' && f.op !== op) continue;
      if (f.apiKey !== undefined && (key === undefined || !sameKey(f.apiKey, key))) continue;
      if (f.rate !== undefined && Math.random() >= f.rate) continue;
      f.hits++;
      if (f.times !== undefined && f.hits >= f.times) faults.splice(faults.indexOf(f), 1);
      return f;
    }
    return undefined;
  };

  const bearerKey = (req: IncomingMessage): string | undefined => {
    const h = req.headers.authorization ?? '';
    const m = /^\s*bearer\s+(\S+)/i.exec(h);
    if (m) return m[1];
    const b = /^\s*basic\s+(\S+)/i.exec(h);
    if (!b) return undefined;
    const decoded = Buffer.from(b[1]!, 'base64').toString('utf8');
    return decoded.includes(':') ? decoded.slice(0, decoded.indexOf(':')) : b[1];
  };

  const rateLimitedGeneral = (account: AccountState): boolean => {
    if (!(settings.requestsPerSecond > 0)) return false;
    const now = Date.now();
    const list = (recentRequests.get(account.id) ?? []).filter((t) => now - t < 1000);
    recentRequests.set(account.id, list);
    if (list.length >= settings.requestsPerSecond) return true;
    list.push(now);
    return false;
  };

  const launch = (account: AccountState, body: unknown, record: LaunchRecord): Reply => {
    if (settings.launchIntervalMs > 0) {
      const last = lastLaunch.get(account.id);
      const now = Date.now();
      if (last !== undefined && now - last < settings.launchIntervalMs) {
        const retry = Math.max(1, Math.ceil((settings.launchIntervalMs - (now - last)) / 1000));
        record.outcome = 'rate-limited';
        throw new ApiError(429, RATE_LIMIT_CODE, 'Too many launch requests.', `Launch at most once every ${Math.ceil(settings.launchIntervalMs / 1000)} seconds.`, { 'retry-after': String(retry) });
      }
      if (countFailures) lastLaunch.set(account.id, now);
    }
    const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    if (typeof b.instance_type_name === 'string') record.type = b.instance_type_name;
    if (typeof b.region_name === 'string') record.region = b.region_name;
    if (typeof b.name === 'string') record.name = b.name;
    const invalid = (message: string): never => {
      record.outcome = 'invalid-parameters';
      throw new ApiError(400, 'global/invalid-parameters', message, 'Check the request body against the API reference.');
    };
    if (!body || typeof body !== 'object' || Array.isArray(body)) invalid('The request body must be a JSON object.');
    if (typeof b.region_name !== 'string' || !b.region_name) invalid('region_name is required.');
    if (typeof b.instance_type_name !== 'string' || !b.instance_type_name) invalid('instance_type_name is required.');
    if (!isStringArray(b.ssh_key_names) || b.ssh_key_names.length !== 1) invalid('ssh_key_names must list exactly one SSH key name.');
    if (b.file_system_names !== undefined && b.file_system_names !== null && (!isStringArray(b.file_system_names) || b.file_system_names.length > 1)) invalid('file_system_names may list at most one file system.');
    if (b.quantity !== undefined && b.quantity !== 1) invalid('quantity must be 1.');
    if (b.name !== undefined && b.name !== null && !validName(b.name)) invalid('name must be 1 to 64 characters.');
    if (b.user_data !== undefined && b.user_data !== null && (typeof b.user_data !== 'string' || Buffer.byteLength(b.user_data) > MAX_USER_DATA)) invalid('user_data must be a string of at most 1 MiB.');
    const region = regionByName(b.region_name as string);
    if (!region) invalid(`Unknown region "${b.region_name as string}".`);
    const type = types.get(b.instance_type_name as string);
    if (!type) invalid(`Unknown instance type "${b.instance_type_name as string}".`);
    const keyNames = b.ssh_key_names as string[];
    const keys = keyNames.map((n) => {
      const k = account.sshKeys.find((s) => s.name === n);
      if (!k) {
        record.outcome = 'not-found';
        throw new ApiError(404, 'global/object-does-not-exist', `SSH key "${n}" does not exist.`, 'Add the key with POST /ssh-keys first.');
      }
      return k;
    });
    const fsNames = (b.file_system_names as string[] | undefined | null) ?? [];
    for (const n of fsNames) {
      const fs = account.fileSystems.find((f) => f.name === n);
      if (!fs) {
        record.outcome = 'not-found';
        throw new ApiError(404, 'global/object-does-not-exist', `File system "${n}" does not exist.`);
      }
      if (fs.region.name !== region!.name) {
        record.outcome = 'file-system-in-wrong-region';
        throw new ApiError(400, 'instance-operations/launch/file-system-in-wrong-region', `File system "${n}" is in ${fs.region.name}, not ${region!.name}.`, 'Launch in the file system\'s region, or attach no file system.');
      }
    }
    const live = [...instances.values()].filter((i) => i.account === account && i.status !== 'terminated' && i.status !== 'terminating').length;
    if (live + 1 > settings.instanceQuota) {
      record.outcome = 'quota-exceeded';
      throw new ApiError(400, 'global/quota-exceeded', 'Launching this instance would exceed your quota.', 'Terminate instances or contact support.');
    }
    const cap = capacity.get(type!.name)?.get(region!.name);
    if (cap === undefined || cap <= 0) {
      record.outcome = 'insufficient-capacity';
      throw new ApiError(400, 'instance-operations/launch/insufficient-capacity', 'Not enough capacity to fulfill launch request.', 'Choose an instance type with more availability, or try again later.');
    }
    if (!countFailures && settings.launchIntervalMs > 0) lastLaunch.set(account.id, Date.now());
    if (cap !== Infinity) capacity.get(type!.name)!.set(region!.name, cap - 1);

    const id = hex();
    const i: InstanceState = {
      id,
      account,
      name: (b.name as string | undefined | null) ?? null,
      status: 'booting',
      sshKeyNames: [...keyNames],
      fileSystemNames: [...fsNames],
      region: { ...region! },
      type: copyType(type!),
      address: '',
      privateIp: `10.${Math.floor(Math.random() * 250) + 1}.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 250) + 2}`,
      jupyterToken: hex(),
      dir: join(root, id),
      userData: (b.user_data as string | undefined | null) ?? undefined,
      machine: undefined,
      boot: undefined,
      sshdStart: undefined,
      launchedAt: Date.now(),
      activeAt: undefined,
      terminatedAt: undefined,
      notes: [],
      holdsCapacity: cap !== Infinity,
    };
    instances.set(id, i);
    i.boot = track(
      nextAddress().then((address) => {
        i.address = address;
        return boot(i, keys.map((k) => k.public_key));
      }),
    ).catch((e: Error) => {
      if (i.status === 'booting') i.status = 'unhealthy';
      i.notes.push(`boot failed: ${e.message}`);
    });
    record.outcome = 'launched';
    record.instanceIds = [id];
    return { status: 200, body: { data: { instance_ids: [id] } } };
  };

  const instancesOf = (account: AccountState) => [...instances.values()].filter((i) => i.account === account);
  const findInstance = (account: AccountState, id: string) => {
    const i = instances.get(id);
    return i && i.account === account ? i : undefined;
  };

  const api = async (op: FaultOp | 'unknown', method: string, path: string, account: AccountState, body: unknown, record: LaunchRecord | undefined): Promise<Reply> => {
    const ok = (data: unknown): Reply => ({ status: 200, body: { data } });
    switch (op) {
      case 'list-types': {
        const data: Record<string, unknown> = {};
        for (const t of types.values()) {
          const caps = capacity.get(t.name) ?? new Map<string, number>();
          data[t.name] = {
            instance_type: copyType(t),
            regions_with_capacity_available: regions.filter((r) => (caps.get(r.name) ?? 0) > 0).map((r) => ({ ...r })),
          };
        }
        return ok(data);
      }
      case 'list-instances':
        return ok(instancesOf(account).map(apiView));
      case 'get-instance': {
        const id = decodeURIComponent(path.slice('/instances/'.length));
        const i = findInstance(account, id);
        if (!i) throw new ApiError(404, 'global/object-does-not-exist', `Instance ${id} does not exist.`);
        return ok(apiView(i));
      }
      case 'launch':
        return launch(account, body, record!);
      case 'terminate':
      case 'restart': {
        const b = (body ?? {}) as Record<string, unknown>;
        if (!isStringArray(b.instance_ids) || b.instance_ids.length === 0) throw new ApiError(400, 'global/invalid-parameters', 'instance_ids must list at least one instance ID.');
        const found = b.instance_ids.map((id) => {
          const i = findInstance(account, id);
          if (!i) throw new ApiError(404, 'global/object-does-not-exist', `Instance ${id} does not exist.`);
          return i;
        });
        if (op === 'terminate') {
          found.forEach(terminate);
          return ok({ terminated_instances: found.map(apiView) });
        }
        const bad = found.find((i) => i.status !== 'active');
        if (bad) throw new ApiError(400, 'global/invalid-parameters', `Instance ${bad.id} is ${bad.status}; only active instances can be restarted.`);
        for (const i of found) {
          i.status = 'booting';
          void wait(settings.bootMs).then(() => {
            if (i.status === 'booting' && !stopping) i.status = 'active';
          });
        }
        return ok({ restarted_instances: found.map(apiView) });
      }
      case 'ssh-keys': {
        if (method === 'GET') return ok(account.sshKeys.map((k) => ({ ...k })));
        if (method === 'DELETE') {
          const id = decodeURIComponent(path.slice('/ssh-keys/'.length));
          const at = account.sshKeys.findIndex((k) => k.id === id);
          if (at < 0) throw new ApiError(404, 'global/object-does-not-exist', `SSH key ${id} does not exist.`);
          account.sshKeys.splice(at, 1);
          return ok({});
        }
        const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
        if (!validName(b.name)) throw new ApiError(400, 'global/invalid-parameters', 'name must be 1 to 64 characters.');
        if (account.sshKeys.some((k) => k.name === b.name)) throw new ApiError(400, 'global/invalid-parameters', `An SSH key named "${b.name}" already exists.`, 'Choose another name.');
        let privateKey: string | undefined;
        let publicKey: string;
        if (b.public_key === undefined || b.public_key === null) {
          const dir = mkdtempSync(join(root, '.keygen-'));
          try {
            await execFileP('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', b.name, '-f', join(dir, 'key')]);
            privateKey = readFileSync(join(dir, 'key'), 'utf8');
            publicKey = readFileSync(join(dir, 'key.pub'), 'utf8').trim();
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        } else {
          if (typeof b.public_key !== 'string' || b.public_key.length > 4096 || !looksLikePublicKey(b.public_key)) throw new ApiError(400, 'global/invalid-parameters', 'public_key is not an OpenSSH public key.');
          publicKey = b.public_key.trim();
        }
        const key: SshKey = { id: hex(), name: b.name, public_key: publicKey };
        account.sshKeys.push(key);
        return ok(privateKey === undefined ? { ...key } : { ...key, private_key: privateKey });
      }
      case 'file-systems':
        return ok(
          account.fileSystems.map((f) => ({
            id: f.id,
            name: f.name,
            created: f.created,
            created_by: { id: account.id, email: `${account.id}@lambda-emulator.invalid`, status: 'active' },
            mount_point: f.mount_point,
            region: { ...f.region },
            is_in_use: [...instances.values()].some((i) => i.account === account && i.status !== 'terminated' && i.fileSystemNames.includes(f.name)),
            bytes_used: 0,
          })),
        );
      default:
        throw new ApiError(404, 'global/object-does-not-exist', `No such endpoint: ${method} /api/v1${path}.`);
    }
  };

  const readBody = (req: IncomingMessage): Promise<string> =>
    new Promise((resolveBody, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) {
          reject(new ApiError(400, 'global/invalid-parameters', 'Request body too large.'));
          req.destroy();
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => resolveBody(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });

  const parseJson = (text: string): unknown => {
    if (text.trim() === '') return undefined;
    try {
      return JSON.parse(text);
    } catch {
      throw new ApiError(400, 'global/invalid-parameters', 'The request body is not valid JSON.');
    }
  };

  const send = (res: ServerResponse, reply: Reply) => {
    const text = JSON.stringify(reply.body);
    res.writeHead(reply.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...(reply.headers ?? {}) });
    res.end(text);
  };

  const handleApi = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    const method = req.method ?? 'GET';
    const op = opOf(method, path);
    const account = authenticate(req);
    const rec: RequestRecord = { time: Date.now(), method, path: `/api/v1${path}`, op, status: 0, account: account?.id };
    pushCapped(requests, rec);
    const launchRec: LaunchRecord | undefined =
      op === 'launch' ? { time: rec.time, account: account?.id, type: undefined, region: undefined, name: undefined, outcome: 'launched', status: 0, instanceIds: [] } : undefined;
    if (launchRec) pushCapped(launches, launchRec);
    const fault = pickFault(op, bearerKey(req));
    if (fault) {
      rec.fault = fault.mode;
      if (launchRec) launchRec.fault = fault.mode;
    }
    if (fault?.mode === 'delay') await sleep(fault.ms ?? 1000);
    if (fault?.mode === 'hang') {
      if (launchRec) launchRec.outcome = 'fault';
      req.resume();
      return; // the response is never written; stop() closes the socket
    }
    let reply: Reply;
    if (fault?.mode === 'status') {
      req.resume();
      const status = fault.status ?? 500;
      reply = { status, body: errorBody(fault.code ?? defaultCode(status), fault.message ?? 'Injected failure.', 'Try again later.') };
      if (launchRec) launchRec.outcome = 'fault';
      if (status === 429) reply.headers = { 'retry-after': '1' };
    } else {
      try {
        const text = await readBody(req);
        if (!account) {
          if (launchRec) launchRec.outcome = 'unauthorized';
          throw new ApiError(401, 'global/invalid-api-key', 'API key was invalid, expired, or deleted.', 'Check your API key or create a new one, then try again.');
        }
        const body = parseJson(text);
        if (rateLimitedGeneral(account)) {
          if (launchRec) launchRec.outcome = 'rate-limited';
          throw new ApiError(429, RATE_LIMIT_CODE, 'Too many requests.', `Send at most ${settings.requestsPerSecond} requests per second.`, { 'retry-after': '1' });
        }
        reply = await api(op, method, path, account, body, launchRec);
      } catch (e) {
        if (e instanceof ApiError) reply = { status: e.status, body: errorBody(e.code, e.message, e.suggestion), ...(e.headers ? { headers: e.headers } : {}) };
        else reply = { status: 500, body: errorBody('global/unknown', `Emulator error: ${(e as Error).message}`) };
      }
    }
    if (launchRec) {
      const err = (reply.body as { error?: { code?: string } }).error;
      if (err?.code) launchRec.code = err.code;
    }
    if (fault?.mode === 'drop') {
      req.socket.destroy();
      return;
    }
    rec.status = reply.status;
    if (launchRec) launchRec.status = reply.status;
    send(res, reply);
  };

  // ---- the control API, /_emulator/ ----

  const handle: LambdaEmulator = {
    url: '',
    origin: '',
    apiKey: first.apiKey,
    sshPort,
    sshUser,
    dir: root,
    get bootMs() {
      return settings.bootMs;
    },
    set bootMs(v: number) {
      settings.bootMs = v;
    },
    get terminateMs() {
      return settings.terminateMs;
    },
    set terminateMs(v: number) {
      settings.terminateMs = v;
    },
    get launchIntervalMs() {
      return settings.launchIntervalMs;
    },
    set launchIntervalMs(v: number) {
      settings.launchIntervalMs = v;
    },
    get requestsPerSecond() {
      return settings.requestsPerSecond;
    },
    set requestsPerSecond(v: number) {
      settings.requestsPerSecond = v;
    },
    get instanceQuota() {
      return settings.instanceQuota;
    },
    set instanceQuota(v: number) {
      settings.instanceQuota = v;
    },
    get accounts() {
      return accounts.map((a) => ({ id: a.id, name: a.name, apiKey: a.apiKey }));
    },
    addAccount: (name?: string) => newAccount(undefined, name).apiKey,
    get regions() {
      return regions.map((r) => ({ ...r }));
    },
    catalog: () =>
      [...types.values()].map((t) => {
        const caps = capacity.get(t.name) ?? new Map<string, number>();
        const counted = [...caps.values()].some((n) => n !== Infinity);
        return { ...copyType(t), regions: counted ? Object.fromEntries(caps) : [...caps.keys()] };
      }),
    setCatalog,
    setCapacity: (typeName: string, c: Capacity) => {
      if (!types.has(typeName)) throw new Error(`setCapacity: unknown instance type "${typeName}"`);
      capacity.set(typeName, capacityMap(typeName, c));
    },
    setPrice: (typeName: string, cents: number) => {
      const t = types.get(typeName);
      if (!t) throw new Error(`setPrice: unknown instance type "${typeName}"`);
      if (!Number.isInteger(cents) || cents < 0) throw new Error('setPrice: cents must be a whole number >= 0');
      t.price_cents_per_hour = cents;
    },
    addFileSystem,
    fault: (spec: FaultSpec) => {
      const id = `fault-${++faultSeq}`;
      faults.push({ ...spec, id, hits: 0 });
      return id;
    },
    clearFaults: () => {
      faults.length = 0;
    },
    get faults() {
      return faults.map((f) => ({ ...f }));
    },
    get launches() {
      return launches.map((l) => ({ ...l, instanceIds: [...l.instanceIds] }));
    },
    get requests() {
      return requests.map((r) => ({ ...r }));
    },
    instances: (ref?: string) => {
      const account = ref === undefined ? undefined : accountByRef(ref);
      if (ref !== undefined && !account) return [];
      return [...instances.values()].filter((i) => !account || i.account === account).map(emulatedView);
    },
    instance: (id: string) => {
      const i = instances.get(id);
      return i ? emulatedView(i) : undefined;
    },
    waitForStatus: async (id: string, status: InstanceStatus, timeoutMs = 30_000) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const i = instances.get(id);
        if (i?.status === status) return emulatedView(i);
        if (Date.now() > until) throw new Error(`instance ${id} is ${i?.status ?? 'unknown'}, not ${status}, after ${timeoutMs} ms`);
        await sleep(25);
      }
    },
    sshdProcesses: () => [...instances.values()].flatMap((i) => findMachineProcesses(i.dir)),
    stop: async () => {
      if (stopping) return;
      stopping = true;
      for (const w of [...waiters]) w();
      server.closeAllConnections();
      const closed = new Promise<void>((r) => server.close(() => r()));
      await Promise.allSettled([...tasks]);
      await Promise.allSettled([...instances.values()].map(async (i) => {
        await i.boot?.catch(() => undefined);
        await i.machine?.stop();
        await killMachineProcesses(i.dir);
      }));
      if (ownsRoot) rmSync(root, { recursive: true, force: true });
      else for (const i of instances.values()) rmSync(i.dir, { recursive: true, force: true });
      await closed;
    },
  };

  const control = async (method: string, path: string, body: unknown, url: URL): Promise<Reply> => {
    const ok = (data: unknown): Reply => ({ status: 200, body: { data } });
    const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    const num = (v: unknown, name: string): number => {
      if (typeof v !== 'number' || !(v >= 0)) throw new Error(`${name} must be a number >= 0`);
      return v;
    };
    const route = `${method} ${path}`;
    switch (route) {
      case 'GET /state':
        return ok({
          url: handle.url,
          apiKey: handle.apiKey,
          sshPort,
          sshUser,
          dir: root,
          settings: { ...settings, instanceQuota: Number.isFinite(settings.instanceQuota) ? settings.instanceQuota : null },
          accounts: handle.accounts,
          regions,
          catalog: handle.catalog(),
          faults: handle.faults,
        });
      case 'GET /accounts':
        return ok(handle.accounts);
      case 'POST /accounts': {
        const key = handle.addAccount(typeof b.name === 'string' ? b.name : undefined);
        return ok(handle.accounts.find((a) => a.apiKey === key));
      }
      case 'GET /instances':
        return ok(handle.instances(url.searchParams.get('account') ?? undefined));
      case 'GET /launches':
        return ok(handle.launches);
      case 'GET /requests':
        return ok(handle.requests);
      case 'GET /catalog':
        return ok(handle.catalog());
      case 'PUT /catalog':
        if (!Array.isArray(body)) throw new Error('the body must be a list of instance types');
        setCatalog(body as CatalogEntry[]);
        return ok(handle.catalog());
      case 'POST /capacity':
        if (typeof b.type !== 'string') throw new Error('type is required');
        handle.setCapacity(b.type, (b.regions ?? []) as Capacity);
        return ok(handle.catalog());
      case 'POST /price':
        if (typeof b.type !== 'string') throw new Error('type is required');
        handle.setPrice(b.type, num(b.cents, 'cents'));
        return ok(handle.catalog());
      case 'POST /faults':
        if (typeof b.op !== 'string' || typeof b.mode !== 'string') throw new Error('op and mode are required');
        return ok({ id: handle.fault(b as unknown as FaultSpec) });
      case 'GET /faults':
        return ok(handle.faults);
      case 'DELETE /faults':
        handle.clearFaults();
        return ok({});
      case 'POST /settings':
        for (const k of ['bootMs', 'terminateMs', 'launchIntervalMs', 'requestsPerSecond', 'instanceQuota'] as const) {
          if (b[k] === undefined) continue;
          settings[k] = k === 'instanceQuota' && b[k] === null ? Infinity : num(b[k], k);
        }
        return ok({ ...settings, instanceQuota: Number.isFinite(settings.instanceQuota) ? settings.instanceQuota : null });
      case 'POST /file-systems':
        if (typeof b.name !== 'string' || typeof b.region !== 'string') throw new Error('name and region are required');
        return ok({ id: addFileSystem(b.name, b.region, typeof b.account === 'string' ? b.account : undefined) });
      default: {
        const m = /^GET \/instances\/([^/]+)$/.exec(route);
        const i = m ? handle.instance(decodeURIComponent(m[1]!)) : undefined;
        if (i) return ok(i);
        return { status: 404, body: errorBody('emulator/not-found', `No such control endpoint: ${route}`) };
      }
    }
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://emulator');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    if (path.startsWith('/api/v1/') || path === '/api/v1') {
      handleApi(req, res, path.slice('/api/v1'.length) || '/').catch((e: Error) => {
        if (!res.headersSent) send(res, { status: 500, body: errorBody('global/unknown', `Emulator error: ${e.message}`) });
      });
      return;
    }
    if (path.startsWith('/_emulator/')) {
      readBody(req)
        .then((text) => control(req.method ?? 'GET', path.slice('/_emulator'.length), parseJson(text), url))
        .then(
          (reply) => send(res, reply),
          (e: Error) => send(res, { status: 400, body: errorBody('emulator/bad-request', e.message) }),
        );
      return;
    }
    req.resume();
    send(res, { status: 404, body: errorBody('global/object-does-not-exist', 'Not found; the API is under /api/v1.') });
  });

  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolveListen());
  });
  const addr = server.address();
  if (!addr || typeof addr !== 'object') throw new Error('the emulator has no address');
  const origin = `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`;
  Object.assign(handle, { url: `${origin}/api/v1`, origin });
  return handle;
}
