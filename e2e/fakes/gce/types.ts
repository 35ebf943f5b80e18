// The Compute Engine emulator's public types (options, handle, what it
// records and shows) and the shapes of its state.
import type { Fault as KitFault, FaultSpec as KitFaultSpec } from '../kit/faults.js';
import type { RequestRecord as KitRequestRecord } from '../kit/log.js';

/** The API's operations, as faults and the request log name them. */
export type GceOp = 'insert' | 'get' | 'list' | 'aggregated-list' | 'delete' | 'guest-attributes' | 'get-operation' | 'wait-operation' | 'token' | 'metadata-token' | 'metadata-email';
export type FaultSpec = KitFaultSpec<GceOp>;
export type Fault = KitFault<GceOp>;
export type RequestRecord = KitRequestRecord<GceOp>;

/** The statuses the emulator's own lifecycle uses; setStatus may put any other string (PENDING, SUSPENDED, DEPROVISIONING, one not yet documented). */
export type InstanceStatus = 'PROVISIONING' | 'STAGING' | 'RUNNING' | 'STOPPING' | 'TERMINATED' | (string & {});
export type OperationStatus = 'PENDING' | 'RUNNING' | 'DONE';

/** The capacity and quota errors a launch can be refused with. */
/** The capacity, quota and throttling errors a launch can be refused with (RESOURCE_OPERATION_RATE_EXCEEDED: too many operations on the resource at once). */
export type CapacityCode = 'ZONE_RESOURCE_POOL_EXHAUSTED' | 'ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS' | 'QUOTA_EXCEEDED' | 'RESOURCE_OPERATION_RATE_EXCEEDED';

/** A refusal armed on demand: inserts matching zone and machine type fail with `code`. */
export interface RefusalSpec {
  /** Default: every zone. */
  zone?: string;
  /** Default: every machine type. */
  machineType?: string;
  code: CapacityCode;
  /** `http`: the insert itself answers the error; `operation`: the insert is accepted and its Operation ends DONE with the error. */
  as: 'http' | 'operation';
  /** Default: both; SPOT alone is a zone out of spot capacity that still has standard VMs. */
  provisioningModel?: 'SPOT' | 'STANDARD';
  /** Matching inserts it lets through before it refuses (a zone with room for that many more); default 0. */
  after?: number;
  /** How many inserts it refuses; unlimited when absent. */
  times?: number;
}

/**
 * An organisation policy and the IAM grants of the project, as inserts meet
 * them (all off by default, as in a project no one constrained). Live: set
 * its fields on the handle's `orgPolicy` at any time.
 */
export interface OrgPolicy {
  /** constraints/compute.vmExternalIpAccess allowing no instance: an insert asking for an access config (an external IP) is refused, 412 conditionNotMet. */
  forbidExternalIp: boolean;
  /** constraints/compute.requireOsLogin: an insert whose metadata sets enable-oslogin to false is refused, 412 conditionNotMet. */
  requireOsLogin: boolean;
  /** Service accounts the caller may not act as (no iam.serviceAccounts.actAs): an insert attaching one is refused, 400 badRequest. */
  deniedServiceAccounts: string[];
  /** 'http' (default): the insert answers the refusal; 'operation': the insert is accepted and its Operation ends DONE with it, no instance left. */
  refuseAs: 'http' | 'operation';
}

export interface InsertRecord {
  time: number;
  zone: string;
  name: string;
  machineType: string;
  provisioningModel: string;
  /** The capacity, quota or policy code it was refused with, as an HTTP error or in its Operation (CONDITION_NOT_MET, SERVICE_ACCOUNT_ACCESS_DENIED for policy). */
  refused?: CapacityCode | 'CONDITION_NOT_MET' | 'SERVICE_ACCOUNT_ACCESS_DENIED';
}

/** What a booted machine offers: its sshd host keys ("ssh-ed25519 AAAA…") and where it listens. */
export interface BootedMachine {
  hostKeys: string[];
  /** Default: the emulator's instance address (127.78.x.y). */
  address?: string;
  sshPort: number;
}

/** The service-account key JSON, as Google issues it (the file `gcloud iam service-accounts keys create` writes). */
export interface ServiceAccountKeyJson {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  auth_uri: string;
  token_uri: string;
}

export interface GceEmulatorOptions {
  host?: string;
  port?: number;
  /** The one project the emulator serves (default "leasehold-test"). */
  project?: string;
  /** Default us-central1-a, us-central1-b, us-central1-c. */
  zones?: readonly string[];
  /** Known machine types (default e2-standard-2/4/8, n2-standard-4/8). */
  machineTypes?: readonly string[];
  /** An Operation stays PENDING this long (default 50). */
  pendingMs?: number;
  /** An Operation stays RUNNING this long (default 150). */
  runningMs?: number;
  /** After its insert is DONE, an instance is STAGING this long before RUNNING (default 200). */
  bootMs?: number;
  /** The longest operations.wait holds a request (default 120000, Google's 2 minutes). */
  waitMaxMs?: number;
  /** Lifetime of access tokens from /token, in seconds (default 3600). */
  tokenTtlSeconds?: number;
  /** API requests per service account per second, else 429 (default 0: no limit). */
  requestsPerSecond?: number;
  /** A filter with regular-expression terms on more than one field is a 400, as the API reference says (default true). */
  refuseRegexAcrossFields?: boolean;
  /**
   * How long a requestId is remembered (default 3600000: Google keeps one at
   * least 60 minutes). An insert repeated after that is a new insert, and a
   * 409 alreadyExists when its VM is there.
   */
  requestIdRetentionMs?: number;
  /** scheduling.maxRunDuration ends the VM (its instanceTerminationAction) that long after it turned RUNNING (default true). */
  enforceMaxRunDuration?: boolean;
  /** A VM's maxRunDuration passes this much faster (default 1), so tests see a 24 h bound end; read when the VM turns RUNNING. */
  maxRunDurationScale?: number;
  /** The organisation policy and IAM refusals inserts meet (default: none). */
  orgPolicy?: Partial<OrgPolicy>;
  /**
   * Called when an instance turns RUNNING; what it returns is the machine's
   * host keys and SSH port. Without it the emulator makes an ed25519 host key
   * per instance and nothing listens.
   */
  onInstanceRunning?: (instance: EmulatedInstance) => Promise<BootedMachine>;
  /** Called once an instance is gone (deleted, or preempted with action DELETE) or TERMINATED. */
  onInstanceGone?: (instance: EmulatedInstance) => Promise<void>;
}

