// The one interface RunnerTarget's controller has to Compute Engine: spot (or
// standard) VMs that boot with the controller's SSH key, are found again by
// labels, pinned by the host keys their guest agent publishes, and deleted.
// Typed errors in errors.ts; nothing HTTP leaks through.

export interface GceInstanceSpec {
  zone: string;
  /** RFC 1035: lowercase letters, digits and -, at most 63, starting with a letter. */
  name: string;
  /** "e2-standard-4". */
  machineType: string;
  /** SPOT with instanceTerminationAction DELETE; false: a STANDARD VM (fallbackToStandard). */
  spot: boolean;
  /** Boot disk image: "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64". */
  image: string;
  diskSizeGb?: number;
  /** Default "global/networks/default". */
  network?: string;
  subnetwork?: string;
  /**
   * Whether the VM gets an external address (an ONE_TO_ONE_NAT access
   * config). Default true; false for projects whose organisation policy
   * (constraints/compute.vmExternalIpAccess) forbids one: the VM is then
   * reached at its internal address, from inside its VPC.
   */
  externalIP?: boolean;
  /** The host service account; never the project's default compute account. Scopes: logging.write and monitoring.write only. */
  serviceAccountEmail: string;
  /** The Unix user the controller's key logs in as, and that key ("ssh-ed25519 AAAA…"). */
  sshUser: string;
  sshPublicKey: string;
  labels: Record<string, string>;
  /** A UUID: the same one sent again yields the same Operation and no second VM. */
  requestId: string;
  /** scheduling.maxRunDuration with instanceTerminationAction DELETE: Compute Engine deletes the VM this long after it starts running. */
  maxRunDurationSeconds?: number;
}

export type GceInstanceStatus = 'PENDING' | 'PROVISIONING' | 'STAGING' | 'RUNNING' | 'STOPPING' | 'PENDING_STOP' | 'STOPPED' | 'SUSPENDING' | 'SUSPENDED' | 'REPAIRING' | 'TERMINATED' | 'DEPROVISIONING' | string;

export interface GceInstance {
  id: string;
  name: string;
  zone: string;
  machineType: string;
  status: GceInstanceStatus;
  labels: Record<string, string>;
  spot: boolean;
  /** The external address (natIP), else the internal one; undefined while none is assigned. */
  address: string | undefined;
  /** The internal address (networkIP of the first interface). */
  internalAddress?: string | undefined;
  /** The external address (natIP of its access config), if it has one. */
  externalAddress?: string | undefined;
  creationTimestamp: string | undefined;
}

export interface GceOperation {
  name: string;
  zone: string;
  /** "insert", "delete", "compute.instances.preempted". */
  operationType: string;
  status: 'PENDING' | 'RUNNING' | 'DONE';
  /** The instance's name, from targetLink. */
  target: string;
  /** Set by insert, so that a failed Operation's CapacityExhausted or QuotaExceeded names the machine type. */
  machineType?: string;
}

export interface InstanceFilter {
  /** Every one of these labels, with these values. */
  labels?: Record<string, string>;
  namePrefix?: string;
}

/** What instances.aggregatedList gave: every zone's instances, and the zones it could not read this time. */
export interface InstanceListing {
  instances: GceInstance[];
  /** Zones whose instances may be missing from `instances` (a warning other than an empty zone). */
  unreachable: { zone: string; message: string }[];
}

export interface ComputeInstances {
  /** Sends the insert; a refusal the API answers at once (capacity, quota) throws CapacityExhausted or QuotaExceeded. */
  insert(spec: GceInstanceSpec, signal?: AbortSignal): Promise<GceOperation>;
  /** Resolves once the Operation is DONE; a failed Operation throws its typed error (CapacityExhausted, QuotaExceeded, GceApiError). */
  waitOperation(op: Pick<GceOperation, 'zone' | 'name' | 'machineType'>, signal?: AbortSignal): Promise<GceOperation>;
  /** The Operation now; a DONE one that failed throws as waitOperation does. */
  getOperation(zone: string, name: string, signal?: AbortSignal): Promise<GceOperation>;
  /** A ProviderError of kind NotFound when there is no such instance. */
  get(zone: string, name: string, signal?: AbortSignal): Promise<GceInstance>;
  /** Every instance of the zone matching the filter (all pages). */
  list(zone: string, filter: InstanceFilter, signal?: AbortSignal): Promise<GceInstance[]>;
  /** Every instance of every zone matching the filter: one instances.aggregatedList (all pages); zones it could not read are named in `unreachable`. */
  listAll(filter: InstanceFilter, signal?: AbortSignal): Promise<InstanceListing>;
  delete(zone: string, name: string, requestId: string, signal?: AbortSignal): Promise<GceOperation>;
  /**
   * The host keys the instance's guest agent published under guest
   * attributes `hostkeys/` ("ssh-ed25519 AAAA…" lines), as `gcloud compute
   * ssh` reads them; NotFound until the guest has published them.
   */
  hostKeys(zone: string, name: string, signal?: AbortSignal): Promise<string[]>;
}
