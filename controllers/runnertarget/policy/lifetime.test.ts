// The lifetime bound: idle hosts are replaced before Compute Engine deletes
// them at spec.gce.maxRunDuration; busy, young or runner-less ones are not.
import { describe, expect, it } from '@jest/globals';
import type { RunnerHost, RunnerTargetSpec } from '../../../src/api/index.js';
import type { Observation } from '../observation.js';
import { lifetimeDrains, lifetimeMarginMs } from './lifetime.js';
import { planCheck } from './plan.js';
import { NOW, ago, host, runner, spec, vm } from '../testing/pool.js';

const H = 3600;
const withBound = (maxRunDuration: string, checkInterval = '5m'): RunnerTargetSpec => ({ ...spec, checkInterval, gce: { ...spec.gce, maxRunDuration } });

describe('lifetimeMarginMs', () => {
  it.each([
    ['24h', '5m', 30 * 60_000],
    ['24h', '1h', 2 * H * 1000],
    ['1h', '1h', 30 * 60_000],
    ['2h', '2h', H * 1000],
  ])('bound %s, check every %s: %d ms', (bound, interval, want) => {
    expect(lifetimeMarginMs(withBound(bound, interval))).toBe(want);
  });
});

describe('lifetimeDrains', () => {
  const idle = (name: string, ageS: number, over: Partial<RunnerHost> = {}) => host(name, 'Idle', { createdAt: ago(ageS), idleSince: ago(600), ...over });
  it.each<[string, RunnerHost, boolean, boolean]>([
    ['an idle host past the bound less the margin', idle('a', 23.6 * H), true, false],
    ['an idle host just short of it', idle('a', 23.4 * H), false, false],
    ['a busy host past it (the job is not cut by the controller)', host('a', 'Busy', { createdAt: ago(23.9 * H) }), false, false],
    ['an idle host whose runner the busy flag shows busy', idle('a', 23.9 * H), false, true],
    ['a Registering host past it (no runner online to remove)', host('a', 'Registering', { createdAt: ago(23.9 * H) }), false, false],
    ['an idle host past it, seen idle for less than the busy-flag lag', idle('a', 23.9 * H, { idleSince: ago(30) }), false, false],
  ])('%s', (_what, h, drained, busy) => {
    const got = lifetimeDrains([h], [runner('a', busy)], new Set(busy ? ['a'] : []), spec, NOW, { lagMs: 60_000 });
    expect(got.map((d) => d.name)).toEqual(drained ? ['a'] : []);
    if (drained) expect(got[0]!.reason).toMatch(/spec\.gce\.maxRunDuration \(24h\)/);
  });
});

it('scales the bound and the margin with --runner-lifetime-scale', () => {
  const h = host('a', 'Idle', { createdAt: ago(12), idleSince: ago(10) });
  // 24h at 1/3600 is 24 s, less a 30 s margin at the same scale (0.5 s): 23.5 s.
  expect(lifetimeDrains([h], [runner('a')], new Set(), spec, NOW, { lagMs: 5_000, scale: 1 / 3600 })).toEqual([]);
  expect(lifetimeDrains([{ ...h, createdAt: ago(24) }], [runner('a')], new Set(), spec, NOW, { lagMs: 5_000, scale: 1 / 3600 }).map((d) => d.name)).toEqual(['a']);
});

describe('planCheck and the lifetime bound', () => {
  const observation = (over: Partial<Observation>): Observation => ({ at: NOW, jobs: [], runners: [], vms: [], probes: new Map(), ...over });
  it('an old idle host at the floor is deregistered with a HostRenewed event; a young one stays', () => {
    const p = planCheck({
      name: 'pool',
      spec,
      status: { hosts: [host('old', 'Idle', { createdAt: ago(23.8 * H), idleSince: ago(900) }), host('young', 'Idle', { createdAt: ago(H), idleSince: ago(900) })] },
      observation: observation({ vms: [vm('old'), vm('young')], runners: [runner('old'), runner('young')] }),
    });
    // The floor is 1 and two idle hosts: one is surplus anyway. Only the old one goes for its age, and it is the one picked.
    expect(p.changes.filter((c) => c.kind === 'deregister').map((c) => c.intent.hosts[0])).toContain('old');
    const solo = planCheck({
      name: 'pool',
      spec: { ...spec, floor: 2 },
      status: { hosts: [host('old', 'Idle', { createdAt: ago(23.8 * H), idleSince: ago(900) }), host('young', 'Idle', { createdAt: ago(H), idleSince: ago(900) })] },
      observation: observation({ vms: [vm('old'), vm('young')], runners: [runner('old'), runner('young')] }),
    });
    expect(solo.changes.filter((c) => c.kind === 'deregister').map((c) => c.intent.hosts[0])).toEqual(['old']);
    expect(solo.plan.drain).toEqual(['old']);
    expect(solo.events).toEqual(expect.arrayContaining([expect.objectContaining({ reason: 'HostRenewed', message: expect.stringContaining('spec.gce.maxRunDuration') })]));
  });
});
