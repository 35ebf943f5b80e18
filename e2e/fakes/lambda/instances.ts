// Instances and their lifecycle: an address and a real sshd each, booting ->
// active after bootMs, terminating -> terminated after terminateMs. Every wait
// here is cut short by stop(), so that stopping never sleeps on a timer.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { InstanceType, Region } from './catalog.js';
import { hostKeysFromUserData } from './cloud-config.js';
import { BindError, SshdMachine, canBind, findMachineProcesses, killMachineProcesses } from './machine.js';
import { copyType, hex, type CloudState } from './state.js';
import type { AccountState, ApiInstance, EmulatedInstance, InstanceState, InstanceStatus } from './types.js';

export interface FleetOptions {
  /** Where machine directories go. */
  root: string;
  sshPort: number;
  sshUser: string;
  useSshd: boolean;
  sshLagMs: number;
  /** "127.N": instances get 127.N.0.1, 127.N.0.2, ... */
  addressPrefix: string;
}

/** What a launch asks for, once validated. */
export interface LaunchRequest {
  account: AccountState;
  name: string | null;
  sshKeyNames: string[];
  fileSystemNames: string[];
  region: Region;
  type: InstanceType;
  userData: string | undefined;
  /** Public keys sshd admits. */
  authorizedKeys: string[];
  holdsCapacity: boolean;
}

export class Fleet {
  private readonly all = new Map<string, InstanceState>();
  private addressSeq = 0;
  private stopping = false;
  private readonly waiters = new Set<() => void>();
  private readonly tasks = new Set<Promise<unknown>>();

  constructor(
    private readonly cloud: CloudState,
    private readonly opts: FleetOptions,
  ) {}

  get(id: string): InstanceState | undefined {
    return this.all.get(id);
  }

  list(): InstanceState[] {
    return [...this.all.values()];
  }

  of(account: AccountState): InstanceState[] {
    return this.list().filter((i) => i.account === account);
  }

  /** The account's instance; another account's does not exist for it, nor one terminated for longer than forgetTerminatedMs. */
  find(account: AccountState, id: string): InstanceState | undefined {
    const i = this.all.get(id);
    return i && i.account === account && this.listed(i) ? i : undefined;
  }

  /** The account's instances as the API lists them. */
  visible(account: AccountState): InstanceState[] {
    return this.of(account).filter((i) => this.listed(i));
  }

  private listed(i: InstanceState): boolean {
    return i.terminatedAt === undefined || Date.now() - i.terminatedAt < this.cloud.settings.forgetTerminatedMs;
  }

  /** Non-terminated instances of the account that count towards its quota. */
  live(account: AccountState): number {
    return this.of(account).filter((i) => i.status !== 'terminated' && i.status !== 'terminating').length;
  }

  /** Whether an account's file system is attached to an instance that is not terminated. */
  fileSystemInUse(account: AccountState, name: string): boolean {
    return this.of(account).some((i) => i.status !== 'terminated' && i.fileSystemNames.includes(name));
  }

  launch(r: LaunchRequest): string {
    const id = hex();
    const i: InstanceState = {
      id,
      account: r.account,
      name: r.name,
      status: 'booting',
      sshKeyNames: [...r.sshKeyNames],
      fileSystemNames: [...r.fileSystemNames],
      region: { ...r.region },
      type: copyType(r.type),
      address: '',
      privateIp: `10.${Math.floor(Math.random() * 250) + 1}.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 250) + 2}`,
      jupyterToken: hex(),
      dir: join(this.opts.root, id),
      userData: r.userData,
      machine: undefined,
      boot: undefined,
      sshdStart: undefined,
      launchedAt: Date.now(),
      activeAt: undefined,
      terminatedAt: undefined,
      notes: [],
      holdsCapacity: r.holdsCapacity,
    };
    this.all.set(id, i);
    i.boot = this.track(
      this.nextAddress().then((address) => {
        i.address = address;
        return this.boot(i, r.authorizedKeys);
      }),
    ).catch((e: Error) => {
      if (i.status === 'booting') i.status = 'unhealthy';
      i.notes.push(`boot failed: ${e.message}`);
    });
    return id;
  }

  terminate(i: InstanceState): void {
    if (i.status === 'terminating' || i.status === 'terminated') return;
    i.status = 'terminating';
    if (i.holdsCapacity) {
      i.holdsCapacity = false;
      this.cloud.giveBackCapacity(i.type.name, i.region.name);
    }
    this.track(
      (async () => {
        const since = Date.now();
        await i.sshdStart?.catch(() => undefined);
        await i.machine?.stop().catch((e: Error) => i.notes.push(`stopping sshd: ${e.message}`));
        rmSync(i.dir, { recursive: true, force: true });
        const left = this.cloud.settings.terminateMs - (Date.now() - since);
        if (left > 0) await this.wait(left);
        if (this.stopping) return;
        i.status = 'terminated';
        i.terminatedAt = Date.now();
      })(),
    );
  }

  /** active -> booting -> active after bootMs; sshd keeps running. */
  restart(i: InstanceState): void {
    i.status = 'booting';
    void this.wait(this.cloud.settings.bootMs).then(() => {
      if (i.status === 'booting' && !this.stopping) i.status = 'active';
    });
  }

