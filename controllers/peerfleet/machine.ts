// One lendable node of one PeerFleet as a state table. The machine is pure:
// the reconciler restores it from status.hosts[], turns what it observed on
// the node into one event, and reads back the next state and the effects it
// planned; effects run only after the new status is written. While a mirror
// runs, the node is Lending or Draining, and only a drain, another claim
// (Lending only) or the end of the session moves it: Draining never claims,
// and nothing here ever stops a running mirror.
import { assign, setup, transition, type SnapshotFrom } from 'xstate';
import { HOST_STATES, type PeerHostState } from '../../src/api/index.js';
import type { DrainReason } from './policy/drain.js';

export { HOST_STATES, type PeerHostState };

export interface HostContext {
  /** Machine-readable reason for the current state (an event reason). */
  reason: string;
  /** What a user should read: why the node is where it is. */
  message: string;
  /** Why the session drains, while it does. */
  drainReason?: DrainReason | undefined;
}

/**
 * BUSY, IDLE, AVAILABLE and UNLISTED describe the node when none of its
 * mirrors runs; from Lending or Draining they end the session.
 */
export type HostEvent =
  | { type: 'BUSY'; message: string }
  | { type: 'IDLE'; message: string }
  | { type: 'AVAILABLE'; message: string }
  | { type: 'UNLISTED'; reason: 'Unlisted' | 'NodeUnlisted' | 'Deleted'; message: string }
  | { type: 'CLAIM'; job: string; message: string }
  | { type: 'DRAIN'; reason: DrainReason; message: string };

/** Effects the reconciler runs after it has written the status the transition produced. */
export const HOST_EFFECTS = ['announce', 'startSession', 'claim', 'endSession'] as const;
export type HostEffect = (typeof HOST_EFFECTS)[number];

const REASONS: Record<HostEvent['type'], string> = {
  BUSY: 'OurWork',
  IDLE: 'Idle',
  AVAILABLE: 'Available',
  UNLISTED: 'Unlisted',
  CLAIM: 'Claimed',
  DRAIN: 'Draining',
};

type ActionName = 'note' | 'recordDrain' | 'clearDrain' | HostEffect;
type Edge = { target: PeerHostState; actions: ActionName[] };

/** A change the node's state shows: announced. */
const observed = (target: PeerHostState, effects: HostEffect[] = ['announce']): Edge => ({ target, actions: ['note', ...effects] });
/** The same state seen again: only the message may change. */
const same = (target: PeerHostState): Edge => ({ target, actions: ['note'] });
/** The last mirror finished: the session ends where the node now is. */
const endOn = (target: PeerHostState): Edge => ({ target, actions: ['note', 'clearDrain', 'announce', 'endSession'] });

export const hostMachine = setup({
  types: { context: {} as HostContext, events: {} as HostEvent },
  actions: {
    note: assign(({ event }) => ({ message: event.message, reason: 'reason' in event ? event.reason : REASONS[event.type] })),
    recordDrain: assign(({ event }) => ({ drainReason: event.type === 'DRAIN' ? event.reason : undefined })),
    clearDrain: assign({ drainReason: undefined }),
    announce: () => {},
    startSession: () => {},
    claim: () => {},
    endSession: () => {},
  },
}).createMachine({
  id: 'peerHost',
  initial: 'Busy',
  context: { reason: 'Observed', message: '' },
  states: {
    Busy: {
      on: { BUSY: same('Busy'), IDLE: observed('Waiting'), AVAILABLE: observed('Available'), UNLISTED: observed('Unlisted') },
    },
    Waiting: {
      on: { BUSY: observed('Busy'), IDLE: same('Waiting'), AVAILABLE: observed('Available'), UNLISTED: observed('Unlisted') },
    },
    Available: {
      on: {
        BUSY: observed('Busy'),
        IDLE: observed('Waiting'),
        AVAILABLE: same('Available'),
        UNLISTED: observed('Unlisted'),
        // The session is recorded before the claim: a restart finds it and the claim by label.
        CLAIM: observed('Lending', ['announce', 'startSession', 'claim']),
      },
    },
    Lending: {
      on: {
        CLAIM: { target: 'Lending', actions: ['note', 'claim'] },
        DRAIN: { target: 'Draining', actions: ['note', 'recordDrain', 'announce'] },
        BUSY: endOn('Busy'),
        IDLE: endOn('Waiting'),
        AVAILABLE: endOn('Available'),
        UNLISTED: endOn('Unlisted'),
      },
    },
    Draining: {
      on: {
        DRAIN: { target: 'Draining', actions: ['note', 'recordDrain'] },
        BUSY: endOn('Busy'),
        IDLE: endOn('Waiting'),
        AVAILABLE: endOn('Available'),
        UNLISTED: endOn('Unlisted'),
      },
    },
    Unlisted: {
      on: { BUSY: observed('Busy'), IDLE: observed('Waiting'), AVAILABLE: observed('Available'), UNLISTED: same('Unlisted') },
    },
  },
});

export type HostSnapshot = SnapshotFrom<typeof hostMachine>;

/** Restores the machine at a state recorded in status. */
export function restore(state: PeerHostState | undefined, context: Partial<HostContext> = {}): HostSnapshot {
  return hostMachine.resolveState({ value: state ?? 'Busy', context: { reason: 'Observed', message: '', ...context } });
}

export interface HostStep {
  state: PeerHostState;
  context: HostContext;
  effects: HostEffect[];
  /** False when the event is not accepted in this state (nothing changes). */
  accepted: boolean;
}

/** The pure transition: no I/O, no clock. */
export function step(snapshot: HostSnapshot, event: HostEvent): HostStep {
  const [next, actions] = transition(hostMachine, snapshot, event);
  const effects = actions.map((a) => a.type).filter((t): t is HostEffect => (HOST_EFFECTS as readonly string[]).includes(t));
  return { state: next.value as PeerHostState, context: next.context, effects, accepted: snapshot.can(event) };
}
