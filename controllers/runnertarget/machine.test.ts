import { describe, expect, it } from '@jest/globals';
import { getShortestPaths, getSimplePaths } from '@xstate/graph';
import { CHECK_STATES, checkMachine, restore, step, type CheckEffect, type CheckEvent, type CheckState } from './machine.js';

const events: Record<string, CheckEvent> = {
  START: { type: 'START', dryRun: false, message: 'check every 5m' },
  START_DRY: { type: 'START', dryRun: true, message: 'spec.dryRun' },
  LEASE_ACQUIRED: { type: 'LEASE_ACQUIRED', message: 'holding runnertarget-pool' },
  LEASE_HELD: { type: 'LEASE_HELD', holder: 'replica-b', message: 'held by replica-b' },
  LEASE_LOST: { type: 'LEASE_LOST', message: 'renewal failed' },
  SAMPLE_EARLY: { type: 'SAMPLE_EARLY', waitMs: 30_000, message: 'boundary in 30 s' },
  SAMPLE_DUE: { type: 'SAMPLE_DUE', message: 'boundary reached' },
  OBSERVED: { type: 'OBSERVED', message: '3 hosts, 4 queued' },
  PLANNED_NONE: { type: 'PLANNED', changes: 0, message: 'nothing to change' },
  PLANNED_TWO: { type: 'PLANNED', changes: 2, message: 'launch 2' },
  INTENT_WRITTEN: { type: 'INTENT_WRITTEN', message: 'receipt launch-1' },
  PROVIDER_ANSWERED: { type: 'PROVIDER_ANSWERED', ok: true, message: 'inserted' },
  SETTLED: { type: 'SETTLED', message: 'launch-1 Done' },
  WRITE_NOT_DURABLE: { type: 'WRITE_NOT_DURABLE', reason: 'StatusConflict', message: '409' },
  FAILED: { type: 'FAILED', reason: 'ObserveFailed', message: 'GitHub 502' },
};

type Row = [CheckState, CheckEffect[]];
const live = { dryRun: false, changes: 2, done: 0 };
const dry = { dryRun: true, changes: 0, done: 0 };

// The state table of a live check: [from, event] -> [to, effects]. Anything absent is refused.
const liveTable: Record<string, Row> = {
  'Idle START': ['Holding', ['acquireLease']],
  'Idle START_DRY': ['Observing', ['observe']],
  'Holding LEASE_ACQUIRED': ['Observing', ['observe']],
  'Holding LEASE_HELD': ['Held', ['announce']],
  'Holding FAILED': ['Failed', ['announce']],
  'Observing OBSERVED': ['Planning', ['plan']],
  'Observing SAMPLE_EARLY': ['WaitingForSample', ['waitForSample']],
  'Observing LEASE_LOST': ['Held', ['announce']],
  'Observing FAILED': ['Failed', ['announce', 'releaseLease']],
  'WaitingForSample SAMPLE_DUE': ['Observing', ['observe']],
  'WaitingForSample LEASE_LOST': ['Held', ['announce']],
  'WaitingForSample FAILED': ['Failed', ['announce', 'releaseLease']],
  'Planning PLANNED_NONE': ['Done', ['writeStatus', 'releaseLease']],
  'Planning PLANNED_TWO': ['Recording', ['recordIntent']],
  'Planning LEASE_LOST': ['Held', ['announce']],
  'Planning FAILED': ['Failed', ['announce', 'releaseLease']],
  'Recording INTENT_WRITTEN': ['Calling', ['callProvider']],
  'Recording WRITE_NOT_DURABLE': ['NotDurable', ['announce', 'releaseLease']],
  'Recording LEASE_LOST': ['Held', ['announce']],
  'Recording FAILED': ['Failed', ['announce', 'releaseLease']],
  'Calling PROVIDER_ANSWERED': ['Settling', ['settleReceipt']],
  'Calling LEASE_LOST': ['Held', ['announce']],
  'Settling SETTLED': ['Recording', ['recordIntent']],
  'Settling WRITE_NOT_DURABLE': ['NotDurable', ['announce', 'releaseLease']],
  'Settling LEASE_LOST': ['Held', ['announce']],
  'Settling FAILED': ['Failed', ['announce', 'releaseLease']],
};

