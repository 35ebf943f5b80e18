import { describe, expect, it } from '@jest/globals';
import { observeMachine } from './ready.js';
import type { Wake } from '../decision.js';
import { at, done, FACTS, input, leaseWith, MACHINE, NOW, running } from '../testing/phase-input.js';

const ready = { phase: 'Ready' as const, readyAt: at(-120_000), lastActivityAt: at(-120_000), idleTimeout: '20m', expiresAt: at(3600_000), machine: MACHINE };
const ok = (busy: number) => done({ kind: 'check', check: { kind: 'ok', facts: FACTS, busy, keysHash: 'k2', machine: MACHINE }, at: NOW });
const inputs = '1|';

describe('observeMachine', () => {
  it.each([
    ['deleted', leaseWith(ready, { deletionTimestamp: at(0) as never }), undefined, undefined, { event: { type: 'DELETE_REQUESTED' } }],
    ['maxLifetime passed: release without a probe', leaseWith({ ...ready, expiresAt: at(-1000) }), undefined, undefined, { event: { type: 'EXPIRED', reason: 'MaxLifetime' } }],
    ['no wake-up: probe', leaseWith(ready), undefined, undefined, { start: 'check' }],
    ['planned later, nothing new: wait', leaseWith(ready), undefined, { at: NOW + 30_000, inputs }, { requeueAfter: 30_000 }],
    ['planned later, the spec changed: probe now', leaseWith(ready, { generation: 2 }), undefined, { at: NOW + 30_000, inputs }, { start: 'check' }],
    ['planned later, activity annotated: probe now', leaseWith(ready, { annotations: { 'leasehold.dev/activity': at(0) } }), undefined, { at: NOW + 30_000, inputs }, { start: 'check' }],
    ['a probe runs: wait for it', leaseWith(ready), running('check/1'), undefined, { requeueAfter: 60_000 }],
    ['busy: Ready, activity now', leaseWith(ready), ok(2), undefined, { event: { type: 'BUSY' }, status: { lastActivityAt: at(0), installedKeysHash: 'k2' }, wake: { at: NOW + 60_000, inputs }, consumed: true }],
    ['idle within the window: Idle, next check a check interval on', leaseWith(ready), ok(0), undefined, { event: { type: 'IDLE' }, status: { idleSince: at(0) }, wake: { at: NOW + 60_000, inputs }, consumed: true }],
    ['idle past the window: release', leaseWith({ ...ready, lastActivityAt: at(-1_300_000), readyAt: at(-1_300_000) }), ok(0), undefined, { event: { type: 'EXPIRED', reason: 'IdleTimeout' }, wake: null, consumed: true }],
    ['host key changed: fail at once', leaseWith(ready), done({ kind: 'check', check: { kind: 'mismatch', reason: 'HostKeyMismatch', message: 'other key' }, at: NOW }), undefined, { event: { type: 'LAUNCH_FAILED', reason: 'HostKeyMismatch' }, wake: null, consumed: true }],
  ])('%s', (_name, lease, effect, wake, want) => {
    expect(observeMachine(input(lease, effect, wake), 'Ready')).toMatchObject(want);
  });

  const annotated = (time: string, status: object = ready) => leaseWith(status, { annotations: { 'leasehold.dev/activity': time } });
  const idle = { ...ready, phase: 'Idle', idleSince: at(-60_000) };
  const future = '2099-01-01T00:00:00Z';
  it.each<[string, ReturnType<typeof leaseWith>, 'Ready' | 'Idle', Wake | undefined, Record<string, unknown>]>([
    ['activity annotated on an Idle Lease: Ready again', annotated(at(-30_000), idle), 'Idle', undefined, { event: { type: 'BUSY', message: expect.stringContaining('leasehold.dev/activity') }, status: { lastActivityAt: at(-30_000) } }],
    ['activity annotated on a Ready Lease: stays Ready', annotated(at(-30_000)), 'Ready', undefined, { event: { type: 'BUSY' }, status: { lastActivityAt: at(-30_000) } }],
    ['activity already recorded: Idle as the probe says', annotated(at(-120_000)), 'Ready', undefined, { event: { type: 'IDLE' } }],
    ['an annotation older than the recorded activity: Idle', annotated(at(-600_000), idle), 'Idle', undefined, { event: { type: 'IDLE' } }],
    [
      'a future time, first seen: counts as now, once, with a Warning',
      annotated(future, idle),
      'Idle',
      { at: NOW - 1, inputs },
      { event: { type: 'BUSY' }, status: { lastActivityAt: at(0) }, notice: { reason: 'ActivityInFuture', message: expect.stringContaining(`${future} is in the future; counted as activity now`) } },
    ],
    [
      'a future time first seen in the second the Lease turned Ready: no activity to add, still reported',
      annotated(future, { ...ready, readyAt: at(0), lastActivityAt: at(0) }),
      'Ready',
      { at: NOW - 1, inputs },
      { event: { type: 'IDLE' }, notice: { reason: 'ActivityInFuture' } },
    ],
    ['a future time seen at the last check: counts no more', annotated(future, { ...ready, lastActivityAt: at(-60_000) }), 'Ready', { at: NOW - 1, inputs: `1|${future}` }, { event: { type: 'IDLE' } }],
  ])('%s', (_name, lease, phase, wake, want) => {
    const obs = observeMachine(input(lease, ok(0), wake), phase);
    expect(obs).toMatchObject(want);
    if (!('notice' in want)) expect(obs.notice).toBeUndefined();
  });

  it('a future activity time does not keep a machine: the idle window runs from when it was first counted', () => {
    const lease = annotated(future, { ...ready, readyAt: at(-1_300_000), lastActivityAt: at(-1_300_000) });
    const obs = observeMachine(input(lease, ok(0), { at: NOW - 1, inputs: `1|${future}` }), 'Ready');
    expect(obs.event).toMatchObject({ type: 'EXPIRED', reason: 'IdleTimeout' });
  });

  describe('a failed check', () => {
    const unreachable = done({ kind: 'check', check: { kind: 'unreachable', message: 'connect ECONNREFUSED' }, at: NOW });
    const mismatch = done({ kind: 'check', check: { kind: 'mismatch', reason: 'FactsMismatch', message: 'the machine does not match Offer box: cpus 1 < 2' }, at: NOW });
    const idle = { ...ready, phase: 'Idle' as const, idleSince: at(-60_000) };
    // Last activity 120 s ago, idle timeout 20 m: the deadline is 1080 s from now.
    const deadline = at(1_080_000);
    it.each<[string, ReturnType<typeof leaseWith>, 'Ready' | 'Idle', ReturnType<typeof done>, Record<string, unknown>]>([
      [
        'unreachable: Idle with the reason, counting down from the activity recorded',
        leaseWith(ready),
        'Ready',
        unreachable,
        { event: { type: 'CHECK_FAILED', reason: 'MachineUnreachable', message: `the machine could not be reached: connect ECONNREFUSED; not handed out until a check succeeds; released at ${new Date(Date.parse(deadline)).toISOString()} unless one does and work starts` }, status: { idleSince: at(0) }, wake: { at: NOW + 60_000, inputs }, consumed: true },
      ],
      ['facts no longer match: Idle with the reason, not released at once', leaseWith(idle), 'Idle', mismatch, { event: { type: 'CHECK_FAILED', reason: 'FactsMismatch', message: expect.stringContaining('cpus 1 < 2; not handed out') }, status: { idleSince: at(-60_000) }, consumed: true }],
      ['activity annotated meanwhile renews nothing', annotated(at(-1_000), idle), 'Idle', unreachable, { event: { type: 'CHECK_FAILED', message: expect.stringContaining(`released at ${new Date(Date.parse(deadline)).toISOString()}`) } }],
      ['a future activity time renews nothing', annotated(future, idle), 'Idle', unreachable, { event: { type: 'CHECK_FAILED' } }],
      [
        'past the idle deadline: released',
        leaseWith({ ...idle, readyAt: at(-1_300_000), lastActivityAt: at(-1_300_000) }, { annotations: { 'leasehold.dev/activity': at(-1_000) } }),
        'Idle',
        unreachable,
        { event: { type: 'EXPIRED', reason: 'IdleTimeout', message: expect.stringContaining('latest check: the machine could not be reached') }, wake: null },
      ],
      ['the next check comes at the idle deadline when that is sooner', leaseWith({ ...idle, readyAt: at(-1_170_000), lastActivityAt: at(-1_170_000) }), 'Idle', unreachable, { requeueAfter: 30_000, wake: { at: NOW + 30_000 } }],
    ])('%s', (_name, lease, phase, effect, want) => {
      const obs = observeMachine(input(lease, effect), phase);
      expect(obs).toMatchObject(want);
      expect(obs.status?.lastActivityAt).toBeUndefined();
      expect(obs.notice).toBeUndefined();
    });
  });

  describe('activity annotated while the latest check had failed', () => {
    const readyCondition = (status: 'True' | 'False', reason: string, since: string) => [{ type: 'Ready', status, reason, message: '', lastTransitionTime: since }];
    const idle = { ...ready, phase: 'Idle' as const, idleSince: at(-60_000) };
    it.each<[string, object, string, string]>([
      ['the check succeeds again: the annotation written meanwhile renews nothing', { ...idle, conditions: readyCondition('False', 'MachineUnreachable', at(-50_000)) }, at(-10_000), 'IDLE'],
      ['a later check: still nothing', { ...idle, conditions: readyCondition('True', 'MachineIdle', at(-5_000)) }, at(-10_000), 'IDLE'],
      ['activity annotated after the Lease was usable again counts', { ...idle, conditions: readyCondition('True', 'MachineIdle', at(-5_000)) }, at(-2_000), 'BUSY'],
      ['activity on a Lease usable since it became Ready counts', { ...idle, conditions: readyCondition('True', 'MachineIdle', at(-120_000)) }, at(-10_000), 'BUSY'],
    ])('%s', (_name, status, time, type) => {
      expect(observeMachine(input(annotated(time, status), ok(0)), 'Idle').event).toMatchObject({ type });
    });
  });

  it('an Idle Lease keeps the time it went idle', () => {
    const idle = leaseWith({ ...ready, phase: 'Idle', idleSince: at(-60_000) });
    expect(observeMachine(input(idle, ok(0)), 'Idle')).toMatchObject({ status: { idleSince: at(-60_000) } });
  });

  it('the next check comes at the idle deadline when that is sooner than the interval', () => {
    const nearly = leaseWith({ ...ready, lastActivityAt: at(-1_170_000), readyAt: at(-1_170_000) });
    expect(observeMachine(input(nearly, ok(0)), 'Ready')).toMatchObject({ requeueAfter: 30_000, wake: { at: NOW + 30_000 } });
  });
});

