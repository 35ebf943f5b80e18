// What one provider change of a check runs with, and what it hands back:
// the contract between the check (check.ts), the change calls (changes.ts)
// and the runner delivery (deliver.ts), below all three so that none of
// them imports another for its types.
import type { Receipt, RunnerHost, RunnerTarget } from '../../../src/api/index.js';
import type { Observation } from '../observation.js';
import type { PlanEvent } from '../policy/plan.js';
import type { DeregisterOutcome } from '../policy/scaledown.js';
import type { DurabilityGuard } from './durability.js';
import type { HostAccess } from './hostssh.js';
import type { TargetClients } from './providers.js';

export interface ChangeContext {
  target: RunnerTarget;
  clients: TargetClients;
  observation: Observation;
  installationID: string;
  host: HostAccess;
  guard: DurabilityGuard;
  signal?: AbortSignal | undefined;
  now: () => number;
  /** Whether one more host at this price fits the daily budget. */
  affordable(pricePerHour: number): boolean;
  /** Writes a new Intended receipt, and where its host now goes; false when status is no longer durable. */
  record(receipt: Receipt, host?: Partial<RunnerHost>): Promise<boolean>;
  /** Settles a receipt Done or Failed; false when status is no longer durable. */
  settle(id: string, phase: 'Done' | 'Failed', message: string): Promise<boolean>;
  /** GitHub refused a runner config for group `id` as not found: the id kept for spec.github.runnerGroup is stale. */
  runnerGroupGone?(id: number): void;
  /** The first wait before an insert Compute Engine throttled is sent again, doubling each time (default 1000; tests shorten it). */
  throttleBackoffMs?: number;
}

export interface ChangeOutcome {
  ok: boolean;
  /** How the receipt ends; absent: it stays Intended (a VM booting, an answer lost) or was settled already. */
  phase?: 'Done' | 'Failed' | undefined;
  /** The receipt the outcome belongs to (a launch may have moved to a new one). */
  receiptID: string;
  message: string;
  event: PlanEvent;
  /** A Deregister's answer, for the host's next state. */
  deregistered?: DeregisterOutcome;
  /** The host has its runner config (written now, or found there): nothing more is delivered to it under this receipt. */
  configOnHost?: boolean;
  /** The host's runner ran and left before any check saw it online: the host has finished, and drains. */
  runnerLeft?: boolean;
  /** The check ends after this change, with Ready=False for this reason (a launch an organisation policy refused). */
  endsCheck?: { reason: string; message: string };
}
