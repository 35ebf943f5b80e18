// One check of one RunnerTarget as a state table. The machine is pure: the
// reconciler feeds it what happened as events and runs the effects it
// plans (the machine's actions). A live check holds the target's
// coordination Lease from start to end, and each provider change is a
// Recording → Calling → Settling round: the receipt is written before the
// call, so no change is made that status does not show. A dry run takes no
// lease and never reaches Recording: it observes, plans, and writes the plan.
import { assign, setup, transition, type SnapshotFrom } from 'xstate';

export const CHECK_STATES = [
  'Idle',
  'Holding',
  'Observing',
  'WaitingForSample',
  'Planning',
  'Recording',
  'Calling',
  'Settling',
  'Done',
  'Held',
  'NotDurable',
  'DryRun',
  'Failed',
] as const;
export type CheckState = (typeof CHECK_STATES)[number];

/** Where a check ends; NotDurable and Failed end it in error. */
export const FINAL_CHECK_STATES = ['Done', 'Held', 'NotDurable', 'DryRun', 'Failed'] as const satisfies readonly CheckState[];

export interface CheckContext {
  dryRun: boolean;
  /** Provider changes the plan holds. */
  changes: number;
  /** Changes whose receipt has been settled. */
  done: number;
  /** Machine-readable reason of the last transition (a condition or event reason). */
  reason: string;
  message: string;
}

export type CheckEvent =
  | { type: 'START'; dryRun: boolean; message: string }
  | { type: 'LEASE_ACQUIRED'; message: string }
  | { type: 'LEASE_HELD'; holder: string; message: string }
  /** The lease could not be renewed, or another holder has it: stop acting at once. */
  | { type: 'LEASE_LOST'; message: string }
  | { type: 'SAMPLE_EARLY'; waitMs: number; message: string }
  | { type: 'SAMPLE_DUE'; message: string }
  | { type: 'OBSERVED'; message: string }
  | { type: 'PLANNED'; changes: number; message: string }
  | { type: 'INTENT_WRITTEN'; message: string }
  | { type: 'PROVIDER_ANSWERED'; ok: boolean; message: string }
  | { type: 'SETTLED'; message: string }
  /** A receipt write failed, conflicted or stayed unknown after a read-back. */
  | { type: 'WRITE_NOT_DURABLE'; reason: 'StatusWriteFailed' | 'StatusConflict' | 'StatusUnknown'; message: string }
  | { type: 'FAILED'; reason: string; message: string };

/** The reason a transition records when its event carries none. */
const REASONS: Record<CheckEvent['type'], string> = {
  START: 'CheckStarted',
  LEASE_ACQUIRED: 'LeaseAcquired',
  LEASE_HELD: 'HeldElsewhere',
  LEASE_LOST: 'LeaseLost',
  SAMPLE_EARLY: 'WaitingForSample',
  SAMPLE_DUE: 'SampleDue',
  OBSERVED: 'Observed',
  PLANNED: 'Planned',
  INTENT_WRITTEN: 'IntentRecorded',
  PROVIDER_ANSWERED: 'ProviderAnswered',
  SETTLED: 'ReceiptSettled',
  WRITE_NOT_DURABLE: 'NotDurable',
  FAILED: 'CheckFailed',
};

/** Effects the reconciler runs for a transition, in order. */
export const CHECK_EFFECTS = [
  'acquireLease',
  'observe',
  'waitForSample',
  'plan',
  'recordIntent',
  'callProvider',
  'settleReceipt',
  'writePlan',
  'writeStatus',
  'releaseLease',
  'announce',
] as const;
export type CheckEffect = (typeof CHECK_EFFECTS)[number];

type ActionName = 'note' | 'startCheck' | 'countChanges' | 'countDone' | CheckEffect;
const effects = (...names: ActionName[]) => names;

/** A lease that is lost stops the check where it is; nothing is released, since it is not ours any more. */
const lost = { guard: 'live' as const, target: 'Held' as const, actions: effects('note', 'announce') };
/** A failure ends the check; a live one lets go of its lease. */
const failed = [
  { guard: 'live' as const, target: 'Failed' as const, actions: effects('note', 'announce', 'releaseLease') },
  { target: 'Failed' as const, actions: effects('note', 'announce') },
];
const notDurable = { guard: 'live' as const, target: 'NotDurable' as const, actions: effects('note', 'announce', 'releaseLease') };

