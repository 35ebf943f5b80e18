// What one check sees of the pool, in the controller's own terms: the
// reconciler fills it from Compute Engine, GitHub and SSH, and every policy
// beside this file reads it without I/O.
import type { PressureEvidence } from './pressure.js';

/** A workflow job of a followed repository. */
export interface WorkflowJob {
  id: number;
  /** owner/name */
  repository: string;
  status: 'queued' | 'in_progress' | 'completed';
  /** The workflow run it belongs to, and the run's attempt. */
  runId?: number | undefined;
  runAttempt?: number | undefined;
  /** The job's runs-on labels. */
  labels: readonly string[];
  /** The runner that took it, once in progress. */
  runnerName?: string | undefined;
}

/** A runner registration of the pool: isPoolRunner (naming.ts) filters the org's list. */
export interface PoolRunner {
  id: number;
  name: string;
  status: 'online' | 'offline';
  /** GitHub's busy flag: it lags 25-60 s behind a job's start and can read false mid-job. */
  busy: boolean;
  labels: readonly string[];
}

export const VM_STATUSES = ['PROVISIONING', 'STAGING', 'RUNNING', 'STOPPING', 'STOPPED', 'SUSPENDING', 'SUSPENDED', 'REPAIRING', 'TERMINATED'] as const;
export type VMStatus = (typeof VM_STATUSES)[number];

/** A Compute Engine instance labelled with the target. */
export interface PoolVM {
  name: string;
  zone: string;
  machineType: string;
  status: VMStatus;
  /** RFC 3339 */
  createdAt: string;
  provisioningModel: 'SPOT' | 'STANDARD';
  /** Where SSH reaches it, as the list gave it; absent before one is assigned. */
  address?: string | undefined;
}

/** What SSH found on a host. */
export interface HostProbe {
  /** A runner job process (Runner.Worker) runs: 'unknown' when the host could not be read. */
  job: 'running' | 'none' | 'unknown';
  pressure?: PressureEvidence | undefined;
}

export interface Observation {
  /** When the observation was taken, ms since the epoch. */
  at: number;
  jobs: readonly WorkflowJob[];
  runners: readonly PoolRunner[];
  vms: readonly PoolVM[];
  /** Per host name; hosts that were not probed are absent. */
  probes: ReadonlyMap<string, HostProbe>;
  /** The id of spec.github.runnerGroup, looked up once per check; absent when it could not be (a pool being deleted). */
  runnerGroupId?: number | undefined;
  /** Followed repositories GitHub answered 404 for (renamed, deleted, or out of the token's sight); their jobs are not in `jobs`. */
  missingRepositories?: readonly string[] | undefined;
}