  apiView(i: InstanceState): ApiInstance {
    const up = i.activeAt !== undefined;
    return {
      id: i.id,
      ...(i.name ? { name: i.name } : {}),
      ...(up
        ? {
            ip: i.address,
            private_ip: i.privateIp,
            hostname: `${i.address.replaceAll('.', '-')}.lambda-emulator.invalid`,
            jupyter_token: i.jupyterToken,
            jupyter_url: `https://jupyter-${i.id}.lambda-emulator.invalid/?token=${i.jupyterToken}`,
          }
        : {}),
      status: i.status,
      ssh_key_names: [...i.sshKeyNames],
      file_system_names: [...i.fileSystemNames],
      region: { ...i.region },
      instance_type: copyType(i.type),
      actions: actionsOf(i),
    };
  }

  emulatedView(i: InstanceState): EmulatedInstance {
    return {
      ...this.apiView(i),
      account: i.account.id,
      address: i.address,
      sshPort: this.opts.sshPort,
      sshUser: this.opts.sshUser,
      dir: i.dir,
      hostKey: i.machine?.hostKey ?? '',
      sshdPid: i.machine?.running ? i.machine.pid : undefined,
      userData: i.userData,
      launchedAt: i.launchedAt,
      activeAt: i.activeAt,
      terminatedAt: i.terminatedAt,
      notes: [...i.notes, ...(i.machine?.notes ?? [])],
    };
  }

  async waitForStatus(id: string, status: InstanceStatus, timeoutMs: number): Promise<EmulatedInstance> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const i = this.all.get(id);
      if (i?.status === status) return this.emulatedView(i);
      if (Date.now() > until) throw new Error(`instance ${id} is ${i?.status ?? 'unknown'}, not ${status}, after ${timeoutMs} ms`);
      await new Promise<void>((r) => setTimeout(r, 25));
    }
  }

  sshdProcesses(): number[] {
    return this.list().flatMap((i) => findMachineProcesses(i.dir));
  }

  /** Ends every wait, then every machine and its processes; leaves directories to the caller. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const w of [...this.waiters]) w();
    await Promise.allSettled([...this.tasks]);
    await Promise.allSettled(
      this.list().map(async (i) => {
        await i.boot?.catch(() => undefined);
        await i.machine?.stop();
        await killMachineProcesses(i.dir);
      }),
    );
  }

  private wait(ms: number): Promise<void> {
    return new Promise<void>((r) => {
      if (this.stopping) return r();
      const done = () => {
        clearTimeout(t);
        this.waiters.delete(done);
        r();
      };
      const t = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.tasks.add(p);
    void p.finally(() => this.tasks.delete(p)).catch(() => undefined);
    return p;
  }

  private async nextAddress(): Promise<string> {
    const { addressPrefix, useSshd, sshPort } = this.opts;
    for (let tries = 0; tries < 200; tries++) {
      this.addressSeq++;
      const n = this.addressSeq - 1;
      const third = Math.floor(n / 254);
      if (third > 255) throw new Error('out of loopback addresses');
      const address = `${addressPrefix}.${third}.${(n % 254) + 1}`;
      if (!useSshd || (await canBind(address, sshPort))) return address;
    }
    throw new Error(`no free loopback address for port ${sshPort}`);
  }

  // Makes the instance's machine and starts sshd, and turns it active after bootMs.
  private async boot(i: InstanceState, authorizedKeys: string[]): Promise<void> {
    const { useSshd, sshLagMs, sshPort } = this.opts;
    const parsed = hostKeysFromUserData(i.userData);
    i.notes.push(...parsed.notes);
    const keys = [...authorizedKeys, ...parsed.authorizedKeys];
    const started = Date.now();
    const gone = () => i.status === 'terminating' || i.status === 'terminated' || this.stopping;
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
            i.address = await this.nextAddress();
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
    const left = this.cloud.settings.bootMs - (Date.now() - started);
    if (left > 0) await this.wait(left);
    if (i.status !== 'booting' || this.stopping) return;
    i.activeAt = Date.now();
    if (failed !== undefined) {
      i.status = 'unhealthy';
      i.notes.push(`sshd failed: ${failed}`);
      return;
    }
    i.status = 'active';
    if (useSshd && sshLagMs > 0) {
      await this.wait(sshLagMs);
      if (i.status !== 'active' || this.stopping) return;
      await startSshd().catch((e: Error) => {
        i.status = 'unhealthy';
        i.notes.push(`sshd failed: ${e.message}`);
      });
    }
  }
}

/** What may be done with an instance in its status, as Lambda's `actions` says it. */
function actionsOf(i: InstanceState): ApiInstance['actions'] {
  const ending = i.status === 'terminating' || i.status === 'terminated';
  const no = (reason_code: 'vm-has-not-launched' | 'vm-is-terminating', reason_description: string) => ({ available: false, reason_code, reason_description });
  const when = (ok: boolean) =>
    ok ? { available: true } : ending ? no('vm-is-terminating', 'The instance is terminating or terminated.') : no('vm-has-not-launched', 'The instance has not launched yet.');
  const running = i.status === 'active';
  return { migrate: when(false), rebuild: when(running), restart: when(running), cold_reboot: when(running), terminate: when(!ending) };
}
