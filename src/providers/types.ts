// The one interface every source of machines implements (command offers,
// Lambda Cloud), modelled on Karpenter's cloudprovider: two verbs, typed
// errors, and nothing a controller would need to know about HTTP or
// subprocesses. The controller names the machine and records the attempt
// before it calls launch, so a provider can always find its machine again by
// that name.

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
