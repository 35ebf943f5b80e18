// Whether a Lease's latest check failed, apart from the state machine: the
// CLI asks it of every Lease it might run on, and must not load XState to.
import type { Lease } from './lease.js';

/** Why the latest check of a Ready or Idle machine failed; the Lease's reason while it does. */
export const CHECK_FAILURES = ['MachineUnreachable', 'FactsMismatch'] as const;
export type CheckFailure = (typeof CHECK_FAILURES)[number];

export function isCheckFailure(reason: string | undefined): reason is CheckFailure {
  return (CHECK_FAILURES as readonly string[]).includes(reason ?? '');
}

/**
 * Why the Lease's latest idle check failed, while it holds a machine: such
 * a Lease is neither handed out nor run on by name until a check succeeds.
 */
export function failedCheckOf(lease: Lease): { reason: CheckFailure; message: string } | undefined {
  const st = lease.status;
  if (st?.phase !== 'Ready' && st?.phase !== 'Idle') return undefined;
  const ready = st.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'False' || !isCheckFailure(ready.reason)) return undefined;
  return { reason: ready.reason, message: ready.message ?? '' };
}
