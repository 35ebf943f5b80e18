// The run's rules that hinge on what the API answers: a lost answer to
// creating a Lease, a conflict when marking activity, leaving the waiters.
import { describe, expect, it } from '@jest/globals';
import type { Lease } from '../src/api/lease.js';
import { createLease, CREATED_BY_ANNOTATION, CREATED_BY_RUN, leave, WAITERS_ANNOTATION } from './acquire.js';
import { EXIT, ExitError } from './exit-codes.js';
import { AnswerLostError, type LeaseAPI } from './leaseapi.js';
import { addDeviceKey, markActivity } from './lease-use.js';
import type { DeviceKey } from './device-key.js';
import { generateControllerKey } from '../src/machine/keys.js';
import { Progress } from './output.js';

const conflict = () => Object.assign(new Error('conflict'), { code: 409 });

/** A LeaseAPI whose answers are scripted per call; `calls` records what was sent. */
function fakeAPI(script: Partial<Record<keyof LeaseAPI, Array<() => unknown>>>) {
  const calls: Array<[string, unknown[]]> = [];
  const api = new Proxy({}, {
    get: (_, method: string) => async (...args: unknown[]) => {
      calls.push([method, args]);
      const next = script[method as keyof LeaseAPI]?.shift();
      if (!next) throw new Error(`unexpected ${method}`);
      return next();
    },
  }) as LeaseAPI;
  return { api, calls };
}

const lease = (rv: string, status: Record<string, unknown>, annotations: Record<string, string> = {}): Lease =>
  ({ metadata: { name: 'l', namespace: 'ml', resourceVersion: rv, annotations }, spec: { where: 'gpu', sshKeys: [] }, status }) as unknown as Lease;
const quiet = () => new Progress({ write: () => true, isTTY: false });
const waiting = (api: LeaseAPI) => ({ api, progress: quiet(), runID: 'r1', signal: new AbortController().signal });

describe('a lost answer to creating the Lease', () => {
  it('is asked once more; AlreadyExists then means the first request made it', async () => {
    const made = lease('5', {});
    const { api, calls } = fakeAPI({ create: [() => { throw new AnswerLostError('lost'); }, () => { throw conflict(); }], get: [() => made] });
    expect(await createLease(waiting(api), lease('', {}))).toBe(made);
    expect(calls.map((c) => c[0])).toEqual(['create', 'create', 'get']);
  });

  it.each([
    ['lost again', () => { throw new AnswerLostError('lost'); }, /no answer again/],
    ['refused the second time', () => { throw Object.assign(new Error('quota'), { code: 403 }); }, /refused: quota/],
  ])('%s: the Lease is withdrawn and the run fails, saying so', async (_, second, why) => {
    const { api, calls } = fakeAPI({ create: [() => { throw new AnswerLostError('lost'); }, second], delete: [() => true] });
    const err = await createLease(waiting(api), lease('', {})).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExitError);
    expect((err as ExitError).code).toBe(EXIT.runFailed);
    expect((err as Error).message).toMatch(why);
    expect((err as Error).message).toMatch(/it may have been made with nobody told, so it was withdrawn/);
    expect(calls.map((c) => c[0])).toEqual(['create', 'create', 'delete']);
  });

  it('a plain refusal is not retried', async () => {
    const { api, calls } = fakeAPI({ create: [() => { throw Object.assign(new Error('forbidden'), { code: 403 }); }] });
    await expect(createLease(waiting(api), lease('', {}))).rejects.toThrow('forbidden');
    expect(calls).toHaveLength(1);
  });
});

describe('marking activity', () => {
  it('writes leasehold.dev/activity with the resourceVersion it read', async () => {
    const { api, calls } = fakeAPI({ patch: [() => lease('8', { phase: 'Ready' })] });
    await markActivity(api, lease('7', { phase: 'Ready' }), () => Date.parse('2026-03-01T12:00:00.400Z'));
    expect(calls[0]![1][2]).toEqual({ metadata: { annotations: { 'leasehold.dev/activity': '2026-03-01T12:00:00Z' }, resourceVersion: '7' } });
  });

  it('refuses before anything runs when a conflict shows the release was recorded', async () => {
    const { api, calls } = fakeAPI({ patch: [() => { throw conflict(); }], get: [() => lease('9', { phase: 'Releasing', endReason: 'IdleTimeout' })] });
    const err = await markActivity(api, lease('7', { phase: 'Idle' })).catch((e: unknown) => e);
    expect((err as ExitError).code).toBe(EXIT.leaseUnusable);
    expect((err as Error).message).toMatch(/is Releasing \(IdleTimeout\); its release is recorded/);
    expect(calls.map((c) => c[0])).toEqual(['patch', 'get']);
  });

  it('writes again on a conflict that left the Lease usable', async () => {
    const { api, calls } = fakeAPI({ patch: [() => { throw conflict(); }, () => lease('10', { phase: 'Ready' })], get: [() => lease('9', { phase: 'Ready' })] });
    await markActivity(api, lease('7', { phase: 'Ready' }));
    expect((calls[2]![1][2] as { metadata: { resourceVersion: string } }).metadata.resourceVersion).toBe('9');
  });
});

