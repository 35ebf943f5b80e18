import { describe, expect, it } from '@jest/globals';
import { busyRunners, demand, jobFits, runnerLabels, type Demand, type DemandInput } from './demand.js';
import { host, job, runner, spec, times } from '../testing/pool.js';

const input = (over: Partial<DemandInput> = {}): DemandInput => ({
  spec,
  hosts: [],
  observation: { jobs: [], runners: [] },
  affordableLaunches: 100,
  ...over,
});

describe('jobFits', () => {
  const github = { repositories: ['swack-tools/oxidex'], labels: ['oxidex'] };
  it.each<[string, Parameters<typeof job>[1], string, boolean]>([
    ['asks for the pool label', ['self-hosted', 'oxidex'], 'swack-tools/oxidex', true],
    ['labels compare without case', ['Self-Hosted', 'OXIDEX', 'Linux'], 'Swack-Tools/Oxidex', true],
    ['a label the runners lack', ['self-hosted', 'oxidex', 'gpu'], 'swack-tools/oxidex', false],
    ['a hosted runner label', ['ubuntu-latest'], 'swack-tools/oxidex', false],
    ['does not ask for the pool label', ['self-hosted'], 'swack-tools/oxidex', false],
    ['another repository', ['self-hosted', 'oxidex'], 'swack-tools/other', false],
  ])('%s: %s', (_name, labels, repository, fits) => {
    expect(jobFits(job('queued', labels, { repository }), github)).toBe(fits);
  });

  it('without spec labels, every job the default labels cover counts', () => {
    expect(jobFits(job('queued', ['self-hosted', 'linux']), { repositories: ['swack-tools/oxidex'] })).toBe(true);
    expect(jobFits(job('queued', ['self-hosted', 'arm64']), { repositories: ['swack-tools/oxidex'] })).toBe(false);
  });

  it('runner labels are the defaults plus the pool labels, once each', () => {
    expect(runnerLabels({ labels: ['Linux', 'oxidex'] })).toEqual(['self-hosted', 'linux', 'x64', 'oxidex']);
  });
});

describe('busyRunners', () => {
  it('a runner with a job in progress is busy even while its flag still reads false (the flag lags)', () => {
    const runners = [runner('a'), runner('b', true), runner('c')];
    expect([...busyRunners(runners, [job('in_progress', ['self-hosted'], { runnerName: 'a' })])].sort()).toEqual(['a', 'b']);
  });
});

describe('demand', () => {
  const idle = (n: number) => times(n, (i) => host(`h${i}`, 'Idle'));
  it.each<[string, Partial<DemandInput>, Partial<Demand>]>([
    ['nothing queued: the floor', {}, { desired: 1, launch: 1, surplus: 0 }],
    ['nothing queued and the floor up', { hosts: idle(1), observation: { jobs: [], runners: [runner('h0')] } }, { desired: 1, launch: 0, surplus: 0, idle: 1 }],
    ['20 queued jobs: up to maxHosts', { observation: { jobs: times(20, () => job('queued')), runners: [] } }, { queued: 20, desired: 10, launch: 10 }],
    [
      'idle runners absorb queued jobs',
      { hosts: idle(3), observation: { jobs: times(2, () => job('queued')), runners: times(3, (i) => runner(`h${i}`)) } },
      { desired: 2, launch: 0, surplus: 1 },
    ],
    [
      'busy runners plus queued jobs',
      { hosts: [host('h0', 'Busy'), host('h1', 'Idle')], observation: { jobs: times(3, () => job('queued')), runners: [runner('h0', true), runner('h1')] } },
      { busy: 1, idle: 1, desired: 4, launch: 2 },
    ],
    [
      'a host SSH saw running a job is busy while its flag reads false: the queued job gets a host of its own',
      { hosts: [host('h0', 'Busy')], observation: { jobs: [job('queued')], runners: [runner('h0')] } },
      { busy: 1, idle: 0, desired: 2, launch: 1 },
    ],
    [
      'launching and registering hosts already count',
      { hosts: [host('h0', 'Launching'), host('h1', 'Registering')], observation: { jobs: times(2, () => job('queued')), runners: [] } },
      { desired: 2, launch: 0 },
    ],
    [
      'draining hosts are not capacity but count against maxHosts',
      { spec: { ...spec, maxHosts: 3 }, hosts: [host('d0', 'Draining'), host('d1', 'Deleting')], observation: { jobs: times(5, () => job('queued')), runners: [] } },
      { desired: 3, launch: 1 },
    ],
    [
      'a marked orphan is no capacity',
      { hosts: [host('o', 'Registering', { orphanSince: '2026-12-03T11:55:00Z' }), host('h0', 'Idle')], observation: { jobs: times(2, () => job('queued')), runners: [runner('h0')] } },
      { desired: 2, launch: 1, surplus: 0 },
    ],
    [
      'a host whose runner went offline is no capacity: the floor gets a new host at once',
      { hosts: [host('o', 'Offline', { offlineSince: '2026-12-03T11:59:00Z' })], observation: { jobs: [], runners: [runner('o', false, { status: 'offline' })] } },
      { desired: 1, launch: 1, idle: 0, surplus: 0 },
    ],
    [
      'an offline host is no capacity for queued jobs either, but counts against maxHosts',
      { spec: { ...spec, maxHosts: 2 }, hosts: [host('o', 'Offline'), host('h0', 'Idle')], observation: { jobs: times(3, () => job('queued')), runners: [runner('o', false, { status: 'offline' }), runner('h0')] } },
      { desired: 2, launch: 0 },
    ],
    ['jobs the runners cannot take do not count', { observation: { jobs: times(4, () => job('queued', ['ubuntu-latest'])), runners: [] } }, { queued: 0, desired: 1 }],
    ['the budget holds launches back', { affordableLaunches: 2, observation: { jobs: times(6, () => job('queued')), runners: [] } }, { desired: 6, launch: 2, heldByBudget: 4 }],
    ['no budget left, not even the floor', { affordableLaunches: 0 }, { desired: 1, launch: 0, heldByBudget: 1 }],
    ['floor 0 and nothing queued: all idle hosts are surplus', { spec: { ...spec, floor: 0 }, hosts: idle(2), observation: { jobs: [], runners: times(2, (i) => runner(`h${i}`)) } }, { desired: 0, surplus: 2 }],
  ])('%s', (_name, over, want) => {
    expect(demand(input(over))).toMatchObject(want);
  });

  it('says what it counted and what held launches back', () => {
    const d = demand(input({ affordableLaunches: 1, observation: { jobs: times(3, () => job('queued')), runners: [] } }));
    expect(d.reason).toBe('3 queued jobs the runners can take, 0 busy and 0 idle runners; 3 hosts wanted (floor 1, maxHosts 10), 0 up or coming up; launching 1; 2 launches held back: they would pass dailyBudgetUSD');
  });

  it('never launches past maxHosts, never plans below the floor', () => {
    for (let queued = 0; queued < 15; queued++) {
      for (let up = 0; up <= 10; up++) {
        const d = demand(input({ hosts: idle(up), observation: { jobs: times(queued, () => job('queued')), runners: [] } }));
        expect(up + d.launch).toBeLessThanOrEqual(spec.maxHosts);
        expect(d.desired).toBeGreaterThanOrEqual(spec.floor);
        expect(d.desired).toBeLessThanOrEqual(spec.maxHosts);
      }
    }
  });
});
