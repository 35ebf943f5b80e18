// The interfaces a source of machines implements (command offers, Lambda
// Cloud), modelled on Karpenter's cloudprovider: launch and release, which
// every provider has, and listing by name, which only a provider with an API
// to ask has; typed errors in errors.ts, and nothing a controller would need
// to know about HTTP or subprocesses. The controller names the machine and
// records the attempt before it calls launch, so a provider can always find
// its machine again by that name.

/** How the controller reaches a machine over SSH. */
export interface SshTarget {
  host: string;
  port: number;
  user?: string;
  /** OpenSSH public key line ("ssh-ed25519 AAAA…"): when set, only this host key is accepted. */
  hostKey?: string;
}

/** Where a launched machine can be reached: exactly one of ssh or url is set. */
export interface MachineTarget {
  ssh?: SshTarget;
  url?: string;
}

export interface LaunchRequest {
  leaseID: string;
  /** The name the machine gets, derived from the lease, so it can be found again. */
  machineName: string;
  offer: string;
  /** The Lease's `where`, in its raw form. */
  where: string;
  /** The controller's SSH public key; the machine must admit it. */
  controllerPublicKey: string;
  signal: AbortSignal;
  /** Progress a waiting user may see, one sanitized line at a time. */
  onProgress(line: string): void;
}

export interface Launched {
  target: MachineTarget;
  /** Opaque JSON string kept in Lease status and handed to release. */
  state: string;
}

export interface ReleaseRequest {
  leaseID: string;
  machineName: string;
  offer: string;
  /** What launch returned, or "" when launch never returned anything. */
  state: string;
  /** Whether an acquire began for this machine: with no state, a launch request may have gone out unrecorded. */
  acquireStarted?: boolean;
  /**
   * When an acquire began, the latest a launch request for it can have been
   * sent (ms since the epoch): its acquire was cut off by then. Absent: now.
   */
  lastLaunchBy?: number;
  signal: AbortSignal;
}

export interface MachineProvider {
  /**
   * Creates the machine and resolves once it exists. On failure it throws a
   * ProviderError; a machine may exist all the same, so the caller releases
   * with the error's `state`.
   */
  launch(req: LaunchRequest): Promise<Launched>;
  /** Resolves only once the provider confirms the machine is gone. Safe to call twice, and with empty state. */
  release(req: ReleaseRequest): Promise<void>;
}

/** Every machine Leasehold launches is named with this prefix (then the installation ID and the lease ID; before installation IDs, the lease ID alone). */
export const MACHINE_NAME_PREFIX = 'leasehold-';

/**
 * Where a machine is in its life. A machine the provider reports as gone for
 * good (Lambda's "terminated") is not listed at all; a status the code does
 * not know counts as Unhealthy, since the machine may exist and cost money.
 */
export type MachineState = 'Pending' | 'Running' | 'Unhealthy' | 'Terminating';

/** A machine as its provider lists it. */
export interface Machine {
  name: string;
  /** The provider's own ID for it. */
  id: string;
  state: MachineState;
  /** The provider's own word for the state ("booting", "active"), for messages. */
  providerStatus: string;
}

/**
 * What a provider with an API can also answer: which machines exist under
 * the controller's name prefix. A command offer has only acquire and release
 * commands, so it implements MachineProvider alone and the type system keeps
 * callers from listing through it.
 */
export interface MachineInventory {
  /** Every machine whose name starts with the provider's name prefix and that is not gone for good. */
  list(signal?: AbortSignal): Promise<Machine[]>;
  /** The machine of that name that is not gone for good; a ProviderError of kind NotFound when there is none. */
  get(machineName: string, signal?: AbortSignal): Promise<Machine>;
}

/** The prefix of every machine name one installation gives: `leasehold-<installation id>-`, then the lease ID. */
export function installationPrefix(installationID: string): string {
  return `${MACHINE_NAME_PREFIX}${installationID}-`;
}
