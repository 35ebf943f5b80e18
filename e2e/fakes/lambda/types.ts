// The emulator's public types (the handle, its options, what it records and
// shows) and the shapes of its internal state.
import type { Fault as KitFault, FaultMode, FaultSpec as KitFaultSpec } from '../kit/faults.js';
import type { RequestRecord as KitRequestRecord } from '../kit/log.js';
import type { Capacity, CatalogEntry, InstanceType, Region } from './catalog.js';
import type { SshdMachine } from './machine.js';

export type { FaultMode } from '../kit/faults.js';

export type InstanceStatus = 'booting' | 'active' | 'unhealthy' | 'terminating' | 'terminated';

/** The API's operations, as faults name them. */
export type ApiOp = 'launch' | 'terminate' | 'restart' | 'list-types' | 'list-instances' | 'get-instance' | 'ssh-keys' | 'file-systems';
export type FaultOp = ApiOp | 'any';

/** A fault; an injected status's code defaults from the status: 400 global/invalid-parameters, 401 global/invalid-api-key, 403 global/account-inactive, 404 global/object-does-not-exist, 5xx global/internal-error; a 429 is Cloudflare's plain text (RATE_LIMIT_BODY). */
export type FaultSpec = KitFaultSpec<ApiOp>;
export type Fault = KitFault<ApiOp>;
export type RequestRecord = KitRequestRecord<ApiOp>;

export type LaunchOutcome =
  | 'launched'
  | 'rate-limited'
  /** Refused by the general request limit (requestsPerSecond), before the launch rules were looked at. */
  | 'request-limited'
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

/** A request whose body Lambda's API description does not allow, answered 400 global/invalid-parameters. */
export interface RefusedRequest {
  time: number;
  /** Account ID (never the key). */
  account: string;
  method: string;
  /** The description's path template, e.g. "/api/v1/instance-operations/launch". */
  path: string;
  operationId: string;
  /** What is wrong, one field each. */
  problems: string[];
}

/** An answer of the emulator that Lambda's API description does not allow: a bug in the emulator. */
export interface ContractBreach {
  time: number;
  method: string;
  /** The request's path, with the base. */
  path: string;
  status: number;
  operationId: string;
  problems: string[];
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

/** Whether an action can be taken on an instance now, and if not, why (Lambda's InstanceActionAvailabilityDetails). */
export interface InstanceActionAvailability {
  available: boolean;
  reason_code?: 'vm-has-not-launched' | 'vm-is-too-old' | 'vm-is-terminating';
  reason_description?: string;
}

/** An instance as the API shows it: optional fields are left out, never null. */
export interface ApiInstance {
  id: string;
  name?: string;
  ip?: string;
  private_ip?: string;
  status: InstanceStatus;
  ssh_key_names: string[];
  file_system_names: string[];
  region: Region;
  instance_type: InstanceType;
  hostname?: string;
  jupyter_token?: string;
  jupyter_url?: string;
  actions: Record<'migrate' | 'rebuild' | 'restart' | 'cold_reboot' | 'terminate', InstanceActionAvailability>;
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
  /** A general limit: at most this many API requests per key per second, else 429 (default 1, as Lambda documents; 0 turns it off). */
  requestsPerSecond?: number;
  /** A terminated instance leaves GET /instances this long after it turned terminated, and GET /instances/{id} then answers 404 (default 10000). */
  forgetTerminatedMs?: number;
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
  forgetTerminatedMs: number;
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
  /** Requests refused because the API description does not allow their body. */
  readonly refusedRequests: readonly RefusedRequest[];
  /** Answers that broke the API description; stop() throws when there are any. */
  readonly contractBreaches: readonly ContractBreach[];
  /** Instances of one account (by API key or account ID), or of all. */
  instances(apiKeyOrAccount?: string): EmulatedInstance[];
  instance(id: string): EmulatedInstance | undefined;
  /** Resolves once the instance has the status; throws after timeoutMs (default 30000). */
  waitForStatus(id: string, status: InstanceStatus, timeoutMs?: number): Promise<EmulatedInstance>;
  /** PIDs of every live process of every machine (listeners and sessions). */
  sshdProcesses(): number[];
  /** Terminates everything, closes the server, removes the directories; then rejects if any answer broke the API description. */
  stop(): Promise<void>;
}

export interface AccountState extends Account {
  sshKeys: SshKey[];
  fileSystems: FileSystem[];
}

export interface InstanceState {
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
