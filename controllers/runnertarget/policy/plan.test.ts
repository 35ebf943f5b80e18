import { describe, expect, it } from '@jest/globals';
import type { Receipt, RunnerHost, RunnerTargetStatus } from '../../../src/api/index.js';
import type { HostProbe, Observation } from '../observation.js';
import { parsePressure, type PressureEvidence } from './pressure.js';
import { planCheck, plannedStatus, type Change, type CheckPlan, type PlanInput } from './plan.js';
import { NOW, ago, host, iso, job, runner, spec, times, vm } from '../testing/pool.js';

const observation = (over: Partial<Observation> = {}): Observation => ({ at: NOW, jobs: [], runners: [], vms: [], probes: new Map(), ...over });
const plan = (status: RunnerTargetStatus, obs: Partial<Observation>, over: Partial<PlanInput> = {}): CheckPlan =>
  planCheck({ name: 'pool', spec, status, observation: observation(obs), ...over });
const kinds = (p: CheckPlan) => p.changes.map((c) => `${c.kind} ${c.kind === 'resume' ? c.receipt.hosts.join(',') : c.intent.hosts.join(',')}`);
const idleHost = (name: string) => host(name, 'Idle', { idleSince: ago(900) });
const up = (names: string[]) => ({ vms: names.map((n) => vm(n)), runners: names.map((n) => runner(n)) });
const probes = (entries: [string, HostProbe][]) => new Map(entries);

