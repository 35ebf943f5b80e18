import { describe, expect, it } from '@jest/globals';
import { observeReleasing } from './releasing.js';
import { at, done, input, leaseWith, MACHINE, NOW, running } from '../testing/phase-input.js';

const releasing = { phase: 'Releasing' as const, releaseAttempts: 2, launch: { attempt: 1, startedAt: at(-10_000) } };

describe('observeReleasing', () => {
  it.each([
    ['an acquire still runs: cancel it and wait', leaseWith(releasing), running('acquire/1'), undefined, { cancel: true }],
    ['a probe still runs: cancel it and wait', leaseWith(releasing), running('check/1'), undefined, { cancel: true }],
    ['the release runs: wait', leaseWith(releasing), running('release/3'), undefined, {}],
    ['nothing runs: release', leaseWith(releasing), undefined, undefined, { start: 'release' }],
    ['a retry is planned: wait for it', leaseWith(releasing), undefined, { at: NOW + 5000 }, { requeueAfter: 5000 }],
    ['confirmed', leaseWith(releasing), done({ kind: 'release', at: NOW }), undefined, { event: { type: 'RELEASE_CONFIRMED' }, status: { releasedAt: at(0), releaseAttempts: 3 }, consumed: true }],
    ['failed: count it and say when it is retried', leaseWith(releasing), done({ kind: 'release', error: 'exit 1', at: NOW }), undefined, { event: { type: 'RELEASE_FAILED', message: 'release attempt 3 failed: exit 1; retrying in 60s' }, status: { releaseAttempts: 3, lastReleaseError: 'exit 1' }, consumed: true }],
    ['a withdrawn acquire that made a machine: its state goes to status first', leaseWith(releasing), done({ kind: 'acquire', result: { kind: 'launched', state: '{"pid":7}', machine: MACHINE }, recorded: false }), undefined, { status: { providerState: '{"pid":7}' }, consumed: true }],
    ['a recorded state is not replaced by a late acquire', leaseWith({ ...releasing, providerState: '{"pid":1}' }), done({ kind: 'acquire', result: { kind: 'failed', reason: 'AcquireWithdrawn', message: 'x', state: '{"pid":7}' }, recorded: false }), undefined, { status: {}, consumed: true }],
    ['a probe result has no use any more', leaseWith(releasing), done({ kind: 'check', check: { kind: 'unreachable', message: 'x' }, at: NOW }), undefined, { consumed: true }],
  ])('%s', (_name, lease, effect, wake, want) => {
    expect(observeReleasing(input(lease, effect, wake))).toMatchObject(want);
  });
});
