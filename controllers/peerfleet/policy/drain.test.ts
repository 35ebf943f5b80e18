import { describe, expect, it } from '@jest/globals';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { drainDecision, parsePrice, reservedGPUs, type DrainInput } from './drain.js';
import type { Occupancy } from './idle.js';

const NOW = Date.parse('2026-12-03T10:00:00Z');
const spec = { listed: true, pricePerGPUHour: 2, ownWorkValuePerGPUHour: 1, maxSessionDuration: '8h' };
const node = (annotations: Record<string, string> = {}): V1Node => ({ metadata: { name: 'gpu-1', annotations } });
const pending = (name: string, value?: string): V1Pod => ({
  metadata: { name, namespace: 'team', ...(value === undefined ? {} : { annotations: { 'leasehold.dev/value-per-gpu-hour': value } }) },
  spec: { containers: [] },
});
const wanted = (...pods: V1Pod[]): Occupancy => ({ kind: 'wanted', pods, message: `our pending pod team/${pods[0]!.metadata!.name} could run on node gpu-1` });
const busy: Occupancy = { kind: 'busy', pods: [], message: 'our pod team/train runs on node gpu-1' };
const idle: Occupancy = { kind: 'idle' };

const input = (over: Partial<DrainInput> = {}): DrainInput => ({ spec, deleting: false, node: node(), occupancy: idle, sessionStartedAt: '2026-12-03T09:00:00Z', now: NOW, ...over });

describe('drainDecision', () => {
  it.each<[string, Partial<DrainInput>, string | false, RegExp | null]>([
    ['nothing: keep lending', {}, false, null],
    ['the PeerFleet is deleted', { deleting: true }, 'Deleted', null],
    ['spec.listed false', { spec: { ...spec, listed: false } }, 'Unlisted', /spec.listed is false/],
    ['the node says lending off', { node: node({ 'leasehold.dev/lending': 'off' }) }, 'NodeUnlisted', /kubectl annotate node gpu-1 leasehold.dev\/lending-/],
    ['the node says lending on', { node: node({ 'leasehold.dev/lending': 'on' }) }, false, null],
    ['an unknown lending value unlists', { node: node({ 'leasehold.dev/lending': 'maybe' }) }, 'NodeUnlisted', null],
    ['reserved GPUs unreadable', { node: node({ 'leasehold.dev/reserved-gpus': 'two' }) }, 'ReservedGPUsUnreadable', /"two", not a whole number of GPUs; fix it with kubectl annotate node gpu-1/],
    ['our work runs on the node', { occupancy: busy }, 'OurWorkRunning', /team\/train/],
    ['queued work annotated higher than the price', { occupancy: wanted(pending('w', '2.01')) }, 'OurWorkWorthMore', /worth 2.01 per GPU-hour/],
    ['queued work annotated at the price: a tie keeps lending', { occupancy: wanted(pending('w', '2')) }, false, null],
    ['queued work annotated lower', { occupancy: wanted(pending('w', '0.5')) }, false, null],
    ['queued work with an unreadable value', { occupancy: wanted(pending('w', '$3')) }, 'ValueUnreadable', /leasehold.dev\/value-per-gpu-hour is "\$3", not US dollars per GPU-hour; set it/],
    ['queued work without a value, default below the price', { occupancy: wanted(pending('w')) }, false, null],
    ['queued work without a value, default above the price', { spec: { ...spec, ownWorkValuePerGPUHour: 5 }, occupancy: wanted(pending('w')) }, 'OurWorkWorthMore', /spec.ownWorkValuePerGPUHour 5/],
    ['queued work without a value, default at the price', { spec: { ...spec, ownWorkValuePerGPUHour: 2 }, occupancy: wanted(pending('w')) }, false, null],
    ['queued work and no default at all', { spec: { listed: true, pricePerGPUHour: 2, maxSessionDuration: '0s' }, occupancy: wanted(pending('w')) }, 'OurWorkQueued', /ownWorkValuePerGPUHour is unset/],
    ['one of several queued pods is worth more', { occupancy: wanted(pending('a', '1'), pending('b', '9')) }, 'OurWorkWorthMore', /team\/b/],
    ['maxSessionDuration reached', { sessionStartedAt: '2026-12-03T02:00:00Z' }, 'MaxSessionDuration', /spec.maxSessionDuration \(8h\)/],
    ['maxSessionDuration not yet reached', { sessionStartedAt: '2026-12-03T02:00:01Z' }, false, null],
    ['0s leaves sessions open-ended', { spec: { ...spec, maxSessionDuration: '0s' }, sessionStartedAt: '2020-01-01T00:00:00Z' }, false, null],
    ['no session: no session limit', { sessionStartedAt: undefined }, false, null],
    ['deletion comes before our work', { deleting: true, occupancy: busy }, 'Deleted', null],
  ])('%s', (_name, over, reason, message) => {
    const d = drainDecision(input(over));
    if (reason === false) {
      expect(d.drain).toBe(false);
      return;
    }
    expect(d).toMatchObject({ drain: true, reason });
    if (message) expect(d).toMatchObject({ message: expect.stringMatching(message) });
  });

  it('says why cheaper queued work does not drain', () => {
    expect(drainDecision(input({ occupancy: wanted(pending('w', '1')) }))).toEqual({
      drain: false,
      withheldGPUs: 0,
      message: 'our pending pod team/w could run on node gpu-1, but is worth no more than pricePerGPUHour 2; lending goes on',
    });
  });

  it('passes the withheld GPUs on to the fit', () => {
    expect(drainDecision(input({ node: node({ 'leasehold.dev/reserved-gpus': '2' }) }))).toEqual({ drain: false, withheldGPUs: 2 });
  });
});

describe('parsePrice', () => {
  it.each([['2', 2], ['2.50', 2.5], [' 0 ', 0], ['0.000001', 0.000001]])('%s is %s', (s, want) => expect(parsePrice(s)).toBe(want));
  it.each([[''], ['-1'], ['1e3'], ['$2'], ['2,50'], ['Infinity'], ['NaN'], ['01'], ['1.']])('%s is not a price', (s) => expect(parsePrice(s)).toBeUndefined());
});

describe('reservedGPUs', () => {
  it.each<[Record<string, string>, object]>([
    [{}, { ok: true, gpus: 0 }],
    [{ 'leasehold.dev/reserved-gpus': '3' }, { ok: true, gpus: 3 }],
    [{ 'leasehold.dev/reserved-gpus': '-1' }, { ok: false }],
    [{ 'leasehold.dev/reserved-gpus': '1.5' }, { ok: false }],
  ])('%j', (annotations, want) => expect(reservedGPUs(node(annotations))).toMatchObject(want));
});