describe('planCheck', () => {
  it('a 20-job queue on an empty pool launches up to maxHosts, on the first tier and zone, as Launching hosts', () => {
    const p = plan({}, { jobs: times(20, () => job('queued')) });
    expect(p.changes).toHaveLength(10);
    expect(p.changes.every((c) => c.kind === 'launch' && c.intent.zone === 'us-central1-a' && c.intent.machineType === 'n2d-standard-8')).toBe(true);
    const launch = p.changes[0] as Extract<Change, { kind: 'launch' }>;
    expect(launch.placements.map((x) => `${x.machineType} ${x.zone}`)).toEqual(['n2d-standard-8 us-central1-a', 'n2d-standard-8 us-central1-b', 'n2d-standard-16 us-central1-a', 'n2d-standard-16 us-central1-b']);
    expect(p.hosts.filter((h) => h.state === 'Launching')).toHaveLength(10);
    expect(new Set(p.hosts.map((h) => h.name)).size).toBe(10);
    expect(p.plan).toMatchObject({ desired: 10, launch: 10, dryRun: false, machineType: 'n2d-standard-8' });
    expect(p.counts).toEqual({ hosts: 10, busy: 0, idle: 0, queued: 20 });
  });

  it('the budget stops launches and says so', () => {
    const p = plan({ spendDay: '2026-12-03', spendEndedUSD: 9.8 }, { jobs: times(20, () => job('queued')) });
    expect(p.plan.launch).toBe(2);
    expect(p.budgetCondition.status).toBe('False');
    expect(p.plan.reason).toMatch(/launches held back: they would pass dailyBudgetUSD; spend today 9.80 USD/);
    const none = plan({ spendDay: '2026-12-03', spendEndedUSD: 10 }, { jobs: times(20, () => job('queued')) });
    expect(none.changes).toEqual([]);
    expect(none.budgetCondition).toMatchObject({ status: 'True', reason: 'DailyBudgetReached' });
  });

  it('no jobs: idle hosts beyond the floor are deregistered first, never deleted straight away', () => {
    const p = plan({ hosts: ['a', 'b', 'c'].map(idleHost) }, up(['a', 'b', 'c']));
    expect(kinds(p)).toEqual(['deregister a', 'deregister b']);
    expect(p.plan.drain).toEqual(['a', 'b']);
    expect(p.plan.delete).toEqual([]);
  });

  it('a busy host is never drained, even with its busy flag false, when a job process was seen', () => {
    const p = plan({ hosts: ['a', 'b'].map(idleHost) }, { ...up(['a', 'b']), probes: probes([['a', { job: 'running' }]]) });
    expect(kinds(p)).toEqual(['deregister b']);
    expect(p.hosts.find((h) => h.name === 'a')!.state).toBe('Busy');
  });

  it.each<[string, HostProbe['job'], number, string[], string | undefined]>([
    ['no job: delete', 'none', 0, ['delete a'], undefined],
    ['a job and nothing queued: leave, and report', 'running', 0, [], 'JobFoundOnDrain'],
    ['a job and jobs queued: register again', 'running', 2, ['register a'], 'JobFoundOnDrain'],
    ['SSH failed: wait, and report', 'unknown', 0, [], 'DrainUnconfirmed'],
  ])('a drained host: %s', (_name, jobState, queued, changes, event) => {
    const hosts = [host('a', 'Draining'), host('f', 'Busy')];
    const p = plan({ hosts }, { vms: [vm('a'), vm('f')], runners: [runner('f', true)], jobs: times(queued, () => job('queued')), probes: probes([['a', { job: jobState }]]) });
    expect(kinds(p).filter((k) => !k.startsWith('launch'))).toEqual(changes);
    if (event) expect(p.events.map((e) => e.reason)).toContain(event);
    if (changes[0] === 'delete a') expect(p.hosts.find((h) => h.name === 'a')!.state).toBe('Deleting');
  });

  it.each<[string, HostProbe['job'], string[], string]>([
    ['no job process: its VM is deleted in the same check', 'none', ['delete b'], 'Deleting'],
    ['unread: its VM is kept for the next look', 'unknown', [], 'Draining'],
  ])('a host whose runner left after its one job drains, and a new host keeps the floor: %s', (_name, job, deletes, state) => {
    const p = plan({ hosts: [idleHost('a'), host('b', 'Busy', { runnerID: 7 })] }, { vms: [vm('a'), vm('b')], runners: [runner('a')], probes: probes([['b', { job }]]) }, { spec: { ...spec, floor: 2 } });
    expect(kinds(p).filter((k) => k.startsWith('delete'))).toEqual(deletes);
    expect(p.hosts.find((h) => h.name === 'b')).toMatchObject({ state });
    expect(p.plan.launch).toBe(1);
  });

  it('a preempted host leaves status, its hours stay in spend, and it is replaced when jobs wait', () => {
    const p = plan({ hosts: [host('a', 'Busy', { createdAt: '2026-12-03T10:00:00Z', pricePerHour: 0.5 })] }, { jobs: [job('queued')] });
    expect(p.ended).toEqual([{ createdAt: '2026-12-03T10:00:00Z', endedAt: iso(NOW), pricePerHour: 0.5 }]);
    expect(p.spend.todayUSD).toBe(1);
    expect(p.events[0]).toMatchObject({ type: 'Warning', reason: 'Preempted' });
    expect(kinds(p)).toEqual([expect.stringMatching(/^launch pool-/)]);
    expect(p.hosts.map((h) => h.name)).not.toContain('a');
  });

  it('a TERMINATED VM is deleted and its runner removed', () => {
    const p = plan({ hosts: [host('a', 'Busy'), idleHost('f')] }, { vms: [vm('a', 'TERMINATED'), vm('f')], runners: [runner('a', true), runner('f')] });
    expect(kinds(p)).toEqual(['removeRunner a', 'delete a']);
  });

  it('orphans: marked at one check, deleted at the next', () => {
    const first = plan({ hosts: [host('o', 'Registering'), idleHost('f')] }, { vms: [vm('o'), vm('f')], runners: [runner('f')] });
    expect(kinds(first)).toEqual([]);
    expect(first.hosts.find((h) => h.name === 'o')!.orphanSince).toBe(iso(NOW));
    const second = plan({ hosts: first.hosts }, { at: NOW + 300_000, vms: [vm('o'), vm('f')], runners: [runner('f')] });
    expect(kinds(second)).toEqual(['delete o']);
    expect(second.plan.delete).toEqual(['o']);
  });

  describe('a runner that goes offline while its VM lives', () => {
    const offlineRunner = runner('a', false, { status: 'offline' });
    const offlineHost = (s: number) => host('a', 'Offline', { offlineSince: ago(s), runnerID: offlineRunner.id });

    it('first seen offline: Offline, no capacity, the floor gets a new host; the offline one is not touched', () => {
      const p = plan({ hosts: [idleHost('a')] }, { vms: [vm('a')], runners: [offlineRunner] });
      expect(p.hosts.find((h) => h.name === 'a')).toMatchObject({ state: 'Offline', offlineSince: iso(NOW) });
      expect(kinds(p)).toEqual([expect.stringMatching(/^launch /)]);
      expect(p.events.map((e) => e.reason)).not.toContain('RunnerOffline');
    });

    it('within the grace: still kept', () => {
      const p = plan({ hosts: [offlineHost(120), idleHost('b')] }, { vms: [vm('a'), vm('b')], runners: [offlineRunner, runner('b')] });
      expect(kinds(p)).toEqual([]);
      expect(p.hosts.find((h) => h.name === 'a')!.state).toBe('Offline');
    });

    it('past the grace: drained like a broken host, its runner removed first, said in an event', () => {
      const p = plan({ hosts: [offlineHost(301), idleHost('b')] }, { vms: [vm('a'), vm('b')], runners: [offlineRunner, runner('b')], probes: probes([['a', { job: 'none' }]]) });
      expect(kinds(p)).toEqual(['deregister a']);
      expect(p.hosts.find((h) => h.name === 'a')).toMatchObject({ state: 'Draining', message: expect.stringMatching(/--runner-offline-grace/) });
      expect(p.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'RunnerOffline', message: expect.stringMatching(/a new host replaces it if jobs need one$/) }));
    });

    it('the grace is a setting', () => {
      const p = plan({ hosts: [offlineHost(20), idleHost('b')] }, { vms: [vm('a'), vm('b')], runners: [offlineRunner, runner('b')] }, { settings: { offlineGraceMs: 10_000 } });
      expect(kinds(p)).toEqual(['deregister a']);
    });

    it('past the grace while SSH sees a job on it: the runner stays until the job ends', () => {
      const p = plan({ hosts: [offlineHost(900), idleHost('b')] }, { vms: [vm('a'), vm('b')], runners: [offlineRunner, runner('b')], probes: probes([['a', { job: 'running' }]]) });
      expect(kinds(p)).not.toContain('deregister a');
      expect(p.hosts.find((h) => h.name === 'a')!.state).toBe('Busy');
    });

    it('once its runner is removed and SSH sees no job, the VM is deleted and, with jobs waiting, a new host launched', () => {
      const p = plan({ hosts: [host('a', 'Draining', { runnerID: offlineRunner.id })] }, { vms: [vm('a')], jobs: [job('queued')], probes: probes([['a', { job: 'none' }]]) });
      expect(kinds(p)).toEqual(['delete a', expect.stringMatching(/^launch /)]);
    });

    it('an open receipt for the host defers the grace to the receipt being finished', () => {
      const receipt: Receipt = { id: 'deregister-1', action: 'Deregister', phase: 'Intended', at: ago(30), hosts: ['a'] };
      const p = plan({ hosts: [offlineHost(900), idleHost('b')], receipts: [receipt] }, { vms: [vm('a'), vm('b')], runners: [offlineRunner, runner('b')] });
      expect(kinds(p)).toEqual(['resume a']);
    });
  });

  it('a ghost runner is removed, and its busy flag is no demand', () => {
    const p = plan({ hosts: [idleHost('f')] }, { vms: [vm('f')], runners: [runner('f'), runner('pool-gone', true)] });
    expect(kinds(p)).toEqual(['removeRunner pool-gone']);
    expect(p.plan.removeRunners).toEqual(['pool-gone']);
    expect(p.demand).toMatchObject({ busy: 0, desired: 1, launch: 0 });
  });

  it('an Intended receipt from a dead check is resumed first, and its host is not acted on again', () => {
    const open: Receipt = { id: 'launch-1', action: 'Launch', phase: 'Intended', at: ago(120), hosts: ['n'], zone: 'us-central1-a', machineType: 'n2d-standard-8', provisioningModel: 'SPOT', requestId: 'r' };
    const p = plan({ hosts: [host('n', 'Launching', { createdAt: ago(120) })], receipts: [open] }, { jobs: times(2, () => job('queued')) });
    expect(kinds(p)).toEqual(['resume n', expect.stringMatching(/^launch pool-/)]);
    expect(p.changes[0]).toEqual({ kind: 'resume', receipt: open });
  });

  it('a Launching host with no VM and no open receipt was never launched: it is dropped, not counted', () => {
    const failed: Receipt = { id: 'launch-2', action: 'Launch', phase: 'Failed', at: ago(300), hosts: ['never'] };
    const p = plan({ hosts: [host('never', 'Launching'), host('unwritten', 'Launching'), idleHost('f')], receipts: [failed] }, { ...up(['f']), jobs: times(2, () => job('queued')) });
    expect(p.hosts.map((h) => h.name)).toEqual(['f', expect.stringMatching(/^pool-/)]);
    expect(p.ended).toEqual([]);
  });

  it('a deleting host whose VM is gone leaves status; one whose VM still runs is deleted again', () => {
    const p = plan({ hosts: [host('gone', 'Deleting'), host('stuck', 'Deleting'), host('going', 'Deleting'), idleHost('f')] }, { vms: [vm('stuck'), vm('going', 'STOPPING'), vm('f')], runners: [runner('f')] });
    expect(p.hosts.map((h) => h.name)).toEqual(['stuck', 'going', 'f']);
    expect(p.ended).toHaveLength(1);
    expect(kinds(p)).toEqual(['delete stuck']);
  });

  it('changes come in order: resume, ghosts and orphans, drained deletes, deregistrations, launches', () => {
    const open: Receipt = { id: 'delete-1', action: 'Delete', phase: 'Intended', at: ago(60), hosts: ['r'] };
    const status: RunnerTargetStatus = { hosts: [host('r', 'Deleting'), host('d', 'Draining'), idleHost('i1'), idleHost('i2')], receipts: [open] };
    const p = plan(status, { vms: [vm('r'), vm('d'), vm('i1'), vm('i2')], runners: [runner('i1'), runner('i2'), runner('pool-ghost')], probes: probes([['d', { job: 'none' }]]) }, { spec: { ...spec, floor: 0 } });
    expect(kinds(p)).toEqual(['resume r', 'removeRunner pool-ghost', 'delete d', 'deregister i1', 'deregister i2']);
  });

  describe('samples and tiers', () => {
    const hot = (): PressureEvidence => {
      const f = (v: number) => (parsePressure(`some avg10=0.00 avg60=${v}.00 avg300=0.00 total=0`) as { value: PressureEvidence['cpu'] }).value;
      return { cpu: f(90), memory: f(0), io: f(0) };
    };
    const busyPool = { vms: [vm('b')], runners: [runner('b', true)], probes: probes([['b', { job: 'running', pressure: hot() }]]) };
    const status = (sampleAgo: number, high: number): RunnerTargetStatus => ({
      hosts: [host('b', 'Busy')],
      lastSample: { at: ago(sampleAgo), queued: 0, running: 1, idleRunners: 0, busyRunners: 1 },
      tier: { machineType: 'n2d-standard-8', high, low: 0 },
    });

    it('a counted sample under pressure moves the tier up, and launches start there', () => {
      const p = plan(status(300, 1), { ...busyPool, jobs: [job('queued')] });
      expect(p.timing.kind).toBe('count');
      expect(p.tier.change).toBe('up');
      expect(p.plan.machineType).toBe('n2d-standard-16');
      expect(p.changes[0]).toMatchObject({ kind: 'launch', intent: { machineType: 'n2d-standard-16' } });
      expect(p.lastSample).toMatchObject({ at: iso(NOW), busyRunners: 1, queued: 1, pressure: { cpu: 90, hosts: 1 } });
      expect(p.events.map((e) => e.reason)).toContain('TierUp');
    });

    it('an early sample does not count: the tier and the last sample stay', () => {
      const p = plan(status(60, 1), busyPool);
      expect(p.timing.kind).toBe('early');
      expect(p.tier.tier).toMatchObject({ machineType: 'n2d-standard-8', high: 1 });
      expect(p.lastSample?.at).toBe(ago(60));
    });
  });

  it('plannedStatus carries what the plan decided and keeps receipts and conditions', () => {
    const before: RunnerTargetStatus = { receipts: [{ id: 'x', action: 'Delete', phase: 'Done', at: ago(600), hosts: ['z'] }], conditions: [], spendDay: '2026-12-03', spendEndedUSD: 0.5 };
    const p = plan(before, { jobs: [job('queued')] });
    const next = plannedStatus(before, p);
    expect(next).toMatchObject({ receipts: before.receipts, conditions: [], hosts: p.hosts, counts: p.counts, plan: p.plan, tier: p.tier.tier, spendDay: '2026-12-03', spendEndedUSD: 0.5, spendTodayUSD: 0.5 });
    expect(next.lastSample?.at).toBe(iso(NOW));
  });

  it('a dry run plans the same, marked dry', () => {
    const p = plan({}, { jobs: times(3, () => job('queued')) }, { spec: { ...spec, dryRun: true } });
    expect(p.plan).toMatchObject({ dryRun: true, launch: 3 });
  });
});
