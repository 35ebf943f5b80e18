import { describe, expect, it } from '@jest/globals';
import { observeLaunching } from './launching.js';
import { at, done, FACTS, input, leaseWith, MACHINE, NOW, running } from '../testing/phase-input.js';

const launching = { phase: 'Launching' as const, launch: { attempt: 1, startedAt: at(-10_000) }, idleTimeout: '20m', expiresAt: at(3600_000) };
const acquired = { ...launching, providerState: '{"pid":1}', machine: MACHINE };
const launched = { kind: 'launched' as const, state: '{"pid":1}', machine: MACHINE };

describe('observeLaunching', () => {
  it.each([
    ['deleted: withdraw and release', leaseWith(launching, { deletionTimestamp: at(0) as never }), running('acquire/1'), { event: { type: 'DELETE_REQUESTED' } }],
    ['acquire failed: release what it may have made', leaseWith(launching), done({ kind: 'acquire', result: { kind: 'failed', reason: 'NoCapacity', message: 'sold out', state: '{"id":"i-1"}' }, recorded: false }), { event: { type: 'LAUNCH_FAILED', reason: 'NoCapacity' }, status: { providerState: '{"id":"i-1"}' }, consumed: true }],
    [
      'the price cap refused before anything was rented: back to Pending, nothing to release',
      leaseWith(launching),
      done({ kind: 'acquire', result: { kind: 'failed', reason: 'OverPriceCap', message: 'gpu_8x_h100 has capacity but is listed at $23.92/h', state: '{"name":"x"}', nothingRented: true }, recorded: false }),
      { event: { type: 'LAUNCH_REFUSED', reason: 'OverPriceCap', message: expect.stringContaining('$23.92/h') }, consumed: true },
    ],
    ['the price cap refused after a launch answer was lost: release as any failure', leaseWith(launching), done({ kind: 'acquire', result: { kind: 'failed', reason: 'OverPriceCap', message: 'above the cap' }, recorded: false }), { event: { type: 'LAUNCH_FAILED', reason: 'OverPriceCap' }, consumed: true }],
    ['agent not ready by acquireTimeout', leaseWith({ ...acquired, launch: { attempt: 1, startedAt: at(-601_000) } }), undefined, { event: { type: 'LAUNCH_FAILED', reason: 'AcquireTimeout' } }],
    ['acquire past acquireTimeout: the driver cuts it off and says why', leaseWith({ ...launching, launch: { attempt: 1, startedAt: at(-601_000) } }), running('acquire/1'), { requeueAfter: 29_000 }],
    ['acquire ignoring its cut-off: given up on', leaseWith({ ...launching, launch: { attempt: 1, startedAt: at(-631_000) } }), running('acquire/1'), { event: { type: 'LAUNCH_FAILED', reason: 'AcquireTimeout' } }],
    ['acquire still running: wait until its end or the timeout', leaseWith(launching), running('acquire/1'), { requeueAfter: 620_000 }],
    ['launched and recorded by the effect, cache behind: wait for it', leaseWith(launching), done({ kind: 'acquire', result: launched, recorded: true }), { requeueAfter: 1000 }],
    ['launched, record lost: record it now', leaseWith(launching), done({ kind: 'acquire', result: launched, recorded: false }), { status: { providerState: '{"pid":1}', machine: MACHINE }, consumed: true }],
    ['launched and recorded, cache current: take the result', leaseWith(acquired), done({ kind: 'acquire', result: launched, recorded: true }), { consumed: true, requeueAfter: 0 }],
    ['no result and nothing running: a previous controller stopped mid-acquire', leaseWith(launching), undefined, { event: { type: 'LAUNCH_FAILED', reason: 'LaunchInterrupted' } }],
    ['acquired: prepare the machine', leaseWith(acquired), undefined, { start: 'prepare' }],
    ['agent not up yet: wait and try again', leaseWith(acquired), done({ kind: 'prepare', check: { kind: 'unreachable', message: 'connection refused' }, at: NOW }), { status: { message: "waiting for the machine's agent: connection refused" }, wake: { at: NOW + 2000 }, consumed: true }],
    ['host key differs: fail', leaseWith(acquired), done({ kind: 'prepare', check: { kind: 'mismatch', reason: 'HostKeyMismatch', message: 'other key' }, at: NOW }), { event: { type: 'LAUNCH_FAILED', reason: 'HostKeyMismatch' }, consumed: true }],
    ['ready: first check a check interval later', leaseWith(acquired), done({ kind: 'prepare', check: { kind: 'ok', facts: FACTS, busy: 0, keysHash: 'k', machine: MACHINE }, at: NOW }), { event: { type: 'MACHINE_READY' }, status: { readyAt: at(0), installedKeysHash: 'k' }, wake: { at: NOW + 60_000 }, consumed: true }],
  ])('%s', (_name, lease, effect, want) => {
    expect(observeLaunching(input(lease, effect))).toMatchObject(want);
  });

  it('waits for a planned retry of the prepare probe', () => {
    expect(observeLaunching(input(leaseWith(acquired), undefined, { at: NOW + 1500 }))).toEqual({ requeueAfter: 1500 });
  });
});
