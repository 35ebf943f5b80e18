// What the Lease reconciler needs from the outside world, in its own terms:
// rent a machine, make it ready (agent, keys, facts), check it, release it.
// The implementation (controllers/lease/machine-driver.ts) combines a provider
// with the SSH agent; tests of the reconciler can give it a fake.
import type { BusyKind, Lease, LeaseStatus } from '../../src/api/index.js';
import type { WorkSeen } from './policy/busy.js';

export type Facts = NonNullable<LeaseStatus['facts']>;
export type Endpoint = NonNullable<LeaseStatus['machine']>;

export type AcquireResult =
  | { kind: 'launched'; state: string; machine: Endpoint }
  | { kind: 'failed'; reason: string; message: string; state?: string; /** The provider refused before asking for a machine: none exists. */ nothingRented?: boolean };

export type MachineCheck =
  | {
      kind: 'ok';
      facts: Facts;
      /** Jobs started through leasehold-run that are running. */
      busy: number;
      keysHash: string;
      machine: Endpoint;
      /** Everything the probe counted; absent, only the jobs in busy are known. */
      usage?: WorkSeen;
      /** The Offer's spec.busyWhen as the check found it; absent when the Offer is gone. */
      busyWhen?: BusyKind[];
    }
  | { kind: 'unreachable'; message: string }
  | { kind: 'mismatch'; reason: 'HostKeyMismatch' | 'FactsMismatch' | 'UnsupportedTarget'; message: string };

export interface LeaseDriver {
  /** Runs the provider's acquire for the launch recorded in status; `signal` withdraws it. Never throws. */
  acquire(lease: Lease, onProgress: (line: string) => void, signal: AbortSignal): Promise<AcquireResult>;
  /** Connects with the pinned host key, installs the agent and device keys, measures facts against the offer's claim. */
  prepare(lease: Lease, signal: AbortSignal): Promise<MachineCheck>;
  /** Probes a ready machine: reachable, facts unchanged, busy; re-syncs device keys when spec.sshKeys changed. */
  check(lease: Lease, signal: AbortSignal): Promise<MachineCheck>;
  /** Resolves only once the provider confirms the machine is gone. */
  release(lease: Lease, signal: AbortSignal): Promise<void>;
}
