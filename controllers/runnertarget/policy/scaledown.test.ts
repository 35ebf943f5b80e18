import { describe, expect, it } from '@jest/globals';
import type { RunnerHost } from '../../../src/api/index.js';
import type { HostProbe, PoolRunner } from '../observation.js';
import { afterDeregister, drainStep, OFFLINE_GRACE_MS, offlineDrains, pickDrains, type DrainStep } from './scaledown.js';
import { NOW, ago, host, runner } from '../testing/pool.js';

const SMALL = 'n2d-standard-8';

describe('pickDrains', () => {
  const idle = (name: string, idleFor: number, over: Partial<RunnerHost> = {}) => host(name, 'Idle', { idleSince: ago(idleFor), ...over });
  const pick = (hosts: RunnerHost[], surplus: number, runners: PoolRunner[] = hosts.map((h) => runner(h.name)), busy: string[] = []) =>
    pickDrains(hosts, runners, new Set(busy), surplus, SMALL, NOW);

  it.each<[string, RunnerHost[], number, string[], PoolRunner[] | undefined, string[]]>([
    ['no surplus: nothing', [idle('a', 600)], 0, [], undefined, []],
    ['one of two', [idle('a', 600), idle('b', 900)], 1, [], undefined, ['b']],
    ['never a busy host', [host('a', 'Busy'), idle('b', 600)], 2, [], undefined, ['b']],
    ['never a host whose runner reads busy', [idle('a', 600), idle('b', 600)], 2, ['a'], undefined, ['b']],
    ['never within the busy-flag lag', [idle('a', 59), idle('b', 61)], 2, [], undefined, ['b']],
    ['never without an idleSince', [host('a', 'Idle'), idle('b', 600)], 2, [], undefined, ['b']],
    ['never a host whose runner is offline', [idle('a', 600), idle('b', 600)], 2, [], [runner('a', false, { status: 'offline' }), runner('b')], ['b']],
    ['never a host with no runner', [idle('a', 600), idle('b', 600)], 2, [], [runner('b')], ['b']],
    ['never launching, registering, draining', [host('a', 'Launching'), host('b', 'Registering'), host('c', 'Draining')], 3, [], undefined, []],
    ['off-tier hosts first', [idle('a', 900), idle('b', 60, { machineType: 'n2d-standard-16', pricePerHour: 0.14 })], 1, [], undefined, ['b']],
    ['standard before spot', [idle('a', 900), idle('b', 60, { provisioningModel: 'STANDARD', pricePerHour: 0.35 })], 1, [], undefined, ['b']],
    ['longest idle first', [idle('a', 300), idle('b', 900), idle('c', 600)], 2, [], undefined, ['b', 'c']],
  ])('%s', (_name, hosts, surplus, busy, runners, drain) => {
    expect(pick(hosts, surplus, runners, busy).drain).toEqual(drain);
  });

  it('says why each idle host stays', () => {
    const { kept } = pick([idle('a', 10), idle('b', 600), idle('c', 900)], 1, undefined, ['b']);
    expect(kept).toEqual([
      { host: 'a', reason: "idle for less than 60 s, within the lag of GitHub's busy flag" },
      { host: 'b', reason: 'its runner is busy' },
    ]);
  });
});

describe('offlineDrains', () => {
  it('the default grace is a few minutes, far below the boot grace', () => expect(OFFLINE_GRACE_MS).toBe(5 * 60_000));

  it.each<[string, RunnerHost[], number | undefined, string[]]>([
    ['offline within the grace: kept', [host('a', 'Offline', { offlineSince: ago(299) })], undefined, []],
    ['offline past the grace: drained', [host('a', 'Offline', { offlineSince: ago(300) })], undefined, ['a']],
    ['the grace is a setting', [host('a', 'Offline', { offlineSince: ago(20) }), host('b', 'Offline', { offlineSince: ago(5) })], 10_000, ['a']],
    ['no offline clock yet: kept until one starts', [host('a', 'Offline')], 0, []],
    ['only Offline hosts: an idle or registering one is not', [host('a', 'Idle', { offlineSince: ago(900) }), host('b', 'Registering', { offlineSince: ago(900) })], undefined, []],
  ])('%s', (_name, hosts, grace, want) => {
    expect(offlineDrains(hosts, NOW, grace).map((d) => d.host)).toEqual(want);
  });

  it('says since when, the grace and the flag', () => {
    expect(offlineDrains([host('a', 'Offline', { offlineSince: ago(600) })], NOW)[0]!.reason).toBe(
      'runner a has been offline since 2026-12-03T11:50:00Z, past the offline grace of 300 s (--runner-offline-grace): it is removed unless SSH sees a job, and the VM deleted once SSH confirms none runs',
    );
  });
});

describe('afterDeregister', () => {
  it.each<['removed' | 'gone' | 'busy', RunnerHost['state']]>([
    ['removed', 'Draining'],
    ['gone', 'Draining'],
    ['busy', 'Busy'],
  ])('%s -> %s', (outcome, state) => expect(afterDeregister(host('a', 'Idle'), outcome).state).toBe(state));
});

describe('drainStep', () => {
  const draining = host('a', 'Draining');
  const probe = (job: HostProbe['job']): HostProbe => ({ job });
  it.each<[string, PoolRunner | undefined, boolean, HostProbe | undefined, number, DrainStep['action']]>([
    ['runner gone, no job: delete', undefined, false, probe('none'), 0, 'delete'],
    ['runner gone, no job, jobs waiting: still delete (a fresh host takes them)', undefined, false, probe('none'), 3, 'delete'],
    ['a job runs, nothing waits: leave', undefined, false, probe('running'), 0, 'leave'],
    ['a job runs, jobs wait: re-register', undefined, false, probe('running'), 2, 'reregister'],
    ['SSH failed: wait, never delete', undefined, false, probe('unknown'), 0, 'wait'],
    ['not probed: wait', undefined, false, undefined, 0, 'wait'],
    ['the runner is still registered: deregister first', runner('a'), false, probe('none'), 0, 'deregister'],
    ['the runner is registered, not probed: deregister first', runner('a'), false, undefined, 0, 'deregister'],
    ['the runner is registered and busy: leave, never deregister', runner('a', true), true, probe('none'), 0, 'leave'],
    ['the runner is registered, its flag false but a job in progress: leave', runner('a'), true, undefined, 0, 'leave'],
    ['the runner is registered and SSH sees a job: leave', runner('a'), false, probe('running'), 0, 'leave'],
  ])('%s', (_name, r, busy, p, waiting, action) => {
    expect(drainStep(draining, r, busy, p, waiting).action).toBe(action);
  });

  it('deletes only with the runner gone and no job confirmed; deregisters only a runner with no job', () => {
    for (const r of [undefined, runner('a'), runner('a', true)]) {
      for (const job of ['running', 'none', 'unknown'] as const) {
        for (const waiting of [0, 1]) {
          const busy = r?.busy ?? false;
          const action = drainStep(draining, r, busy, { job }, waiting).action;
          expect({ r: r?.name, busy, job, waiting, deletes: action === 'delete' }).toEqual({ r: r?.name, busy, job, waiting, deletes: r === undefined && job === 'none' });
          if (action === 'deregister') expect({ busy, job }).toEqual({ busy: false, job: expect.not.stringMatching(/^running$/) });
        }
      }
    }
  });
});