export interface Scheduling {
  provisioningModel?: string;
  /** A Duration: seconds as a string (JSON of int64), nanos. */
  maxRunDuration?: { seconds?: string | number; nanos?: number };
  instanceTerminationAction?: string;
  preemptible?: boolean;
  automaticRestart?: boolean;
  onHostMaintenance?: string;
}

/** An instance as the emulator knows it: the API's view plus what tests look at. */
export interface EmulatedInstance {
  id: string;
  name: string;
  zone: string;
  machineType: string;
  status: InstanceStatus;
  labels: Record<string, string>;
  metadata: { key: string; value: string }[];
  scheduling: Scheduling;
  serviceAccounts: { email: string; scopes: string[] }[];
  /** The loopback address the machine is reached at: its networkIP, and its natIP when the insert asked for an access config. */
  address: string;
  /** The insert asked for an access config (ONE_TO_ONE_NAT): the API shows accessConfigs with a natIP once it runs. */
  external: boolean;
  sshPort: number | undefined;
  hostKeys: string[];
  /** The insert's body as sent. */
  body: Record<string, unknown>;
  preempted: boolean;
  /** Ended by its scheduling.maxRunDuration. */
  expired: boolean;
  requestId: string | undefined;
  /** RFC 3339, when the insert made it (the API's creationTimestamp). */
  creationTimestamp: string;
}

/** An Operation as the API shows it. */
export interface ApiOperation {
  kind: 'compute#operation';
  id: string;
  name: string;
  zone: string;
  operationType: string;
  targetLink: string;
  targetId: string;
  status: OperationStatus;
  user: string;
  progress: number;
  insertTime: string;
  startTime?: string;
  endTime?: string;
  selfLink: string;
  clientOperationId?: string;
  error?: { errors: { code: string; message: string; errorDetails?: unknown[] }[] };
  httpErrorStatusCode?: number;
  httpErrorMessage?: string;
}

export interface GceEmulator {
  /** The API base, "http://127.0.0.1:PORT/compute/v1". */
  readonly url: string;
  /** The token endpoint, "http://127.0.0.1:PORT/token". */
  readonly tokenUrl: string;
  readonly origin: string;
  readonly project: string;
  readonly zones: readonly string[];
  /** What GCE_METADATA_HOST takes to reach the emulator's metadata server ("127.0.0.1:PORT"). */
  readonly metadataHost: string;
  /**
   * Email of the service account the metadata server hands tokens for, as if the
   * caller ran on a VM or GKE pod with that identity: by default the first
   * account; undefined: no account is attached (the token is 404).
   */
  metadataServiceAccount: string | undefined;
  /** The first service account's key, as the JSON file Google issues. */
  readonly serviceAccountKey: ServiceAccountKeyJson;
  /** Issues another service account and its key. */
  addServiceAccount(name: string): ServiceAccountKeyJson;
  /** Revokes a key: tokens it signs are refused from now on, tokens issued before it stay good until they expire. */
  revokeKey(privateKeyId: string): void;
  pendingMs: number;
  runningMs: number;
  bootMs: number;
  requestsPerSecond: number;
  tokenTtlSeconds: number;
  /** Arms a capacity or quota refusal; returns its ID. */
  refuse(spec: RefusalSpec): string;
  clearRefusals(): void;
  /** Preempts a spot instance: TERMINATED, or gone if its instanceTerminationAction is DELETE. */
  preempt(zone: string, name: string): void;
  /** Sets an instance's status as Compute Engine would show it (SUSPENDED, DEPROVISIONING, REPAIRING, or a status not yet documented); the lifecycle no longer moves it. */
  setStatus(zone: string, name: string, status: InstanceStatus): void;
  /** Zones aggregatedList cannot reach: their scope carries an UNREACHABLE warning and is in `unreachables`. */
  readonly unreachableZones: Set<string>;
  /** Forgets every requestId seen, as after an outage longer than Google keeps them. */
  forgetRequestIds(): void;
  refuseRegexAcrossFields: boolean;
  requestIdRetentionMs: number;
  enforceMaxRunDuration: boolean;
  maxRunDurationScale: number;
  /** The organisation policy inserts meet; set its fields to switch refusals on and off. */
  readonly orgPolicy: OrgPolicy;
  fault(spec: FaultSpec): string;
  clearFaults(): void;
  readonly requests: readonly RequestRecord[];
  /** Requests that change something (insert, delete), answered or not. */
  readonly mutations: readonly RequestRecord[];
  instances(zone?: string): EmulatedInstance[];
  instance(zone: string, name: string): EmulatedInstance | undefined;
  operations(zone?: string): ApiOperation[];
  /** Every insert that created or was refused an instance, in the order they came (a repeated requestId is not one). */
  inserts(): InsertRecord[];
  /** Resolves once the instance has the status ('GONE': no longer exists); throws after timeoutMs (default 30000). */
  waitForStatus(zone: string, name: string, status: InstanceStatus | 'GONE', timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}
