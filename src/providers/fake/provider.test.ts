import { describe, it, expect } from '@jest/globals';
import { isProviderError, ProviderError } from '../errors.js';
import type { LaunchRequest, ReleaseRequest } from '../types.js';
import { FAKE_HOST_KEY, FakeProvider } from './provider.js';

function launchRequest(machineName = 'leasehold-a1', signal = new AbortController().signal): LaunchRequest {
  return { leaseID: machineName.slice(10), machineName, offer: 'fake', where: 'gpu', controllerPublicKey: 'ssh-ed25519 AAAA controller', signal, onProgress: () => undefined };
}
function releaseRequest(machineName: string, state = ''): ReleaseRequest {
  return { leaseID: machineName.slice(10), machineName, offer: 'fake', state, signal: new AbortController().signal };
}
async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

describe('FakeProvider', () => {
  it('launches a machine by name once, records each call, and lists and gets it', async () => {
    const p = new FakeProvider();
    const first = await p.launch(launchRequest());
    const again = await p.launch(launchRequest());
    expect(again).toEqual(first);
    expect(first.target.ssh).toEqual({ host: 'leasehold-a1.fake', port: 22, hostKey: FAKE_HOST_KEY });
    expect(p.launchCalls.map((c) => c.machineName)).toEqual(['leasehold-a1', 'leasehold-a1']);
    expect(p.machines.size).toBe(1);
    const machine = await p.get('leasehold-a1');
    expect(machine).toEqual({ name: 'leasehold-a1', id: 'fake-1', state: 'Running', providerStatus: 'running' });
    expect(await p.list()).toEqual([machine]);
    expect(p.getCalls).toEqual(['leasehold-a1']);
    expect(p.listCalls).toBe(1);
  });

  it('gives launched machines the target the test chooses', async () => {
    const p = new FakeProvider({ target: (req) => ({ url: `https://${req.machineName}.example` }) });
    expect((await p.launch(launchRequest())).target).toEqual({ url: 'https://leasehold-a1.example' });
  });

  it('releases by the launch state or, without one, by name; a second release is a no-op', async () => {
    const p = new FakeProvider();
    const launched = await p.launch(launchRequest('leasehold-a1'));
    await p.launch(launchRequest('leasehold-b2'));
    await p.release(releaseRequest('leasehold-ignored', launched.state));
    await p.release(releaseRequest('leasehold-b2'));
    await p.release(releaseRequest('leasehold-b2'));
    expect(p.machines.size).toBe(0);
    expect(p.releaseCalls).toHaveLength(3);
    expect(isProviderError(await failure(p.get('leasehold-a1')), 'NotFound')).toBe(true);
  });

  it('lists only machines under its name prefix, including ones it did not launch', async () => {
    const p = new FakeProvider();
    p.add('leasehold-orphan', 'Terminating');
    p.add('someone-else');
    expect(await p.list()).toEqual([{ name: 'leasehold-orphan', id: 'fake-1', state: 'Terminating', providerStatus: 'terminating' }]);
    expect((await new FakeProvider({ namePrefix: 'someone-' }).list())).toEqual([]);
  });

  it('fails the next calls of an operation with the errors set, once each, then works again', async () => {
    const p = new FakeProvider();
    const capacity = new ProviderError('InsufficientCapacity', 'none left', { state: '' });
    const limited = new ProviderError('RateLimited', 'slow down');
    p.failNext('launch', capacity, limited);
    p.failNext('release', new ProviderError('Timeout', 'no answer'));
    p.failNext('list', new ProviderError('Unauthorized', 'bad key'));
    p.failNext('get', new ProviderError('Unknown', 'HTTP 500'));
    expect(await failure(p.launch(launchRequest()))).toBe(capacity);
    expect(await failure(p.launch(launchRequest()))).toBe(limited);
    expect(p.machines.size).toBe(0);
    await p.launch(launchRequest());
    expect(isProviderError(await failure(p.release(releaseRequest('leasehold-a1'))), 'Timeout')).toBe(true);
    expect(p.machines.size).toBe(1);
    expect(isProviderError(await failure(p.list()), 'Unauthorized')).toBe(true);
    expect(isProviderError(await failure(p.get('leasehold-a1')), 'Unknown')).toBe(true);
    expect(await p.list()).toHaveLength(1);
    expect(p.launchCalls).toHaveLength(3);
  });

  it('holds launches at a gate until the test lets them through, one or all', async () => {
    const p = new FakeProvider();
    const gate = p.holdLaunches();
    const a = p.launch(launchRequest('leasehold-a1'));
    const b = p.launch(launchRequest('leasehold-b2'));
    const c = p.launch(launchRequest('leasehold-c3'));
    await gate.whenWaiting(3);
    expect(p.machines.size).toBe(0);
    expect(gate.letOneThrough()).toBe(true);
    await a;
    expect([...p.machines.keys()]).toEqual(['leasehold-a1']);
    expect(gate.waiting).toBe(2);
    gate.open();
    await Promise.all([b, c]);
    expect(gate.letOneThrough()).toBe(false);
    await p.launch(launchRequest('leasehold-d4'));
    expect(p.machines.size).toBe(4);
  });

  it('ends a held launch with a Timeout and no machine when it is cancelled', async () => {
    const p = new FakeProvider();
    const gate = p.holdLaunches();
    const cancel = new AbortController();
    const held = p.launch(launchRequest('leasehold-a1', cancel.signal));
    const other = p.launch(launchRequest('leasehold-b2'));
    await gate.whenWaiting(2);
    cancel.abort();
    const err = await failure(held);
    expect(isProviderError(err, 'Timeout')).toBe(true);
    expect(isProviderError(err) && err.state).toBe('');
    expect(gate.waiting).toBe(1);
    gate.open();
    await other;
    expect([...p.machines.keys()]).toEqual(['leasehold-b2']);
    const already = new AbortController();
    already.abort();
    p.holdLaunches();
    expect(isProviderError(await failure(p.launch(launchRequest('leasehold-c3', already.signal))), 'Timeout')).toBe(true);
  });
});