// A dry run: no lease, so no lease events, and a plan ends it.
const dryTable: Record<string, Row> = {
  'Idle START': ['Holding', ['acquireLease']],
  'Idle START_DRY': ['Observing', ['observe']],
  'Holding LEASE_ACQUIRED': ['Observing', ['observe']],
  'Holding LEASE_HELD': ['Held', ['announce']],
  'Holding FAILED': ['Failed', ['announce']],
  'Observing OBSERVED': ['Planning', ['plan']],
  'Observing SAMPLE_EARLY': ['WaitingForSample', ['waitForSample']],
  'Observing FAILED': ['Failed', ['announce']],
  'WaitingForSample SAMPLE_DUE': ['Observing', ['observe']],
  'WaitingForSample FAILED': ['Failed', ['announce']],
  'Planning PLANNED_NONE': ['DryRun', ['writePlan', 'announce']],
  'Planning PLANNED_TWO': ['DryRun', ['writePlan', 'announce']],
  'Planning FAILED': ['Failed', ['announce']],
  // Unreachable in a dry run; restored there anyway, they only fail.
  'Recording FAILED': ['Failed', ['announce']],
  'Settling FAILED': ['Failed', ['announce']],
};

describe.each([
  ['live', live, liveTable],
  ['dry run', dry, dryTable],
])('check machine, %s', (_kind, context, table) => {
  for (const state of CHECK_STATES) {
    for (const [name, event] of Object.entries(events)) {
      const expected = table[`${state} ${name}`];
      it(`${state} + ${name} -> ${expected ? expected[0] : 'refused'}`, () => {
        const result = step(restore(state, context), event);
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
});

/** Runs events from a new check, returning every effect in order and the last step. */
function run(...names: string[]) {
  let snapshot = restore();
  const all: CheckEffect[] = [];
  let last: ReturnType<typeof step> | undefined;
  for (const name of names) {
    last = step(snapshot, events[name]!);
    expect({ name, accepted: last.accepted }).toEqual({ name, accepted: true });
    all.push(...last.effects);
    snapshot = checkMachine.resolveState({ value: last.state, context: last.context });
  }
  return { effects: all, last: last! };
}

describe('a check from start to end', () => {
  it('two changes: each receipt is written before its provider call and settled after it', () => {
    const { effects, last } = run('START', 'LEASE_ACQUIRED', 'OBSERVED', 'PLANNED_TWO', 'INTENT_WRITTEN', 'PROVIDER_ANSWERED', 'SETTLED', 'INTENT_WRITTEN', 'PROVIDER_ANSWERED', 'SETTLED');
    expect(effects).toEqual(['acquireLease', 'observe', 'plan', 'recordIntent', 'callProvider', 'settleReceipt', 'recordIntent', 'callProvider', 'settleReceipt', 'writeStatus', 'releaseLease']);
    expect(last).toMatchObject({ state: 'Done', final: true, error: false, context: { changes: 2, done: 2 } });
  });

  it('an early sample waits for the boundary and observes again', () => {
    const { effects } = run('START', 'LEASE_ACQUIRED', 'SAMPLE_EARLY', 'SAMPLE_DUE', 'OBSERVED', 'PLANNED_NONE');
    expect(effects).toEqual(['acquireLease', 'observe', 'waitForSample', 'observe', 'plan', 'writeStatus', 'releaseLease']);
  });

  it('held elsewhere: nothing is observed or changed', () => {
    const { effects, last } = run('START', 'LEASE_HELD');
    expect(effects).toEqual(['acquireLease', 'announce']);
    expect(last).toMatchObject({ state: 'Held', final: true, error: false, context: { reason: 'HeldElsewhere' } });
  });

  it('a 409 on a receipt write ends the check in error with no further provider call', () => {
    const { effects, last } = run('START', 'LEASE_ACQUIRED', 'OBSERVED', 'PLANNED_TWO', 'INTENT_WRITTEN', 'PROVIDER_ANSWERED', 'SETTLED', 'WRITE_NOT_DURABLE');
    expect(effects.filter((e) => e === 'callProvider')).toHaveLength(1);
    expect(last).toMatchObject({ state: 'NotDurable', final: true, error: true, context: { reason: 'StatusConflict' } });
    for (const name of Object.keys(events)) expect(step(checkMachine.resolveState({ value: last.state, context: last.context }), events[name]!).accepted).toBe(false);
  });

  it('a dry run plans and writes the plan, with no lease, receipt or change', () => {
    const { effects, last } = run('START_DRY', 'OBSERVED', 'PLANNED_TWO');
    expect(effects).toEqual(['observe', 'plan', 'writePlan', 'announce']);
    expect(last).toMatchObject({ state: 'DryRun', final: true, error: false, context: { dryRun: true, changes: 2 } });
  });
});

describe('model-based: every path the machine allows', () => {
  const paths = getSimplePaths(checkMachine, { events: Object.values(events) });
  /** Replays a path from a new check, giving each step's state before, event and result. */
  const replay = (steps: (typeof paths)[number]['steps']) => {
    let snapshot = restore();
    return steps
      .filter((s) => (s.event.type as string) !== 'xstate.init')
      .map((s) => {
        const before = String(snapshot.value);
        const r = step(snapshot, s.event);
        snapshot = s.state;
        return { before, event: s.event, r };
      });
  };
  const dryPaths = paths.filter((p) => p.steps.some((s) => s.event.type === 'START' && s.event.dryRun));
  const livePaths = paths.filter((p) => p.steps.some((s) => s.event.type === 'START' && !s.event.dryRun));

  it('a dry run never holds a lease, writes a receipt or calls a provider', () => {
    const forbidden: CheckEffect[] = ['acquireLease', 'releaseLease', 'recordIntent', 'callProvider', 'settleReceipt', 'writeStatus'];
    expect(dryPaths.length).toBeGreaterThan(0);
    for (const path of dryPaths) for (const { r } of replay(path.steps)) for (const e of forbidden) expect(r.effects).not.toContain(e);
  });

  it('every provider call comes right after its receipt was written, in a live check', () => {
    let calls = 0;
    for (const path of livePaths) {
      for (const { before, event, r } of replay(path.steps)) {
        if (!r.effects.includes('callProvider')) continue;
        calls++;
        expect([before, event.type]).toEqual(['Recording', 'INTENT_WRITTEN']);
      }
    }
    expect(calls).toBeGreaterThan(0);
  });

  it('a live check that took the lease lets go of it wherever it ends, unless the lease was lost', () => {
    let ended = 0;
    for (const path of livePaths) {
      const steps = replay(path.steps);
      const effects = steps.flatMap((s) => s.r.effects);
      const end = steps.at(-1)!.r;
      if (!end.final || !effects.includes('acquireLease') || !steps.some((s) => s.event.type === 'LEASE_ACQUIRED')) continue;
      const lost = steps.some((s) => s.event.type === 'LEASE_LOST');
      expect({ end: end.state, releases: effects.filter((e) => e === 'releaseLease').length }).toEqual({ end: end.state, releases: lost ? 0 : 1 });
      ended++;
    }
    expect(ended).toBeGreaterThan(5);
  });

  it('every state is reachable from a new check', () => {
    const reached = new Set(getShortestPaths(checkMachine, { events: Object.values(events) }).map((p) => String(p.state.value)));
    expect([...reached].sort()).toEqual([...CHECK_STATES].sort());
  });
});
