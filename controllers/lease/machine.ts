// The Lease lifecycle as a state table. The machine is pure: the reconciler
// restores it from status, feeds it one observation as an event, and reads
// back the next phase and the effects it planned (the machine's actions).
// Effects run only after the reconciler has written the new status.
import { setup, assign, transition, type SnapshotFrom } from 'xstate';
import { isCheckFailure, type CheckFailure } from '../../src/api/check-failure.js';

export const PHASES = ['Pending', 'Launching', 'Ready', 'Idle', 'Releasing', 'Released', 'Failed'] as const;
export type Phase = (typeof PHASES)[number];

export interface LeaseContext {
  /** Machine-readable reason for the current phase (a condition reason). */
  reason: string;
  /** What a user should read: why the Lease is where it is and what to change. */
  message: string;
  /** Launch attempt counter; a new attempt is a new launch record. */
  attempt: number;
  /** Set when the Lease is on its way to Failed: the release that ends it must still run. */
  failure?: { reason: string; message: string };
}

export type LeaseEvent =
  | { type: 'UNSCHEDULABLE'; reason: 'NoMatchingOffer' | 'MaxLeases' | 'InvalidSpec' | 'NamespaceNotAllowed' | 'MaxLeasesPerNamespace' | 'OverPriceCap' | 'NamespacePriceCap'; message: string }
  | { type: 'OFFER_CHOSEN'; offer: string; message: string }
  /** Refused outright, nothing rented (e.g. no capacity anywhere wanted): the Lease ends Failed without waiting. */
  | { type: 'REFUSED'; reason: string; message: string }
  | { type: 'MACHINE_READY'; message: string }
  | { type: 'LAUNCH_FAILED'; reason: string; message: string }
  /** The provider refused the launch before asking for a machine (e.g. the price cap): back to Pending, nothing to release. */
  | { type: 'LAUNCH_REFUSED'; reason: 'OverPriceCap'; message: string }
  | { type: 'BUSY'; message: string }
  | { type: 'IDLE'; message: string }
  /** The latest idle check could not reach the machine, or found it no longer matching: not handed out, counting down to release. */
  | { type: 'CHECK_FAILED'; reason: CheckFailure; message: string }
  | { type: 'EXPIRED'; reason: 'IdleTimeout' | 'MaxLifetime' | 'Unreachable'; message: string }
  | { type: 'DELETE_REQUESTED'; message: string }
  | { type: 'RELEASE_FAILED'; message: string }
  | { type: 'RELEASE_CONFIRMED'; message: string };

export { CHECK_FAILURES, isCheckFailure, type CheckFailure } from '../../src/api/check-failure.js';

/** Effects the reconciler runs after it has written the status the transition produced. */
export const EFFECTS = ['announce', 'acquire', 'release', 'retryRelease', 'unclaim', 'finish'] as const;
export type Effect = (typeof EFFECTS)[number];

function reasonFor(type: LeaseEvent['type']): string {
  switch (type) {
    case 'OFFER_CHOSEN':
      return 'Launching';
    case 'MACHINE_READY':
      return 'MachineReady';
    case 'BUSY':
      return 'Busy';
    case 'IDLE':
      return 'Idle';
    case 'DELETE_REQUESTED':
      return 'Deleted';
    case 'RELEASE_FAILED':
      return 'ReleaseFailed';
    case 'RELEASE_CONFIRMED':
      return 'Released';
    default:
      return type;
  }
}