export const checkMachine = setup({
  types: { context: {} as CheckContext, events: {} as CheckEvent },
  actions: {
    note: assign(({ event }) => ({ message: event.message, reason: 'reason' in event ? event.reason : REASONS[event.type] })),
    startCheck: assign(({ event }) => ({ dryRun: event.type === 'START' && event.dryRun, changes: 0, done: 0 })),
    countChanges: assign(({ event }) => ({ changes: event.type === 'PLANNED' ? event.changes : 0, done: 0 })),
    countDone: assign(({ context }) => ({ done: context.done + 1 })),
    acquireLease: () => {},
    observe: () => {},
    waitForSample: () => {},
    plan: () => {},
    recordIntent: () => {},
    callProvider: () => {},
    settleReceipt: () => {},
    writePlan: () => {},
    writeStatus: () => {},
    releaseLease: () => {},
    announce: () => {},
  },
  guards: {
    dryRunStart: ({ event }) => event.type === 'START' && event.dryRun,
    dryRun: ({ context }) => context.dryRun,
    live: ({ context }) => !context.dryRun,
    nothingToChange: ({ event }) => event.type === 'PLANNED' && event.changes <= 0,
    moreToChangeLive: ({ context }) => !context.dryRun && context.done < context.changes,
  },
}).createMachine({
  id: 'runnerTargetCheck',
  initial: 'Idle',
  context: { dryRun: false, changes: 0, done: 0, reason: 'NotStarted', message: '' },
  states: {
    Idle: {
      on: {
        START: [
          // A dry run is read-only: no lease to hold, nothing to guard.
          { guard: 'dryRunStart', target: 'Observing', actions: effects('note', 'startCheck', 'observe') },
          { target: 'Holding', actions: effects('note', 'startCheck', 'acquireLease') },
        ],
      },
    },
    Holding: {
      on: {
        LEASE_ACQUIRED: { target: 'Observing', actions: effects('note', 'observe') },
        LEASE_HELD: { target: 'Held', actions: effects('note', 'announce') },
        FAILED: { target: 'Failed', actions: effects('note', 'announce') },
      },
    },
    Observing: {
      on: {
        OBSERVED: { target: 'Planning', actions: effects('note', 'plan') },
        SAMPLE_EARLY: { target: 'WaitingForSample', actions: effects('note', 'waitForSample') },
        LEASE_LOST: lost,
        FAILED: failed,
      },
    },
    WaitingForSample: {
      on: {
        // The runners are read again after the wait: the sample must describe the boundary, not the wait's start.
        SAMPLE_DUE: { target: 'Observing', actions: effects('note', 'observe') },
        LEASE_LOST: lost,
        FAILED: failed,
      },
    },
    Planning: {
      on: {
        PLANNED: [
          { guard: 'dryRun', target: 'DryRun', actions: effects('note', 'countChanges', 'writePlan', 'announce') },
          { guard: 'nothingToChange', target: 'Done', actions: effects('note', 'countChanges', 'writeStatus', 'releaseLease') },
          // Intent before effect: the first change's receipt is written before any provider call.
          { target: 'Recording', actions: effects('note', 'countChanges', 'recordIntent') },
        ],
        LEASE_LOST: lost,
        FAILED: failed,
      },
    },
    Recording: {
      on: {
        // A dry run never gets here; should it, it still never calls a provider.
        INTENT_WRITTEN: { guard: 'live', target: 'Calling', actions: effects('note', 'callProvider') },
        WRITE_NOT_DURABLE: notDurable,
        LEASE_LOST: lost,
        FAILED: failed,
      },
    },
    Calling: {
      on: {
        PROVIDER_ANSWERED: { guard: 'live', target: 'Settling', actions: effects('note', 'countDone', 'settleReceipt') },
        LEASE_LOST: lost,
      },
    },
    Settling: {
      on: {
        SETTLED: [
          { guard: 'moreToChangeLive', target: 'Recording', actions: effects('note', 'recordIntent') },
          { guard: 'live', target: 'Done', actions: effects('note', 'writeStatus', 'releaseLease') },
        ],
        WRITE_NOT_DURABLE: notDurable,
        LEASE_LOST: lost,
        FAILED: failed,
      },
    },
    Done: { type: 'final' },
    Held: { type: 'final' },
    NotDurable: { type: 'final' },
    DryRun: { type: 'final' },
    Failed: { type: 'final' },
  },
});

export type CheckSnapshot = SnapshotFrom<typeof checkMachine>;

/** The machine at a state, e.g. to continue a check from what the reconciler recorded. */
export function restore(state: CheckState = 'Idle', context: Partial<CheckContext> = {}): CheckSnapshot {
  return checkMachine.resolveState({ value: state, context: { dryRun: false, changes: 0, done: 0, reason: 'NotStarted', message: '', ...context } });
}

export interface CheckStep {
  state: CheckState;
  context: CheckContext;
  effects: CheckEffect[];
  /** False when the event is not accepted in this state (nothing changes). */
  accepted: boolean;
  /** The check is over. */
  final: boolean;
  /** The check is over in error (NotDurable, Failed). */
  error: boolean;
}

/** The pure transition: no I/O, no clock. */
export function step(snapshot: CheckSnapshot, event: CheckEvent): CheckStep {
  const [next, actions] = transition(checkMachine, snapshot, event);
  const planned = actions.map((a) => a.type).filter((t): t is CheckEffect => (CHECK_EFFECTS as readonly string[]).includes(t));
  const state = next.value as CheckState;
  return {
    state,
    context: next.context,
    effects: planned,
    accepted: snapshot.can(event),
    final: (FINAL_CHECK_STATES as readonly string[]).includes(state),
    error: state === 'NotDurable' || state === 'Failed',
  };
}
