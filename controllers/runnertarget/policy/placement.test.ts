import { describe, expect, it } from '@jest/globals';
import { launchErrorKind, nextPlacement, placementOrder, tierOrder, type LaunchErrorKind, type LaunchFailure, type Placement } from './placement.js';
import { spec } from '../testing/pool.js';

const gce = { ...spec.gce, zones: ['us-central1-a', 'us-central1-b'] };
/** "spot 8 a": SPOT n2d-standard-8 in us-central1-a. */
const label = (p: Placement) => `${p.provisioningModel === 'SPOT' ? 'spot' : 'std'} ${p.machineType.replace('n2d-standard-', '')} ${p.zone.slice(-1)}`;

describe('launchErrorKind', () => {
  it.each<[string | undefined, LaunchErrorKind]>([
    ['ZONE_RESOURCE_POOL_EXHAUSTED', 'capacity'],
    ['ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS', 'capacity'],
    ['QUOTA_EXCEEDED', 'quota'],
    ['RESOURCE_NOT_FOUND', 'other'],
    [undefined, 'other'],
  ])('%s is %s', (code, kind) => expect(launchErrorKind(code)).toBe(kind));
});

describe('tierOrder', () => {
  it.each<[number, number, number[]]>([
    [3, 0, [0, 1, 2]],
    [3, 1, [1, 2, 0]],
    [3, 2, [2, 1, 0]],
    [3, 7, [2, 1, 0]],
    [1, 0, [0]],
  ])('%s tiers from %s: %j', (count, start, want) => expect(tierOrder(count, start)).toEqual(want));
});

describe('placementOrder', () => {
  it('zones within a tier, then the next tier', () => {
    expect(placementOrder(gce, 0).map(label)).toEqual(['spot 8 a', 'spot 8 b', 'spot 16 a', 'spot 16 b']);
  });
  it('starts at the pool tier', () => {
    expect(placementOrder(gce, 1).map(label)).toEqual(['spot 16 a', 'spot 16 b', 'spot 8 a', 'spot 8 b']);
  });
  it('standard placements come after every spot one, at the standard price', () => {
    const order = placementOrder({ ...gce, fallbackToStandard: true }, 0);
    expect(order.map(label)).toEqual(['spot 8 a', 'spot 8 b', 'spot 16 a', 'spot 16 b', 'std 8 a', 'std 8 b', 'std 16 a', 'std 16 b']);
    expect(order.map((p) => p.pricePerHour)).toEqual([0.07, 0.07, 0.14, 0.14, 0.35, 0.35, 0.7, 0.7]);
  });
});

describe('nextPlacement', () => {
  const order = placementOrder({ ...gce, fallbackToStandard: true }, 0);
  const spotOnly = placementOrder(gce, 0);
  const at = (l: string) => order.find((p) => label(p) === l)!;
  const fail = (l: string, code: string): LaunchFailure => ({ placement: at(l), code, message: `${code} in ${at(l).zone}` });
  const CAP = 'ZONE_RESOURCE_POOL_EXHAUSTED';
  const QUOTA = 'QUOTA_EXCEEDED';

  it.each<[string, readonly Placement[], LaunchFailure[], string]>([
    ['first try', order, [], 'spot 8 a'],
    ['zone exhausted: next zone', order, [fail('spot 8 a', CAP)], 'spot 8 b'],
    ['zone exhausted with details: next zone', order, [fail('spot 8 a', `${CAP}_WITH_DETAILS`)], 'spot 8 b'],
    ['quota: next tier, skipping the other zones of the tier', order, [fail('spot 8 a', QUOTA)], 'spot 16 a'],
    ['both zones exhausted: next tier', order, [fail('spot 8 a', CAP), fail('spot 8 b', CAP)], 'spot 16 a'],
    ['no spot anywhere: standard', order, [fail('spot 8 a', QUOTA), fail('spot 16 a', CAP), fail('spot 16 b', CAP)], 'std 8 a'],
  ])('%s', (_name, list, failures, want) => {
    const choice = nextPlacement(list, failures);
    expect(choice.kind === 'try' && label(choice.placement)).toBe(want);
  });

  it('no spot anywhere and no fallback: NoCapacity, naming the switch', () => {
    const choice = nextPlacement(spotOnly, [fail('spot 8 a', QUOTA), fail('spot 16 a', CAP), fail('spot 16 b', CAP)]);
    expect(choice).toMatchObject({ kind: 'none', reason: 'NoCapacity', message: expect.stringMatching(/set spec.gce.fallbackToStandard/) });
  });

  it('standard also exhausted: NoCapacity', () => {
    const failures = [fail('spot 8 a', QUOTA), fail('spot 16 a', QUOTA), fail('std 8 a', QUOTA), fail('std 16 a', CAP), fail('std 16 b', CAP)];
    expect(nextPlacement(order, failures)).toMatchObject({ kind: 'none', reason: 'NoCapacity' });
  });

  it('any other error stops the launch', () => {
    expect(nextPlacement(order, [fail('spot 8 a', 'PERMISSION_DENIED')])).toMatchObject({
      kind: 'none',
      reason: 'LaunchFailed',
      message: 'launching n2d-standard-8 in us-central1-a failed: PERMISSION_DENIED: PERMISSION_DENIED in us-central1-a',
    });
  });

  it('skips placements the budget cannot pay, and says so', () => {
    const choice = nextPlacement(order, [fail('spot 8 a', QUOTA)], (price) => price < 0.1);
    expect(choice).toMatchObject({ kind: 'none', reason: 'OverBudget', message: expect.stringMatching(/raise spec.dailyBudgetUSD/) });
    const cheaper = nextPlacement(order, [fail('spot 8 a', CAP)], (price) => price < 0.1);
    expect(cheaper.kind === 'try' && label(cheaper.placement)).toBe('spot 8 b');
  });
});