describe('what keeps a machine busy', () => {
  const seen = (jobs: number, sessions: number, gpuProcesses: number, busyWhen?: Array<'jobs' | 'sessions' | 'gpuProcesses'>) =>
    done({ kind: 'check', check: { kind: 'ok', facts: FACTS, busy: jobs, keysHash: 'k2', machine: MACHINE, usage: { jobs, sessions, gpuProcesses }, ...(busyWhen ? { busyWhen } : {}) }, at: NOW });
  const usage = (jobs: number, sessions: number, gpuProcesses: number, busy: string, time = at(0)) => ({ jobs, sessions, gpuProcesses, busy, at: time });
  it.each<[string, ReturnType<typeof done>, Record<string, unknown>]>([
    ['an open shell: Ready, activity now', seen(0, 1, 0), { event: { type: 'BUSY', message: 'busy: 1 session' }, status: { lastActivityAt: at(0), usage: usage(0, 1, 0, '1 session') } }],
    ['a detached GPU process: Ready, activity now', seen(0, 0, 1), { event: { type: 'BUSY', message: 'busy: 1 GPU process' }, status: { lastActivityAt: at(0), usage: usage(0, 0, 1, '1 GPU process') } }],
    ['sessions the Offer does not count: Idle, the sessions still shown', seen(0, 2, 0, ['jobs', 'gpuProcesses']), { event: { type: 'IDLE' }, status: { usage: usage(0, 2, 0, 'none') } }],
    ['GPU processes the Offer does not count: Idle', seen(0, 0, 3, ['jobs', 'sessions']), { event: { type: 'IDLE' }, status: { usage: usage(0, 0, 3, 'none') } }],
    ['only the counted kinds are named', seen(1, 2, 0, ['jobs']), { event: { type: 'BUSY', message: 'busy: 1 job' }, status: { usage: usage(1, 2, 0, '1 job') } }],
  ])('%s', (_name, effect, want) => {
    const obs = observeMachine(input(leaseWith(ready), effect), 'Ready');
    expect(obs).toMatchObject(want);
  });

  it('an idle check that sees what the last one saw writes no usage', () => {
    const lease = leaseWith({ ...ready, usage: usage(0, 0, 0, 'none', at(-60_000)) });
    expect(observeMachine(input(lease, seen(0, 0, 0)), 'Ready').status).not.toHaveProperty('usage');
  });

  it('maxLifetime ends a Lease with an open shell and a GPU process', () => {
    const lease = leaseWith({ ...ready, expiresAt: at(-1) });
    expect(observeMachine(input(lease, seen(0, 1, 1)), 'Ready').event).toMatchObject({ type: 'EXPIRED', reason: 'MaxLifetime' });
  });
});