describe('leaving a Lease on Ctrl-C', () => {
  const ours = { [CREATED_BY_ANNOTATION]: CREATED_BY_RUN };
  it('withdraws a launching Lease a run made when no other run waits, on the resourceVersion that showed none', async () => {
    const { api, calls } = fakeAPI({
      get: [() => lease('3', { phase: 'Launching' }, { ...ours, [WAITERS_ANNOTATION]: 'r1' })],
      patch: [() => lease('4', { phase: 'Launching' }, ours)],
      delete: [() => true],
    });
    expect(await leave({ api, runID: 'r1' }, lease('3', {}), true)).toBe(true);
    expect(calls.map((c) => c[0])).toEqual(['get', 'patch', 'delete']);
    expect(calls[2]![1]).toEqual(['ml', 'l', '4']);
  });

  it.each([
    ['another run waits', { phase: 'Launching' }, { ...ours, [WAITERS_ANNOTATION]: 'r2' }],
    ['it is Ready', { phase: 'Ready' }, ours],
    ['a person made it', { phase: 'Launching' }, {}],
  ])('keeps it when %s', async (_, status, annotations) => {
    const { api, calls } = fakeAPI({ get: [() => lease('3', status, { ...annotations, [WAITERS_ANNOTATION]: `${annotations[WAITERS_ANNOTATION as keyof typeof annotations] ?? ''},r1` })], patch: [() => lease('4', status, annotations)] });
    expect(await leave({ api, runID: 'r1' }, lease('3', {}), true)).toBe(false);
    expect(calls.map((c) => c[0])).toEqual(['get', 'patch']);
  });

  it('looks again when a run joined between its look and the delete', async () => {
    const { api, calls } = fakeAPI({
      get: [() => lease('3', { phase: 'Launching' }, ours), () => lease('5', { phase: 'Launching' }, { ...ours, [WAITERS_ANNOTATION]: 'r2' })],
      delete: [() => { throw conflict(); }],
    });
    expect(await leave({ api, runID: 'r1' }, lease('3', {}), true)).toBe(false);
    expect(calls.map((c) => c[0])).toEqual(['get', 'delete', 'get']);
  });
});

describe('adding the device key', () => {
  const device = (name: string): DeviceKey => {
    const publicKey = generateControllerKey(name).publicKey;
    return { path: `/k/${name}`, privateKey: '', publicKey, id: publicKey.split(' ')[1]! };
  };
  const withKeys = (keys: string[]) => ({ ...lease('7', { phase: 'Ready' }), spec: { where: 'gpu', sshKeys: keys } }) as Lease;

  it('appends it with the resourceVersion read, and leaves a Lease that has it alone', async () => {
    const me = device('me');
    const { api, calls } = fakeAPI({ patch: [() => withKeys([me.publicKey])] });
    await addDeviceKey(api, withKeys(['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOvf2R3h9r4ZtqJ4Yk1sx9z1l8E8ePjG0TWOPSEmj7ZL other']), me);
    expect(calls[0]![1][2]).toEqual({ spec: { sshKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOvf2R3h9r4ZtqJ4Yk1sx9z1l8E8ePjG0TWOPSEmj7ZL other', me.publicKey] }, metadata: { resourceVersion: '7' } });
    const again = fakeAPI({});
    await addDeviceKey(again.api, withKeys([me.publicKey.replace(/ \S+$/, ' renamed')]), me);
    expect(again.calls).toHaveLength(0);
  });

  it('gives the 17th device an error naming leasehold release and removing a key', async () => {
    const full = withKeys(Array.from({ length: 16 }, (_, i) => device(`d${i}`).publicKey));
    const { api } = fakeAPI({});
    const err = await addDeviceKey(api, full, device('seventeenth')).catch((e: unknown) => e);
    expect((err as ExitError).code).toBe(EXIT.leaseUnusable);
    expect((err as Error).message).toBe(
      'Lease l already admits 16 devices, the most spec.sshKeys takes (16); end it with leasehold release l, or remove a device\'s key from spec.sshKeys (kubectl edit leases.leasehold.dev l)',
    );
  });
});
