// An in-memory machine provider for tests of the code above the providers
// (Karpenter's pkg/cloudprovider/fake is the model): it records every call,
// keeps machines by name, fails the next calls of an operation with the
// typed errors a test sets, and can hold launches until the test lets them go.
import { ProviderError } from '../errors.js';
import {
  MACHINE_NAME_PREFIX,
  type Launched,
  type LaunchRequest,
  type Machine,
  type MachineInventory,
  type MachineProvider,
  type MachineState,
  type MachineTarget,
  type ReleaseRequest,
} from '../types.js';

export type FakeOperation = 'launch' | 'release' | 'list' | 'get';

export interface FakeMachine extends Machine {
  target: MachineTarget;
}

export interface FakeProviderOptions {
  /** list shows machines whose name starts with this; MACHINE_NAME_PREFIX unless set. */
  namePrefix?: string;
  /** The target a launched machine gets; an SSH target with a host key unless set. */
  target?: (req: LaunchRequest) => MachineTarget;
}

/** What the fake hands release: enough to find the machine again. */
interface FakeState {
  id: string;
  name: string;
}

export const FAKE_HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyOfAMachineMadeByTheFakeProvider';

/** Holds launches until the test lets them through. */
export class LaunchGate {
  private readonly held: { pass: () => void }[] = [];
  private readonly watchers: { count: number; resolve: () => void }[] = [];
  private opened = false;

  /** How many launches wait at the gate now. */
  get waiting(): number {
    return this.held.length;
  }

  /** Resolves once at least `count` launches wait at the gate. */
  whenWaiting(count = 1): Promise<void> {
    if (this.held.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.watchers.push({ count, resolve }));
  }

  /** Lets the launch that has waited longest through; false when none waits. */
  letOneThrough(): boolean {
    const first = this.held.shift();
    first?.pass();
    return first !== undefined;
  }

  /** Lets every waiting launch and every later one through. */
  open(): void {
    this.opened = true;
    while (this.letOneThrough());
  }

  /** Waits until the test lets this launch through; a cancelled launch stops waiting with a Timeout. */
  pass(machineName: string, signal: AbortSignal): Promise<void> {
    if (this.opened) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const entry = {
        pass: () => {
          signal.removeEventListener('abort', cancel);
          resolve();
        },
      };
      const cancel = () => {
        this.held.splice(this.held.indexOf(entry), 1);
        reject(new ProviderError('Timeout', `launch of ${machineName} was cancelled while held`, { state: '' }));
      };
      if (signal.aborted) return cancel();
      signal.addEventListener('abort', cancel, { once: true });
      this.held.push(entry);
      for (const w of this.watchers.filter((x) => this.held.length >= x.count)) {
        this.watchers.splice(this.watchers.indexOf(w), 1);
        w.resolve();
      }
    });
  }
}

export class FakeProvider implements MachineProvider, MachineInventory {
  readonly launchCalls: LaunchRequest[] = [];
  readonly releaseCalls: ReleaseRequest[] = [];
  readonly getCalls: string[] = [];
  listCalls = 0;
  /** The machines that exist, by name. */
  readonly machines = new Map<string, FakeMachine>();
  private readonly nextErrors = new Map<FakeOperation, ProviderError[]>();
  private gate: LaunchGate | undefined;
  private lastID = 0;

  constructor(private readonly opts: FakeProviderOptions = {}) {}

  /** The next calls of `operation` fail with these errors, one call each, in order. */
  failNext(operation: FakeOperation, ...errors: ProviderError[]): void {
    this.nextErrors.set(operation, [...(this.nextErrors.get(operation) ?? []), ...errors]);
  }

  /** From now on launches wait at the returned gate until the test lets them through. */
  holdLaunches(): LaunchGate {
    this.gate = new LaunchGate();
    return this.gate;
  }

  /** Puts a machine in place as if something else had launched it (an orphan, say). */
  add(name: string, state: MachineState = 'Running'): FakeMachine {
    const machine: FakeMachine = { name, id: `fake-${++this.lastID}`, state, providerStatus: state.toLowerCase(), target: { ssh: { host: `${name}.fake`, port: 22, hostKey: FAKE_HOST_KEY } } };
    this.machines.set(name, machine);
    return machine;
  }

  async launch(req: LaunchRequest): Promise<Launched> {
    this.launchCalls.push(req);
    await this.gate?.pass(req.machineName, req.signal);
    this.throwNext('launch');
    // Launching a name that exists adopts that machine, as a provider that looks its machines up by name does.
    const machine = this.machines.get(req.machineName) ?? this.add(req.machineName);
    if (this.opts.target) machine.target = this.opts.target(req);
    req.onProgress(`fake machine ${machine.id} is ${machine.providerStatus}`);
    const state: FakeState = { id: machine.id, name: machine.name };
    return { target: machine.target, state: JSON.stringify(state) };
  }

  async release(req: ReleaseRequest): Promise<void> {
    this.releaseCalls.push(req);
    this.throwNext('release');
    const name = parseState(req.state)?.name ?? req.machineName;
    this.machines.delete(name);
  }

  async list(): Promise<Machine[]> {
    this.listCalls++;
    this.throwNext('list');
    const prefix = this.opts.namePrefix ?? MACHINE_NAME_PREFIX;
    return [...this.machines.values()].filter((m) => m.name.startsWith(prefix)).map(machineOnly);
  }

  async get(machineName: string): Promise<Machine> {
    this.getCalls.push(machineName);
    this.throwNext('get');
    const machine = this.machines.get(machineName);
    if (!machine) throw new ProviderError('NotFound', `the fake provider has no machine named ${machineName}`);
    return machineOnly(machine);
  }

  private throwNext(operation: FakeOperation): void {
    const err = this.nextErrors.get(operation)?.shift();
    if (err) throw err;
  }
}

function machineOnly({ name, id, state, providerStatus }: FakeMachine): Machine {
  return { name, id, state, providerStatus };
}

function parseState(raw: string): FakeState | undefined {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw) as FakeState;
  } catch {
    return undefined;
  }
}
