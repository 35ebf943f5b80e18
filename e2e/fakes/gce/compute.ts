// Instances and zonal Operations: insert (with requestId idempotency and
// capacity refusals), delete, preemption, each an Operation that goes
// PENDING -> RUNNING -> DONE, and the instance lifecycle PROVISIONING ->
// STAGING -> RUNNING -> STOPPING -> (gone | TERMINATED).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { capacityError } from './errors.js';
import type { PolicyRefusal } from './policy.js';
import type { ApiOperation, BootedMachine, CapacityCode, EmulatedInstance, GceEmulatorOptions, InsertRecord, InstanceStatus, OrgPolicy, RefusalSpec } from './types.js';

export const COMPUTE_BASE = 'https://www.googleapis.com/compute/v1';

export interface Settings {
  pendingMs: number;
  runningMs: number;
  bootMs: number;
  waitMaxMs: number;
  tokenTtlSeconds: number;
  requestsPerSecond: number;
  refuseRegexAcrossFields: boolean;
  requestIdRetentionMs: number;
  enforceMaxRunDuration: boolean;
  maxRunDurationScale: number;
  orgPolicy: OrgPolicy;
}

interface OperationState extends ApiOperation {
  done: Promise<void>;
  finish(): void;
}

/** An OpenSSH ed25519 public key line made with node:crypto, for instances no hook boots. */
export function ed25519HostKey(comment: string): string {
  const der = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'der' });
  const raw = der.subarray(der.length - 32);
  const field = (b: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.length);
    return Buffer.concat([len, b]);
  };
  return `ssh-ed25519 ${Buffer.concat([field(Buffer.from('ssh-ed25519')), field(raw)]).toString('base64')} ${comment}`;
}

const numericId = () => String(BigInt(`0x${randomBytes(8).toString('hex')}`) >> 1n);