export const leaseMachine = setup({
  types: {
    context: {} as LeaseContext,
    events: {} as LeaseEvent,
  },
  actions: {
    note: assign(({ event }) => ({
      message: event.message,
      reason: 'reason' in event ? event.reason : reasonFor(event.type),
    })),
    recordFailure: assign(({ event }) => ({
      failure: 'reason' in event ? { reason: event.reason, message: event.message } : undefined,
    })),
    reportFailure: assign(({ context }) => ({
      reason: context.failure?.reason ?? context.reason,
      message: context.failure?.message ?? context.message,
    })),
    nextAttempt: assign(({ context }) => ({ attempt: context.attempt + 1 })),
    announce: () => {},
    acquire: () => {},
    release: () => {},
    retryRelease: () => {},
    unclaim: () => {},
    finish: () => {},
  },
  guards: {
    failed: ({ context }) => context.failure !== undefined,
    checkFailing: ({ context }) => isCheckFailure(context.reason),
    sameCheckFailure: ({ context, event }) => event.type === 'CHECK_FAILED' && context.reason === event.reason,
  },
}).createMachine({
  id: 'lease',
  initial: 'Pending',
  context: { reason: 'Created', message: '', attempt: 0 },
  states: {
    Pending: {
      on: {
        UNSCHEDULABLE: { target: 'Pending', actions: ['note', 'announce'] },
        OFFER_CHOSEN: { target: 'Launching', actions: ['note', 'nextAttempt', 'announce', 'acquire'] },
        REFUSED: { target: 'Failed', actions: ['note', 'recordFailure', 'announce', 'finish'] },
        DELETE_REQUESTED: { target: 'Released', actions: ['note', 'announce', 'finish'] },
      },
    },
    Launching: {
      on: {
        MACHINE_READY: { target: 'Ready', actions: ['note', 'announce'] },
        LAUNCH_REFUSED: { target: 'Pending', actions: ['note', 'announce', 'unclaim'] },
        // A failed launch may still have created a machine: release it before Failed.
        LAUNCH_FAILED: { target: 'Releasing', actions: ['note', 'recordFailure', 'announce', 'release'] },
        DELETE_REQUESTED: { target: 'Releasing', actions: ['note', 'announce', 'release'] },
      },
    },
    Ready: {
      on: {
        IDLE: { target: 'Idle', actions: ['note', 'announce'] },
        BUSY: { target: 'Ready', actions: ['note'] },
        // Idle, not Ready: the Lease counts down to its release from the activity last recorded.
        CHECK_FAILED: { target: 'Idle', actions: ['note', 'announce'] },
        EXPIRED: { target: 'Releasing', actions: ['note', 'announce', 'release'] },
        LAUNCH_FAILED: { target: 'Releasing', actions: ['note', 'recordFailure', 'announce', 'release'] },
        DELETE_REQUESTED: { target: 'Releasing', actions: ['note', 'announce', 'release'] },
      },
    },
    Idle: {
      on: {
        BUSY: { target: 'Ready', actions: ['note', 'announce'] },
        IDLE: [
          // A check that succeeds after a failed one is news: the Lease may be handed out again.
          { guard: 'checkFailing', target: 'Idle', actions: ['note', 'announce'] },
          { target: 'Idle', actions: ['note'] },
        ],
        CHECK_FAILED: [
          { guard: 'sameCheckFailure', target: 'Idle', actions: ['note'] },
          { target: 'Idle', actions: ['note', 'announce'] },
        ],
        EXPIRED: { target: 'Releasing', actions: ['note', 'announce', 'release'] },
        LAUNCH_FAILED: { target: 'Releasing', actions: ['note', 'recordFailure', 'announce', 'release'] },
        DELETE_REQUESTED: { target: 'Releasing', actions: ['note', 'announce', 'release'] },
      },
    },
    Releasing: {
      on: {
        RELEASE_FAILED: { target: 'Releasing', actions: ['note', 'announce', 'retryRelease'] },
        RELEASE_CONFIRMED: [
          { guard: 'failed', target: 'Failed', actions: ['reportFailure', 'announce', 'finish'] },
          { target: 'Released', actions: ['note', 'announce', 'finish'] },
        ],
      },
    },
    Released: { type: 'final' },
    Failed: { type: 'final' },
  },
});

export type LeaseSnapshot = SnapshotFrom<typeof leaseMachine>;

/** Restores the machine at a phase recorded in status. */
export function restore(phase: Phase | undefined, context: Partial<LeaseContext> = {}): LeaseSnapshot {
  return leaseMachine.resolveState({
    value: phase ?? 'Pending',
    context: { reason: 'Created', message: '', attempt: 0, ...context },
  });
}

export interface Step {
  phase: Phase;
  context: LeaseContext;
  effects: Effect[];
  /** False when the event is not accepted in this phase (nothing changes). */
  accepted: boolean;
}

/** The pure transition: no I/O, no clock. */
export function step(snapshot: LeaseSnapshot, event: LeaseEvent): Step {
  const [next, actions] = transition(leaseMachine, snapshot, event);
  const effects = actions
    .map((a) => a.type)
    .filter((t): t is Effect => (EFFECTS as readonly string[]).includes(t));
  const accepted = snapshot.can(event);
  return { phase: next.value as Phase, context: next.context, effects, accepted };
}
