import { describe, expect, it } from '@jest/globals';
import { restore, step } from '../machine.js';
import { hostEvent, type HostObservation } from './observe.js';

const fits = { kind: 'claim' as const, job: { metadata: { name: 'train' } } };
const base: HostObservation = {
  state: 'Available',
  node: 'gpu-1',
  mirrorsRunning: 0,
  occupancy: { kind: 'idle' },
  clock: { idleSince: '2026-12-03T09:00:00Z', windowEndsAt: Date.parse('2026-12-03T09:10:00Z'), elapsed: true },
  drain: { drain: false, withheldGPUs: 0 },
  verdict: { ready: true, code: 'Ready' },
  holding: { kind: 'mine' },
  choice: fits,
  dryRun: false,
};
const ourWork = { kind: 'busy' as const, pods: [], message: 'our pod team/x runs on node gpu-1' };
const drainFor = (reason: 'OurWorkRunning' | 'Unlisted' | 'MaxSessionDuration' | 'ReservedGPUsUnreadable') => ({ drain: true as const, reason, message: `because ${reason}` });

describe('hostEvent', () => {
  it.each<[string, Partial<HostObservation>, string | undefined, RegExp | null]>([
    ['available, a Job fits: claim', {}, 'CLAIM', /claims peer Job train/],
    ['just out of the window: Available first', { state: 'Waiting' }, 'AVAILABLE', /peer Job train fits/],
    ['dry run: never a claim, says what it would do', { dryRun: true }, 'AVAILABLE', /^dry run: node gpu-1 would claim peer Job train$/],
    ['nothing fits', { choice: { kind: 'none', message: 'the peer queue has no Job to run' } }, 'AVAILABLE', /the peer queue has no Job to run/],
    ['inside the idle window', { state: 'Waiting', clock: { idleSince: '2026-12-03T09:59:00Z', windowEndsAt: Date.parse('2026-12-03T10:09:00Z'), elapsed: false } }, 'IDLE', /may lend from 2026-12-03T10:09:00.000Z/],
    ['the peer is not Ready', { verdict: { ready: false, code: 'PeerRefused' } }, 'IDLE', /not Ready \(PeerRefused\)/],
    ['another PeerFleet holds the node', { holding: { kind: 'held', by: 'ns/b', message: 'node gpu-1 lends to PeerFleet ns/b' } }, 'IDLE', /ns\/b/],
    ['our work runs there', { occupancy: ourWork, drain: drainFor('OurWorkRunning') }, 'BUSY', /team\/x/],
    ['unlisted', { drain: drainFor('Unlisted') }, 'UNLISTED', /because Unlisted/],
    ['idle, but the reserved GPUs cannot be read', { drain: drainFor('ReservedGPUsUnreadable') }, 'IDLE', /lends nothing: because ReservedGPUsUnreadable/],
    ['lending, another Job fits: claim beside', { state: 'Lending', mirrorsRunning: 1 }, 'CLAIM', /beside the 1 it runs/],
    ['lending, a drain reason: drain', { state: 'Lending', mirrorsRunning: 1, occupancy: ourWork, drain: drainFor('OurWorkRunning') }, 'DRAIN', null],
    ['lending, the peer went away: nothing new, nothing stopped', { state: 'Lending', mirrorsRunning: 1, verdict: { ready: false, code: 'PeerUnreachable' } }, undefined, null],
    ['lending, nothing more fits', { state: 'Lending', mirrorsRunning: 2, choice: { kind: 'none', message: 'x' } }, undefined, null],
    ['lending in a dry run claims nothing more', { state: 'Lending', mirrorsRunning: 1, dryRun: true }, undefined, null],
    ['draining, the reason gone: still draining, never a claim', { state: 'Draining', mirrorsRunning: 1 }, undefined, null],
    ['draining, a new reason', { state: 'Draining', mirrorsRunning: 1, drain: drainFor('MaxSessionDuration') }, 'DRAIN', null],
    ['the last mirror finished while draining, our work there', { state: 'Draining', occupancy: ourWork, drain: drainFor('OurWorkRunning') }, 'BUSY', null],
    ['the last mirror finished while lending, another Job fits: the session claims it at once', { state: 'Lending' }, 'CLAIM', /the next in its session/],
    ['the last mirror finished while lending, inside a restarted idle window: still claims', { state: 'Lending', clock: { idleSince: '2026-12-03T09:59:00Z', windowEndsAt: Date.parse('2026-12-03T10:09:00Z'), elapsed: false } }, 'CLAIM', /the next in its session/],
    ['the last mirror finished while lending, the queue is empty: the session ends', { state: 'Lending', choice: { kind: 'none', message: 'the peer queue has no Job to run' } }, 'AVAILABLE', /no Job to run/],
    ['the last mirror finished while lending, the peer is not Ready: the session ends', { state: 'Lending', verdict: { ready: false, code: 'PeerUnreachable' } }, 'IDLE', /not Ready/],
    ['the last mirror finished while lending, our work wants the node: the session ends', { state: 'Lending', occupancy: ourWork, drain: drainFor('OurWorkRunning') }, 'BUSY', null],
    ['the last mirror finished while lending, a drain reason: the session ends', { state: 'Lending', drain: drainFor('MaxSessionDuration') }, 'IDLE', /lends nothing/],
    ['the last mirror finished while lending, unlisted: the session ends', { state: 'Lending', drain: drainFor('Unlisted') }, 'UNLISTED', null],
    ['the last mirror finished while lending, another PeerFleet holds the node: the session ends', { state: 'Lending', holding: { kind: 'held', by: 'ns/b', message: 'node gpu-1 lends to PeerFleet ns/b' } }, 'IDLE', /ns\/b/],
    ['the last mirror finished while lending in a dry run: no claim', { state: 'Lending', dryRun: true }, 'AVAILABLE', /dry run/],
    ['waiting, inside the window, a Job fits: no claim (the window guards the start)', { state: 'Waiting', clock: { idleSince: '2026-12-03T09:59:00Z', windowEndsAt: Date.parse('2026-12-03T10:09:00Z'), elapsed: false } }, 'IDLE', /may lend from/],
  ])('%s', (_name, over, type, message) => {
    const event = hostEvent({ ...base, ...over });
    expect(event?.type).toBe(type);
    if (message) expect(event?.message).toMatch(message);
  });

  // Whatever the observation, the event it gives is one the machine accepts
  // in that state, or none at all.
  it('every event is accepted by the machine in the state it was observed in', () => {
    const states = ['Busy', 'Waiting', 'Available', 'Lending', 'Draining', 'Unlisted'] as const;
    const variants: Partial<HostObservation>[] = [
      {}, { occupancy: ourWork, drain: drainFor('OurWorkRunning') }, { drain: drainFor('Unlisted') }, { verdict: { ready: false, code: 'PeerRefused' } },
      { choice: { kind: 'none', message: 'x' } }, { dryRun: true }, { clock: { elapsed: false } },
    ];
    for (const state of states) {
      const mirrors = state === 'Lending' || state === 'Draining' ? [0, 1] : [0];
      for (const mirrorsRunning of mirrors) {
        for (const v of variants) {
          const event = hostEvent({ ...base, ...v, state, mirrorsRunning });
          if (event) expect([state, mirrorsRunning, event.type, step(restore(state), event).accepted]).toEqual([state, mirrorsRunning, event.type, true]);
        }
      }
    }
  });
});
