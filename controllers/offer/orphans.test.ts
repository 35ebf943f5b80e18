import { describe, it, expect, beforeEach } from '@jest/globals';
import pino from 'pino';
import type { Offer } from '../../src/api/index.js';
import { ProviderError } from '../../src/providers/errors.js';
import { FakeProvider } from '../../src/providers/fake/provider.js';
import type { ReleaseRequest } from '../../src/providers/types.js';
import { OrphanSweep, type OrphanSweepOptions } from './orphans.js';

const offer = (name: string) => ({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Offer', metadata: { name }, spec: { lambda: {} } }) as unknown as Offer;

const GRACE = 10_000;
let now: number;
let events: { reason: string; message: string; offer: string }[];
let provider: FakeProvider;

function sweeper(opts: Partial<OrphanSweepOptions> = {}) {
  return new OrphanSweep({
    events: { record: async (obj, _type, reason, message) => void events.push({ reason, message, offer: obj.metadata!.name! }) },
    log: pino({ level: 'silent' }),
    graceMs: GRACE,
    namePrefix: 'leasehold-inst0001-',
    mode: 'terminate',
    provider: 'Lambda',
    now: () => now,
    ...opts,
  });
}

beforeEach(() => {
  now = 1_000_000;
  events = [];
  provider = new FakeProvider();
});

describe('OrphanSweep', () => {
  it('releases a machine no Lease owns once it has been seen for the grace period, with a warning event', async () => {
    const orphan = provider.add('leasehold-inst0001-deadbeef');
    const s = sweeper();
    await s.sweep(offer('lambda'), provider, new Set());
    expect(events).toEqual([]);
    now += GRACE - 1;
    await s.sweep(offer('lambda'), provider, new Set());
    expect(events).toEqual([]);
    now += 1;
    await s.sweep(offer('lambda'), provider, new Set());
    expect(events).toEqual([{ offer: 'lambda', reason: 'OrphanInstance', message: expect.stringContaining(`instance ${orphan.id} (leasehold-inst0001-deadbeef) belongs to no Lease`) }]);
    expect(events[0]!.message).toContain('has run for 10s since first seen; terminating it');
    expect(provider.releaseCalls).toEqual([expect.objectContaining({ machineName: 'leasehold-inst0001-deadbeef', leaseID: 'deadbeef', offer: 'lambda', state: '' })]);
    expect(provider.machines.size).toBe(0);
  });

  it('leaves alone the machines the records hold and machines already terminating', async () => {
    provider.add('leasehold-inst0001-ready');
    provider.add('leasehold-inst0001-launching');
    provider.add('leasehold-inst0001-deleting');
    provider.add('leasehold-inst0001-ending', 'Terminating');
    const ended = provider.add('leasehold-inst0001-released');
    // What the records hold: a record outlives its Lease's end until the release is confirmed.
    const leases = new Set(['leasehold-inst0001-ready', 'leasehold-inst0001-launching', 'leasehold-inst0001-deleting']);
    const s = sweeper();
    await s.sweep(offer('lambda'), provider, leases);
    now += GRACE;
    await s.sweep(offer('lambda'), provider, leases);
    expect(events.map((e) => e.message)).toEqual([expect.stringContaining(`instance ${ended.id} (leasehold-inst0001-released)`)]);
    expect(provider.releaseCalls.map((c) => c.machineName)).toEqual(['leasehold-inst0001-released']);
    expect([...provider.machines.keys()].sort()).toEqual(['leasehold-inst0001-deleting', 'leasehold-inst0001-ending', 'leasehold-inst0001-launching', 'leasehold-inst0001-ready']);
  });

  it('never reports or releases a machine named under another installation, or under none', async () => {
    const other = new FakeProvider({ namePrefix: 'leasehold-' });
    other.add('leasehold-other002-deadbeef');
    other.add('leasehold-deadbeef');
    const mine = other.add('leasehold-inst0001-cafef00d');
    const s = sweeper({ graceMs: 0 });
    await s.sweep(offer('lambda'), other, new Set());
    expect(events.map((e) => e.message)).toEqual([expect.stringContaining(`instance ${mine.id} (leasehold-inst0001-cafef00d)`)]);
    expect(other.releaseCalls.map((c) => [c.machineName, c.leaseID])).toEqual([['leasehold-inst0001-cafef00d', 'cafef00d']]);
    expect([...other.machines.keys()].sort()).toEqual(['leasehold-deadbeef', 'leasehold-other002-deadbeef']);
  });

  it('only reports when told to, and says where to end the machine', async () => {
    provider.add('leasehold-inst0001-deadbeef');
    const s = sweeper({ mode: 'report' });
    await s.sweep(offer('lambda'), provider, new Set());
    now += GRACE;
    await s.sweep(offer('lambda'), provider, new Set());
    expect(events[0]!.message).toContain('reporting only (--orphans=report); terminate it in the Lambda console');
    expect(provider.releaseCalls).toEqual([]);
    expect(provider.machines.size).toBe(1);
  });

  it('counts the grace period again for a machine that went away and came back, and keeps each Offer\'s sightings apart', async () => {
    const s = sweeper();
    provider.add('leasehold-inst0001-deadbeef');
    await s.sweep(offer('a'), provider, new Set());
    now += GRACE / 2;
    // Offer b's account lists nothing: that must not make Offer a forget its sighting.
    await s.sweep(offer('b'), new FakeProvider(), new Set());
    now += GRACE / 2;
    const kept = new FakeProvider();
    await s.sweep(offer('a'), kept, new Set());
    now += 1;
    await s.sweep(offer('a'), provider, new Set());
    expect(events).toEqual([]);
    now += GRACE;
    await s.sweep(offer('a'), provider, new Set());
    expect(events).toHaveLength(1);
    s.forget('a');
    provider.add('leasehold-inst0001-other');
    await s.sweep(offer('a'), provider, new Set());
    expect(events).toHaveLength(1);
  });

  it('goes on to the next orphan when one release fails, and fails the sweep when the listing fails', async () => {
    provider.add('leasehold-inst0001-one');
    provider.add('leasehold-inst0001-two');
    provider.failNext('release', new ProviderError('Unknown', 'HTTP 500'));
    const s = sweeper({ graceMs: 0 });
    await s.sweep(offer('lambda'), provider, new Set());
    expect(provider.releaseCalls.map((c) => c.machineName)).toEqual(['leasehold-inst0001-one', 'leasehold-inst0001-two']);
    expect([...provider.machines.keys()]).toEqual(['leasehold-inst0001-one']);
    provider.failNext('list', new ProviderError('Unauthorized', 'bad key'));
    await expect(s.sweep(offer('lambda'), provider, new Set())).rejects.toThrow('bad key');
  });

  it('does not start a second sweep of an Offer while a release of the first is under way', async () => {
    let releaseStarted!: () => void;
    const started = new Promise<void>((resolve) => (releaseStarted = resolve));
    let finishRelease!: () => void;
    class SlowRelease extends FakeProvider {
      held = true;
      override release(req: ReleaseRequest): Promise<void> {
        if (!this.held) return super.release(req);
        releaseStarted();
        return new Promise((resolve) => (finishRelease = resolve));
      }
    }
    const slow = new SlowRelease();
    slow.add('leasehold-inst0001-deadbeef');
    const s = sweeper({ graceMs: 0 });
    const first = s.sweep(offer('lambda'), slow, new Set());
    await started;
    await s.sweep(offer('lambda'), slow, new Set());
    expect(events).toHaveLength(1);
    expect(slow.listCalls).toBe(1);
    slow.held = false;
    finishRelease();
    await first;
    await s.sweep(offer('lambda'), slow, new Set());
    expect(events).toHaveLength(2);
    expect(slow.machines.size).toBe(0);
  });
});
