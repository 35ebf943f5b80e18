import { describe, expect, it } from '@jest/globals';
import { getAdjacencyMap, getShortestPaths } from '@xstate/graph';
import { HOST_STATES, hostMachine, restore, step, type HostEffect, type HostEvent, type PeerHostState } from './machine.js';

const sample: HostEvent[] = [
  { type: 'BUSY', message: 'our pod team/train runs on node gpu-1' },
  { type: 'IDLE', message: 'idle since 10:00, lends at 10:10' },
  { type: 'AVAILABLE', message: 'no queued Job fits' },
  { type: 'UNLISTED', reason: 'Unlisted', message: 'spec.listed is false' },
  { type: 'CLAIM', job: 'train', message: 'claimed queue/train' },
  { type: 'DRAIN', reason: 'OurWorkRunning', message: 'our pod arrived' },
];

const ends: HostEffect[] = ['announce', 'endSession'];

// The whole state table: [from, event] -> [to, effects]. Anything absent is refused.
const table: Record<string, [PeerHostState, HostEffect[]]> = {
  'Busy BUSY': ['Busy', []],
  'Busy IDLE': ['Waiting', ['announce']],
  'Busy AVAILABLE': ['Available', ['announce']],
  'Busy UNLISTED': ['Unlisted', ['announce']],
  'Waiting BUSY': ['Busy', ['announce']],
  'Waiting IDLE': ['Waiting', []],
  'Waiting AVAILABLE': ['Available', ['announce']],
  'Waiting UNLISTED': ['Unlisted', ['announce']],
  'Available BUSY': ['Busy', ['announce']],
  'Available IDLE': ['Waiting', ['announce']],
  'Available AVAILABLE': ['Available', []],
  'Available UNLISTED': ['Unlisted', ['announce']],
  'Available CLAIM': ['Lending', ['announce', 'startSession', 'claim']],
  'Lending CLAIM': ['Lending', ['claim']],
  'Lending DRAIN': ['Draining', ['announce']],
  'Lending BUSY': ['Busy', ends],
  'Lending IDLE': ['Waiting', ends],
  'Lending AVAILABLE': ['Available', ends],
  'Lending UNLISTED': ['Unlisted', ends],
  'Draining DRAIN': ['Draining', []],
  'Draining BUSY': ['Busy', ends],
  'Draining IDLE': ['Waiting', ends],
  'Draining AVAILABLE': ['Available', ends],
  'Draining UNLISTED': ['Unlisted', ends],
  'Unlisted BUSY': ['Busy', ['announce']],
  'Unlisted IDLE': ['Waiting', ['announce']],
  'Unlisted AVAILABLE': ['Available', ['announce']],
  'Unlisted UNLISTED': ['Unlisted', []],
};

describe('peer host machine', () => {
  for (const state of HOST_STATES) {
    for (const event of sample) {
      const expected = table[`${state} ${event.type}`];
      it(`${state} + ${event.type} -> ${expected ? expected[0] : 'refused'}`, () => {
        const result = step(restore(state), event);
        if (!expected) {
          expect(result.accepted).toBe(false);
          expect(result.state).toBe(state);
          expect(result.effects).toEqual([]);
          return;
        }
        expect(result.accepted).toBe(true);
        expect(result.state).toBe(expected[0]);
        expect(result.effects).toEqual(expected[1]);
        expect(result.context.message).toBe(event.message);
      });
    }
  }

  it('claims only where the node may lend: never while Busy, Waiting, Unlisted or Draining', () => {
    const claim = sample[4]!;
    for (const state of HOST_STATES) {
      const claims = step(restore(state), claim).effects.includes('claim');
      expect([state, claims]).toEqual([state, state === 'Available' || state === 'Lending']);
    }
  });

  it('keeps the drain reason while draining and drops it when the session ends', () => {
    const draining = step(restore('Lending'), { type: 'DRAIN', reason: 'MaxSessionDuration', message: 'session limit' });
    expect(draining.context).toMatchObject({ drainReason: 'MaxSessionDuration', reason: 'MaxSessionDuration' });
    const again = step(restore('Draining', draining.context), { type: 'DRAIN', reason: 'OurWorkRunning', message: 'our pod' });
    expect(again.context.drainReason).toBe('OurWorkRunning');
    const ended = step(restore('Draining', again.context), sample[0]!);
    expect(ended.context.drainReason).toBeUndefined();
    expect(ended.context.reason).toBe('OurWork');
  });

  it('an unlisting says which switch did it', () => {
    expect(step(restore('Available'), { type: 'UNLISTED', reason: 'NodeUnlisted', message: 'lending off' }).context.reason).toBe('NodeUnlisted');
  });

  it('a new host starts Busy, lending nothing until it has been seen idle', () => {
    expect(restore(undefined).value).toBe('Busy');
  });

  // Model-based coverage generated from the machine itself: every state is
  // reachable from a new host, and every edge of the graph is in the table above.
  it('graph paths reach every state and every edge is in the table', () => {
    const paths = getShortestPaths(hostMachine, { events: sample });
    expect([...new Set(paths.map((p) => String(p.state.value)))].sort()).toEqual([...HOST_STATES].sort());
    const edges = new Set<string>();
    for (const { state } of Object.values(getAdjacencyMap(hostMachine, { events: sample }))) {
      for (const event of sample) if (step(state, event).accepted) edges.add(`${String(state.value)} ${event.type}`);
    }
    expect([...edges].sort()).toEqual(Object.keys(table).sort());
  });
});
