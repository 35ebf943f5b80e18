import { describe, it, expect } from '@jest/globals';
import { getAdjacencyMap, getShortestPaths } from '@xstate/graph';
import { leaseMachine, restore, step, PHASES, type LeaseEvent, type Phase, type Effect } from './machine.js';

const sample: LeaseEvent[] = [
  { type: 'UNSCHEDULABLE', reason: 'NoMatchingOffer', message: 'no offer' },
  { type: 'OFFER_CHOSEN', offer: 'box', message: 'leasing box' },
  { type: 'REFUSED', reason: 'NoCapacity', message: 'no capacity in us-east-1' },
  { type: 'MACHINE_READY', message: 'ready' },
  { type: 'LAUNCH_FAILED', reason: 'HostKeyMismatch', message: 'bad key' },
  { type: 'LAUNCH_REFUSED', reason: 'OverPriceCap', message: 'gpu_8x_h100 is above the cap' },
  { type: 'BUSY', message: 'busy' },
  { type: 'IDLE', message: 'idle' },
  { type: 'CHECK_FAILED', reason: 'MachineUnreachable', message: 'connection refused' },
  { type: 'EXPIRED', reason: 'IdleTimeout', message: 'idle too long' },
  { type: 'DELETE_REQUESTED', message: 'deleted' },
  { type: 'RELEASE_FAILED', message: 'exit 1' },
  { type: 'RELEASE_CONFIRMED', message: 'gone' },
];

// The whole state table: [from, event] -> [to, effects]. Anything absent is refused.
const table: Record<string, [Phase, Effect[]]> = {
  'Pending UNSCHEDULABLE': ['Pending', ['announce']],
  'Pending OFFER_CHOSEN': ['Launching', ['announce', 'acquire']],
  'Pending REFUSED': ['Failed', ['announce', 'finish']],
  'Pending DELETE_REQUESTED': ['Released', ['announce', 'finish']],
  'Launching MACHINE_READY': ['Ready', ['announce']],
  'Launching LAUNCH_REFUSED': ['Pending', ['announce', 'unclaim']],
  'Launching LAUNCH_FAILED': ['Releasing', ['announce', 'release']],
  'Launching DELETE_REQUESTED': ['Releasing', ['announce', 'release']],
  'Ready IDLE': ['Idle', ['announce']],
  'Ready BUSY': ['Ready', []],
  'Ready CHECK_FAILED': ['Idle', ['announce']],
  'Ready EXPIRED': ['Releasing', ['announce', 'release']],
  'Ready LAUNCH_FAILED': ['Releasing', ['announce', 'release']],
  'Ready DELETE_REQUESTED': ['Releasing', ['announce', 'release']],
  'Idle BUSY': ['Ready', ['announce']],
  'Idle IDLE': ['Idle', []],
  'Idle CHECK_FAILED': ['Idle', ['announce']],
  'Idle EXPIRED': ['Releasing', ['announce', 'release']],
  'Idle LAUNCH_FAILED': ['Releasing', ['announce', 'release']],
  'Idle DELETE_REQUESTED': ['Releasing', ['announce', 'release']],
  'Releasing RELEASE_FAILED': ['Releasing', ['announce', 'retryRelease']],
  'Releasing RELEASE_CONFIRMED': ['Released', ['announce', 'finish']],
};

describe('lease machine', () => {
  for (const phase of PHASES) {
    for (const event of sample) {
      const expected = table[`${phase} ${event.type}`];
      it(`${phase} + ${event.type} -> ${expected ? expected[0] : 'refused'}`, () => {
        const result = step(restore(phase), event);
        if (!expected) {
          expect(result.accepted).toBe(false);
          expect(result.phase).toBe(phase);
          expect(result.effects).toEqual([]);
          return;
        }
        expect(result.phase).toBe(expected[0]);
        expect(result.effects).toEqual(expected[1]);
        expect(result.context.message).toBe(event.message);
      });
    }
  }

  it('a launch that failed ends Failed, with the failure as reason, only after release is confirmed', () => {
    const failing = step(restore('Launching'), { type: 'LAUNCH_FAILED', reason: 'FactsMismatch', message: 'has 8 cpus, offer says 26' });
    expect(failing.phase).toBe('Releasing');
    const retried = step(restore('Releasing', failing.context), { type: 'RELEASE_FAILED', message: 'exit 3' });
    expect(retried.phase).toBe('Releasing');
    const done = step(restore('Releasing', retried.context), { type: 'RELEASE_CONFIRMED', message: 'released' });
    expect(done.phase).toBe('Failed');
    expect(done.context.reason).toBe('FactsMismatch');
    expect(done.context.message).toBe('has 8 cpus, offer says 26');
  });

  it('a Lease refused before anything is rented ends Failed at once with the reason', () => {
    const r = step(restore('Pending'), { type: 'REFUSED', reason: 'NoCapacity', message: 'no capacity' });
    expect(r.phase).toBe('Failed');
    expect(r.context.failure).toEqual({ reason: 'NoCapacity', message: 'no capacity' });
    expect(r.effects).not.toContain('acquire');
  });

  describe('a failed idle check', () => {
    const failing = step(restore('Ready'), { type: 'CHECK_FAILED', reason: 'MachineUnreachable', message: 'connection refused' });

    it('makes the Lease Idle with the failure as its reason', () => {
      expect(failing).toMatchObject({ phase: 'Idle', context: { reason: 'MachineUnreachable' }, effects: ['announce'] });
    });

    it.each<[string, LeaseEvent, Phase, string, Effect[]]>([
      ['the same failure again: noted, not announced', { type: 'CHECK_FAILED', reason: 'MachineUnreachable', message: 'timeout' }, 'Idle', 'MachineUnreachable', []],
      ['another failure: announced', { type: 'CHECK_FAILED', reason: 'FactsMismatch', message: 'no GPU' }, 'Idle', 'FactsMismatch', ['announce']],
      ['a check that succeeds, idle: restored, announced', { type: 'IDLE', message: 'idle' }, 'Idle', 'Idle', ['announce']],
      ['a check that succeeds, busy: Ready', { type: 'BUSY', message: 'busy' }, 'Ready', 'Busy', ['announce']],
      ['the idle deadline: released', { type: 'EXPIRED', reason: 'IdleTimeout', message: 'idle too long' }, 'Releasing', 'IdleTimeout', ['announce', 'release']],
    ])('then %s', (_name, event, phase, reason, effects) => {
      expect(step(restore('Idle', failing.context), event)).toMatchObject({ phase, context: { reason }, effects });
    });
  });

  it('counts launch attempts', () => {
    expect(step(restore('Pending', { attempt: 2 }), sample[1]!).context.attempt).toBe(3);
  });

  // Model-based coverage generated from the machine itself: every phase is
  // reachable from a new Lease, and every edge of the graph appears in the table above.
  it('graph paths reach every phase and every edge is in the table', () => {
    // States are told apart by phase only: the attempt counter would make a
    // Pending → Launching → Pending cycle an endless graph.
    const byPhase = { events: sample, serializeState: (state: { value: unknown }) => String(state.value) };
    const paths = getShortestPaths(leaseMachine, byPhase);
    const reached = new Set(paths.map((p) => String(p.state.value)));
    expect([...reached].sort()).toEqual([...PHASES].sort());
    const edges = new Set<string>();
    for (const { state } of Object.values(getAdjacencyMap(leaseMachine, byPhase))) {
      for (const event of sample) {
        if (step(state, event).accepted) edges.add(`${String(state.value)} ${event.type}`);
      }
    }
    expect([...edges].sort()).toEqual(Object.keys(table).sort());
  });
});
