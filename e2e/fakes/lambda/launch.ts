// POST /instance-operations/launch: the launch rate limit, the body checked
// against the API description and the rules it states only in words, quota
// and capacity, and the record of every launch request.
import type { Exchange } from '../kit/api.js';
import { HttpError, type Reply } from '../kit/http.js';
import type { IntervalLimiter } from '../kit/limits.js';
import type { RecordLog } from '../kit/log.js';
import { isStringArray } from './cloud-config.js';
import type { Conformance } from './conformance.js';
import type { Fleet } from './instances.js';
import type { CloudState } from './state.js';
import type { AccountState, ApiOp, LaunchRecord } from './types.js';

const MAX_USER_DATA = 1024 * 1024;

export function validName(v: unknown): v is string {
  return typeof v === 'string' && v.length >= 1 && v.length <= 64;
}

/** Starts the record of a launch request, once it is logged and its fault picked. */
export function traceLaunch(launches: RecordLog<LaunchRecord>, ex: Exchange<ApiOp>): LaunchRecord | undefined {
  if (ex.record.op !== 'launch') return undefined;
  const record: LaunchRecord = { time: ex.record.time, account: ex.record.account, type: undefined, region: undefined, name: undefined, outcome: 'launched', status: 0, instanceIds: [] };
  if (ex.fault) record.fault = ex.fault.mode;
  return launches.push(record);
}

/** Completes the record once the request is answered, dropped or hung. */
export function settleLaunch(ex: Exchange<ApiOp>, record: LaunchRecord | undefined): void {
  if (!record) return;
  // The general request limit refused it before the launch handler saw it: not the launch limit's 429.
  if (ex.refusal) record.outcome = ex.refusal === 'rate-limited' ? 'request-limited' : ex.refusal;
  const err = (ex.reply?.body as { error?: { code?: string } } | undefined)?.error;
  if (err?.code) record.code = err.code;
  record.status = ex.record.status;
}

export class Launcher {
  constructor(
    private readonly cloud: CloudState,
    private readonly fleet: Fleet,
    private readonly interval: IntervalLimiter,
    /** Whether refused launches (capacity, bad parameters) count towards the interval. */
    private readonly countFailures: boolean,
    private readonly conformance: Conformance,
  ) {}

  launch(account: AccountState, body: unknown, record: LaunchRecord): Reply {
    const { settings } = this.cloud;
    const now = Date.now();
    const waitMs = this.interval.waitMs(account.id, now);
    if (waitMs > 0) {
      record.outcome = 'rate-limited';
      throw new HttpError(429, undefined, 'Too many launch requests.', `Launch at most once every ${Math.ceil(settings.launchIntervalMs / 1000)} seconds.`, {
        'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))),
      });
    }
    if (this.countFailures) this.interval.count(account.id, now);
    const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    if (typeof b.instance_type_name === 'string') record.type = b.instance_type_name;
    if (typeof b.region_name === 'string') record.region = b.region_name;
    if (typeof b.name === 'string') record.name = b.name;
    const refuse = (outcome: LaunchRecord['outcome'], status: number, code: string, message: string, suggestion?: string): never => {
      record.outcome = outcome;
      throw new HttpError(status, code, message, suggestion);
    };
    const invalid = (message: string): never => refuse('invalid-parameters', 400, 'global/invalid-parameters', message, 'Check the request body against the API reference.');
    // After the rate limit, which Lambda enforces in front of the API: a
    // malformed launch still takes its turn.
    const refused = this.conformance.refusal('POST', '/instance-operations/launch', account, body);
    if (refused) {
      record.outcome = 'invalid-parameters';
      throw refused;
    }
    // What the description says only in words.
    if (!isStringArray(b.ssh_key_names) || b.ssh_key_names.length !== 1) invalid('ssh_key_names must list exactly one SSH key name.');
    if (isStringArray(b.file_system_names) && b.file_system_names.length > 1) invalid('file_system_names may list at most one file system.');
    if (typeof b.user_data === 'string' && Buffer.byteLength(b.user_data) > MAX_USER_DATA) invalid('user_data must be at most 1 MiB.');
    const region = this.cloud.regionByName(b.region_name as string) ?? invalid(`Unknown region "${b.region_name as string}".`);
    const type = this.cloud.type(b.instance_type_name as string) ?? invalid(`Unknown instance type "${b.instance_type_name as string}".`);
    const keyNames = b.ssh_key_names as string[];
    const keys = keyNames.map(
      (n) => account.sshKeys.find((s) => s.name === n) ?? refuse('not-found', 404, 'global/object-does-not-exist', `SSH key "${n}" does not exist.`, 'Add the key with POST /ssh-keys first.'),
    );
    const fsNames = (b.file_system_names as string[] | undefined) ?? [];
    for (const n of fsNames) {
      const fs = account.fileSystems.find((f) => f.name === n) ?? refuse('not-found', 404, 'global/object-does-not-exist', `File system "${n}" does not exist.`, 'Create the file system first, or launch without it.');
      if (fs.region.name !== region.name) {
        refuse('file-system-in-wrong-region', 400, 'instance-operations/launch/file-system-in-wrong-region', `File system "${n}" is in ${fs.region.name}, not ${region.name}.`, "Launch in the file system's region, or attach no file system.");
      }
    }
    if (this.fleet.live(account) + 1 > settings.instanceQuota) {
      refuse('quota-exceeded', 400, 'global/quota-exceeded', 'Launching this instance would exceed your quota.', 'Terminate instances or contact support.');
    }
    const cap = this.cloud.capacityLeft(type.name, region.name);
    if (cap === undefined || cap <= 0) {
      refuse('insufficient-capacity', 400, 'instance-operations/launch/insufficient-capacity', 'Not enough capacity to fulfill launch request.', 'Choose an instance type with more availability, or try again later.');
    }
    if (!this.countFailures) this.interval.count(account.id);
    const id = this.fleet.launch({
      account,
      name: (b.name as string | undefined) || null,
      sshKeyNames: keyNames,
      fileSystemNames: fsNames,
      region,
      type,
      userData: b.user_data as string | undefined,
      authorizedKeys: keys.map((k) => k.public_key),
      holdsCapacity: this.cloud.takeCapacity(type.name, region.name),
    });
    record.outcome = 'launched';
    record.instanceIds = [id];
    return { status: 200, body: { data: { instance_ids: [id] } } };
  }
}
