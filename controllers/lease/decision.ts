// The decision each phase returns to the reconciler from its look at the world. A phase is
// a pure function of (Lease, effect state, wake-up, now, settings): it decides;
// the reconciler writes and starts effects.
import type { NamespaceLeaseLimits } from './policy/limits.js';
import type { Lease, LeaseStatus } from '../../src/api/index.js';
import type { EffectState } from '../../src/kube/effects.js';
import type { AcquireResult, MachineCheck } from './driver.js';
import type { LeaseEvent } from './machine.js';

export type LeaseEffectKind = 'acquire' | 'prepare' | 'check' | 'release';

export type LeaseEffectResult =
  | { kind: 'acquire'; result: AcquireResult; /** Whether the effect wrote a launched machine to status itself. */ recorded: boolean }
  | { kind: 'prepare'; check: MachineCheck; /** When the probe answered. */ at: number }
  | { kind: 'check'; check: MachineCheck; at: number }
  | { kind: 'release'; error?: string; at: number };

/** When a phase next wants to act on its own (probe, retry), and what it saw of the Lease then. */
export interface Wake {
  at: number;
  /** For checks: generation and activity annotation; a change means look now. */
  inputs?: string;
}

export interface LeaseSettings {
  /** This installation's ID (src/kube/installation.ts): machine names carry it. */
  installationID: string;
  /** Active leases across all namespaces. */
  maxLeases: number;
  /** Active leases of one namespace; 0 or absent: no limit. */
  maxLeasesPerNamespace?: number;
  /** The admin's caps per namespace (Helm leaseLimits), whatever Offers and Leases say. */
  namespaceLeaseLimits?: NamespaceLeaseLimits | undefined;
  /** Acquire plus agent readiness must finish within this. */
  acquireTimeoutMs: number;
  /** How often Ready and Idle machines are probed and failed releases retried. */
  checkIntervalMs: number;
  historyLimit?: number;
  historyMaxAgeMs?: number;
}

export interface PhaseInput {
  lease: Lease;
  now: number;
  settings: LeaseSettings;
  /** The Lease's effect: running, or finished with a result not yet used. */
  effect?: EffectState<LeaseEffectResult> | undefined;
  wake?: Wake | undefined;
}

export interface Decision {
  event?: LeaseEvent;
  /** Status to record, with the event's transition or alone. */
  status?: Partial<LeaseStatus>;
  requeueAfter?: number;
  /** An effect to start (there is no event: the effect's result will be one). */
  start?: LeaseEffectKind;
  /** The finished effect's result was used; drop it once what it led to is written. */
  consumed?: boolean;
  /** The running effect is no longer wanted (e.g. a probe of a machine being released). */
  cancel?: boolean;
  /** The next wake-up; null clears it. */
  wake?: Wake | null;
  /** A Warning event to record about what the Lease asked (e.g. an activity time in the future). */
  notice?: { reason: string; message: string };
}

/** The finished effect's result when it is of `kind`. */
export function doneOf<K extends LeaseEffectResult['kind']>(input: PhaseInput, ...kinds: K[]): Extract<LeaseEffectResult, { kind: K }> | undefined {
  const e = input.effect;
  if (e?.state !== 'done') return undefined;
  return (kinds as string[]).includes(e.result.kind) ? (e.result as Extract<LeaseEffectResult, { kind: K }>) : undefined;
}

/** Whether the wake-up says to wait: not due yet, and (for checks) nothing it depends on changed. */
export function waiting(wake: Wake | undefined, now: number, inputs?: string): boolean {
  return wake !== undefined && now < wake.at && (wake.inputs === undefined || wake.inputs === inputs);
}