export class Compute {
  readonly instances = new Map<string, EmulatedInstance>();
  readonly operations = new Map<string, OperationState>();
  private byRequestId = new Map<string, { op: OperationState; at: number }>();
  /** Instances whose status a test set: the lifecycle leaves them so. */
  private readonly pinned = new Set<EmulatedInstance>();
  readonly unreachableZones = new Set<string>();
  readonly inserts: InsertRecord[] = [];
  private refusals: (RefusalSpec & { id: string; hits: number; passed: number })[] = [];
  private refusalSeq = 0;
  private addressSeq = 0;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    readonly project: string,
    readonly zones: readonly string[],
    readonly machineTypes: readonly string[],
    readonly settings: Settings,
    private readonly hooks: Pick<GceEmulatorOptions, 'onInstanceRunning' | 'onInstanceGone'>,
  ) {}

  zoneLink(zone: string): string {
    return `${COMPUTE_BASE}/projects/${this.project}/zones/${zone}`;
  }

  refuse(spec: RefusalSpec): string {
    const id = `refusal-${++this.refusalSeq}`;
    this.refusals.push({ ...spec, id, hits: 0, passed: 0 });
    return id;
  }

  clearRefusals(): void {
    this.refusals = [];
  }

  /** The refusal an insert into zone/type meets, counted; undefined when none. */
  refusalFor(zone: string, name: string, machineType: string, provisioningModel: string | undefined, as: 'http' | 'operation'): CapacityCode | undefined {
    const model = provisioningModel ?? 'STANDARD';
    const code = this.refusalOf(zone, machineType, model, as);
    // An HTTP refusal ends the insert; an accepted one is logged once, at the Operation's refusal check.
    if (code || as === 'operation') this.inserts.push({ time: Date.now(), zone, name, machineType, provisioningModel: model, ...(code ? { refused: code } : {}) });
    return code;
  }

  private refusalOf(zone: string, machineType: string, model: string, as: 'http' | 'operation'): CapacityCode | undefined {
    const r = this.refusals.find((f) => f.as === as && (f.zone ?? zone) === zone && (f.machineType ?? machineType) === machineType && (f.provisioningModel ?? model) === model);
    if (!r) return undefined;
    if (r.passed < (r.after ?? 0)) {
      r.passed++;
      return undefined;
    }
    r.hits++;
    if (r.times !== undefined && r.hits >= r.times) this.refusals = this.refusals.filter((f) => f !== r);
    return r.code;
  }

  operationByRequestId(requestId: string): OperationState | undefined {
    const seen = this.byRequestId.get(requestId);
    if (!seen) return undefined;
    if (Date.now() - seen.at > this.settings.requestIdRetentionMs) {
      this.byRequestId.delete(requestId);
      return undefined;
    }
    return seen.op;
  }

  forgetRequestIds(): void {
    this.byRequestId = new Map();
  }

  setStatus(i: EmulatedInstance, status: InstanceStatus): void {
    this.pinned.add(i);
    i.status = status;
  }

  key(zone: string, name: string): string {
    return `${zone}/${name}`;
  }

  /** Records an insert refused by policy as its own answer. */
  policyRefused(zone: string, name: string, machineType: string, provisioningModel: string | undefined, refusal: PolicyRefusal): void {
    this.inserts.push({ time: Date.now(), zone, name, machineType, provisioningModel: provisioningModel ?? 'STANDARD', refused: refusal.code as InsertRecord['refused'] });
  }

  /**
   * Accepts an insert: the instance exists (PROVISIONING) from now on, unless
   * its Operation fails (a capacity refusal, or `policy`: a policy refusal
   * that comes in the Operation).
   */
  insert(user: string, instance: Omit<EmulatedInstance, 'id' | 'status' | 'address' | 'sshPort' | 'hostKeys' | 'preempted' | 'expired' | 'creationTimestamp'>, policy?: PolicyRefusal): OperationState {
    const i: EmulatedInstance = { ...instance, id: numericId(), status: 'PROVISIONING', address: this.nextAddress(), sshPort: undefined, hostKeys: [], preempted: false, expired: false, creationTimestamp: new Date().toISOString() };
    this.instances.set(this.key(i.zone, i.name), i);
    const op = this.newOperation(user, 'insert', i, i.requestId);
    // Decided now, so that a refusal armed later does not hit inserts already under way.
    if (policy) {
      this.inserts.push({ time: Date.now(), zone: i.zone, name: i.name, machineType: i.machineType, provisioningModel: i.scheduling.provisioningModel ?? 'STANDARD', refused: policy.code as InsertRecord['refused'] });
      void this.run(op, async () => {
        await this.sleep(this.settings.runningMs);
        this.instances.delete(this.key(i.zone, i.name));
        op.error = { errors: [{ code: policy.code, message: policy.message }] };
        op.httpErrorStatusCode = policy.status;
        op.httpErrorMessage = policy.httpMessage;
      });
      return op;
    }
    const refusal = this.refusalFor(i.zone, i.name, i.machineType, i.scheduling.provisioningModel, 'operation');
    void this.run(op, async () => {
      if (refusal) {
        await this.sleep(this.settings.runningMs);
        this.instances.delete(this.key(i.zone, i.name));
        const e = capacityError(refusal, this.project, i.zone, i.machineType);
        op.error = { errors: [{ code: refusal, message: e.message, errorDetails: e.details }] };
        op.httpErrorStatusCode = e.httpStatus;
        op.httpErrorMessage = e.httpMessage;
        return;
      }
      await this.sleep(this.settings.runningMs);
      if (i.status === 'PROVISIONING' && !this.pinned.has(i)) i.status = 'STAGING';
      void this.boot(i);
    });
    return op;
  }

  delete(user: string, i: EmulatedInstance, requestId: string | undefined): OperationState {
    const op = this.newOperation(user, 'delete', i, requestId);
    this.pinned.delete(i);
    void this.run(op, async () => {
      i.status = 'STOPPING';
      await this.sleep(this.settings.runningMs);
      await this.remove(i);
    });
    return op;
  }

  /** Spot preemption: Google stops the instance, then deletes it if its termination action says DELETE. */
  preempt(i: EmulatedInstance): void {
    const spot = i.scheduling.provisioningModel === 'SPOT' || i.scheduling.preemptible === true;
    if (!spot) throw new Error(`instance ${i.name} is not a spot or preemptible instance; only those are preempted`);
    i.preempted = true;
    const op = this.newOperation('system', 'compute.instances.preempted', i, undefined);
    void this.run(op, async () => {
      i.status = 'STOPPING';
      await this.sleep(this.settings.runningMs);
      if (i.scheduling.instanceTerminationAction === 'DELETE') await this.remove(i);
      else {
        i.status = 'TERMINATED';
        await this.hooks.onInstanceGone?.(i);
      }
    });
  }

  waitDone(op: OperationState, maxMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, maxMs);
      void op.done.then(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  view(op: OperationState): ApiOperation {
    const { done: _d, finish: _f, ...rest } = op;
    return JSON.parse(JSON.stringify(rest)) as ApiOperation;
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    for (const op of this.operations.values()) op.finish();
  }

  private async boot(i: EmulatedInstance): Promise<void> {
    await this.sleep(this.settings.bootMs);
    if (i.status !== 'STAGING' || this.stopped || this.pinned.has(i)) return;
    let machine: BootedMachine;
    try {
      machine = this.hooks.onInstanceRunning ? await this.hooks.onInstanceRunning({ ...i }) : { hostKeys: [ed25519HostKey(`root@${i.name}`)], sshPort: 22 };
    } catch {
      return; // a machine that never boots stays STAGING, as a real one whose boot hangs
    }
    if (i.status !== 'STAGING' || this.pinned.has(i)) return;
    i.hostKeys = [...machine.hostKeys];
    i.sshPort = machine.sshPort;
    if (machine.address) i.address = machine.address;
    i.status = 'RUNNING';
    void this.expireAfter(i);
  }

  /** scheduling.maxRunDuration: counted from RUNNING, then the termination action, as Compute Engine does. */
  private async expireAfter(i: EmulatedInstance): Promise<void> {
    const seconds = Number(i.scheduling.maxRunDuration?.seconds ?? 0) + (i.scheduling.maxRunDuration?.nanos ?? 0) / 1e9;
    if (!(seconds > 0) || !this.settings.enforceMaxRunDuration) return;
    await this.sleep(seconds * 1000 * this.settings.maxRunDurationScale);
    if (this.stopped || this.instances.get(this.key(i.zone, i.name)) !== i || i.status === 'STOPPING' || i.status === 'TERMINATED') return;
    i.expired = true;
    i.status = 'STOPPING';
    await this.sleep(this.settings.runningMs);
    if (i.scheduling.instanceTerminationAction === 'DELETE') await this.remove(i);
    else {
      i.status = 'TERMINATED';
      await this.hooks.onInstanceGone?.(i);
    }
  }

  private async remove(i: EmulatedInstance): Promise<void> {
    if (this.instances.get(this.key(i.zone, i.name)) === i) this.instances.delete(this.key(i.zone, i.name));
    i.status = 'TERMINATED';
    await this.hooks.onInstanceGone?.(i);
  }

  private nextAddress(): string {
    const n = ++this.addressSeq;
    return `127.78.${Math.floor(n / 250)}.${(n % 250) + 1}`;
  }

  private newOperation(user: string, operationType: string, i: EmulatedInstance, requestId: string | undefined): OperationState {
    const now = new Date().toISOString();
    const name = `operation-${Date.now()}-${randomBytes(6).toString('hex')}-${randomBytes(4).toString('hex')}`;
    let finish!: () => void;
    const done = new Promise<void>((r) => (finish = r));
    const op: OperationState = {
      kind: 'compute#operation',
      id: numericId(),
      name,
      zone: this.zoneLink(i.zone),
      operationType,
      targetLink: `${this.zoneLink(i.zone)}/instances/${i.name}`,
      targetId: i.id,
      status: 'PENDING',
      user,
      progress: 0,
      insertTime: now,
      selfLink: `${this.zoneLink(i.zone)}/operations/${name}`,
      ...(requestId ? { clientOperationId: requestId } : {}),
      done,
      finish,
    };
    this.operations.set(name, op);
    if (requestId) this.byRequestId.set(requestId, { op, at: Date.now() });
    return op;
  }

  private async run(op: OperationState, work: () => Promise<void>): Promise<void> {
    await this.sleep(this.settings.pendingMs);
    if (this.stopped) return;
    op.status = 'RUNNING';
    op.startTime = new Date().toISOString();
    await work();
    op.status = 'DONE';
    op.progress = 100;
    op.endTime = new Date().toISOString();
    op.finish();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((r) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        r();
      }, ms);
      this.timers.add(t);
    });
  }

  status(zone: string, name: string): InstanceStatus | 'GONE' {
    return this.instances.get(this.key(zone, name))?.status ?? 'GONE';
  }
}
