import { describe, expect, it } from '@jest/globals';
import type { RunnerHost, RunnerTargetSpec, RunnerTargetStatus } from '../../../src/api/index.js';
import type { HostProbe, Observation } from '../observation.js';
import { planCheck, type CheckPlan } from './plan.js';
import { receiptFor } from './receipts.js';
import { reuseHosts } from './reuse.js';
import { NOW, ago, host, job, runner, spec as base, times, vm } from '../testing/pool.js';

const reuseSpec: RunnerTargetSpec = { ...base, floor: 0, maxHosts: 3, github: { ...base.github, hostReuse: 'reuse' } };
const ephemeralSpec: RunnerTargetSpec = { ...reuseSpec, github: { ...reuseSpec.github, hostReuse: 'ephemeral' } };

/** Host `name` whose runner (id 7) was seen busy last check and is gone now: it finished its one job. */
const finished = (name: string, over: Partial<RunnerHost> = {}) => host(name, 'Busy', { runnerID: 7, ...over });
const noJob = (names: string[]) => new Map<string, HostProbe>(names.map((n) => [n, { job: 'none' }]));

interface Case {
  name: string;
  spec?: RunnerTargetSpec;
  status: RunnerTargetStatus;
  observation: Partial<Observation>;
  changes: string[];
  events?: string[];
}

const plan = (c: Pick<Case, 'spec' | 'status' | 'observation'>): CheckPlan =>
  planCheck({ name: 'pool', spec: c.spec ?? reuseSpec, status: c.status, observation: { at: NOW, jobs: [], runners: [], vms: [], probes: new Map(), ...c.observation }, settings: { lifetimeScale: 1 } });
const kinds = (p: CheckPlan) => p.changes.map((x) => `${x.kind} ${x.kind === 'resume' ? x.receipt.hosts.join(',') : x.intent.hosts.join(',')}`);
const launches = (p: CheckPlan) => p.changes.filter((x) => x.kind === 'launch').length;

const cases: Case[] = [
  {
    name: 'reuse: a finished host and a queued job it can take: a new runner, no drain and no launch',
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a')], jobs: [job('queued')], probes: noJob(['a']) },
    changes: ['register a'],
    events: ['HostReused'],
  },
  {
    name: 'reuse: a finished host and no queued job: it drains as in ephemeral mode',
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a')], probes: noJob(['a']) },
    changes: ['delete a'],
    events: ['HostNotReused'],
  },
  {
    name: 'ephemeral: the finished host drains and a new VM takes the queued job',
    spec: ephemeralSpec,
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a')], jobs: [job('queued')], probes: noJob(['a']) },
    changes: ['delete a', 'launch pool-*'],
    events: [],
  },
  {
    name: 'reuse: a job only some runner label fits elsewhere does not count',
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a')], jobs: [job('queued', ['self-hosted', 'gpu'])], probes: noJob(['a']) },
    changes: ['delete a'],
  },
  {
    name: 'reuse: two finished hosts, one queued job: the younger is reused, the other drains',
    status: { hosts: [finished('a', { createdAt: ago(7200) }), finished('b', { createdAt: ago(600) })] },
    observation: { vms: [vm('a'), vm('b')], jobs: [job('queued')], probes: noJob(['a', 'b']) },
    changes: ['delete a', 'register b'],
  },
  {
    name: 'reuse: an idle runner already covers the queued job: the finished host drains',
    status: { hosts: [finished('a'), host('b', 'Idle', { idleSince: ago(10), runnerID: 8 })] },
    observation: { vms: [vm('a'), vm('b')], runners: [runner('b')], jobs: [job('queued')], probes: noJob(['a', 'b']) },
    changes: ['delete a'],
  },
  {
    name: 'reuse: three queued jobs, one finished host at maxHosts 3 with one busy: reused, and one launch fills the pool',
    status: { hosts: [finished('a'), host('b', 'Busy', { runnerID: 8 })] },
    observation: { vms: [vm('a'), vm('b')], runners: [runner('b', true)], jobs: [...times(3, () => job('queued')), job('in_progress', ['self-hosted'], { runnerName: 'b' })], probes: noJob(['a']) },
    changes: ['register a', 'launch pool-*'],
  },
  {
    name: 'reuse: a host past its lifetime margin is never reused',
    status: { hosts: [finished('a', { createdAt: ago(23 * 3600 + 45 * 60) })] },
    observation: { vms: [vm('a')], jobs: [job('queued')], probes: noJob(['a']) },
    changes: ['delete a', 'launch pool-*'],
  },
  {
    name: 'reuse: a host being preempted (STOPPING) is never reused',
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a', 'STOPPING')], jobs: [job('queued')], probes: noJob(['a']) },
    changes: ['launch pool-*'],
  },
  {
    name: 'reuse: a preempted host (TERMINATED) is never reused: it is deleted and replaced',
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a', 'TERMINATED')], jobs: [job('queued')], probes: noJob(['a']) },
    changes: ['delete a', 'launch pool-*'],
  },
  {
    name: 'reuse: SSH could not confirm the old job ended: not reused, the drain waits as today',
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a')], jobs: [job('queued')], probes: new Map([['a', { job: 'unknown' }]]) },
    changes: ['launch pool-*'],
  },
  {
    name: 'reuse: the projected spend passes dailyBudgetUSD: the finished host drains, nothing launches',
    status: { hosts: [finished('a')], spendDay: '2026-12-03', spendEndedUSD: 10 },
    observation: { vms: [vm('a')], jobs: [job('queued')], probes: noJob(['a']) },
    changes: ['delete a'],
  },
  {
    name: 'reuse: a host already draining for scale-down is not reused',
    status: { hosts: [host('a', 'Draining', { runnerID: 7 })] },
    observation: { vms: [vm('a')], jobs: [job('queued')], probes: noJob(['a']) },
    changes: ['delete a', 'launch pool-*'],
  },
  {
    name: 'reuse: no job queued and floor 1: the host drains and demand keeps the floor with a launch',
    spec: { ...reuseSpec, floor: 1 },
    status: { hosts: [finished('a')] },
    observation: { vms: [vm('a')], probes: noJob(['a']) },
    changes: ['delete a', 'launch pool-*'],
  },
];

describe('host reuse in the check plan', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const p = plan(c);
    expect(kinds(p).map((k) => k.replace(/^launch pool-.*/, 'launch pool-*'))).toEqual(c.changes);
    if (c.events) expect(p.events.map((e) => e.reason).filter((r) => r.startsWith('Host'))).toEqual(c.events);
    // Reuse never adds a VM: the pool stays within maxHosts.
    expect(p.hosts.filter((h) => h.state !== 'Deleting').length).toBeLessThanOrEqual((c.spec ?? reuseSpec).maxHosts);
  });

  it('a reused host is capacity coming up, without the finished runner\'s ID, and the plan records no drain of it', () => {
    const p = plan({ status: { hosts: [finished('a')] }, observation: { vms: [vm('a')], jobs: [job('queued')], probes: noJob(['a']) } });
    const a = p.hosts.find((h) => h.name === 'a')!;
    expect(a).toMatchObject({ state: 'Registering', message: expect.stringMatching(/gets a new runner over SSH/) });
    expect(a.runnerID).toBeUndefined();
    expect(p.plan).toMatchObject({ launch: 0, drain: [], delete: [] });
    expect(p.demand.launch).toBe(0);
  });

  it('a finished runner GitHub still lists offline: the host is reused and that registration is named for removal', () => {
    const p = plan({ status: { hosts: [finished('a')] }, observation: { vms: [vm('a')], runners: [runner('a', false, { id: 7, status: 'offline' })], jobs: [job('queued')], probes: noJob(['a']) } });
    expect(p.changes).toEqual([expect.objectContaining({ kind: 'register', finishedRunnerID: 7 })]);
    expect(launches(p)).toBe(0);
    const idle = plan({ status: { hosts: [finished('a')] }, observation: { vms: [vm('a')], runners: [runner('a', false, { id: 7, status: 'offline' })], probes: noJob(['a']) } });
    expect(idle.changes).toEqual([]);
    expect(idle.hosts[0]!.state).toBe('Offline');
  });

  it('an Offline host not reused is told once: the checks after the one that found it Offline say nothing more', () => {
    const offline = { vms: [vm('a')], runners: [runner('a', false, { id: 7, status: 'offline' })], probes: noJob(['a']) };
    const first = plan({ status: { hosts: [finished('a')] }, observation: offline });
    expect(first.hosts[0]).toMatchObject({ state: 'Offline' });
    expect(first.events.filter((e) => e.reason === 'HostNotReused')).toEqual([expect.objectContaining({ message: expect.stringMatching(/no job it could take is queued/) })]);
    // The next check: the host is still Offline with the same runner listed, and still not reused.
    const next = plan({ status: { hosts: first.hosts }, observation: { ...offline, at: NOW + 3000 } });
    expect(next.hosts[0]).toMatchObject({ state: 'Offline' });
    expect(next.changes).toEqual([]);
    expect(next.events.map((e) => e.reason)).not.toContain('HostNotReused');
    // A job queued meanwhile still gets the host reused.
    const queued = plan({ status: { hosts: first.hosts }, observation: { ...offline, at: NOW + 3000, jobs: [job('queued')] } });
    expect(queued.changes).toEqual([expect.objectContaining({ kind: 'register', finishedRunnerID: 7 })]);
    expect(queued.events.map((e) => e.reason)).toContain('HostReused');
  });

  it('an offline runner that GitHub still calls busy is not finished', () => {
    const p = plan({ status: { hosts: [finished('a')] }, observation: { vms: [vm('a')], runners: [runner('a', true, { id: 7, status: 'offline' })], jobs: [job('queued')], probes: noJob(['a']) } });
    expect(kinds(p)).not.toContain('register a');
  });

  it('a host an open receipt holds is left to that receipt', () => {
    const open = receiptFor({ action: 'Register', hosts: ['a'] }, NOW - 5000);
    const p = plan({ status: { hosts: [finished('a')], receipts: [open] }, observation: { vms: [vm('a')], jobs: [job('queued')], probes: noJob(['a']) } });
    expect(kinds(p)[0]).toBe('resume a');
    expect(kinds(p)).not.toContain('register a');
  });

  it('the same finished host in ephemeral mode is decided exactly as without the field', () => {
    const status: RunnerTargetStatus = { hosts: [finished('a'), host('b', 'Idle', { idleSince: ago(900), runnerID: 8 })] };
    const observation = { vms: [vm('a'), vm('b')], runners: [runner('b')], jobs: times(4, () => job('queued')), probes: noJob(['a', 'b']) };
    const { hostReuse: _mode, ...withoutField } = ephemeralSpec.github;
    const a = plan({ spec: ephemeralSpec, status, observation });
    const b = plan({ spec: { ...ephemeralSpec, github: withoutField as RunnerTargetSpec['github'] }, status, observation });
    expect(kinds(a).map((k) => k.replace(/^launch pool-.*/, 'launch'))).toEqual(kinds(b).map((k) => k.replace(/^launch pool-.*/, 'launch')));
    expect(launches(a)).toBe(1);
  });
});

describe('reuseHosts', () => {
  const input = (over: Partial<Parameters<typeof reuseHosts>[0]> = {}) => ({
    spec: reuseSpec,
    before: [finished('a')],
    hosts: [host('a', 'Draining', { runnerID: 7 })],
    observation: { vms: [vm('a')], runners: [], jobs: [job('queued')], probes: noJob(['a']) },
    now: NOW,
    projectedUSD: 1,
    ...over,
  });

  it('ephemeral decides nothing', () => {
    expect(reuseHosts(input({ spec: ephemeralSpec }))).toEqual({ reuse: [], drain: [] });
  });

  it('a host whose runner is registered and online is not finished', () => {
    expect(reuseHosts(input({ hosts: [host('a', 'Idle', { runnerID: 7 })], observation: { vms: [vm('a')], runners: [runner('a')], jobs: [job('queued')], probes: noJob(['a']) } }))).toEqual({ reuse: [], drain: [] });
  });

  it('with --runner-lifetime-scale the lifetime margin scales as for lifetime drains', () => {
    const young = reuseHosts(input({ before: [finished('a', { createdAt: ago(90) })], hosts: [host('a', 'Draining', { runnerID: 7, createdAt: ago(90) })], lifetimeScale: 0.001 }));
    expect(young.reuse).toEqual([]);
    expect(young.drain[0]!.reason).toMatch(/near spec.gce.maxRunDuration/);
  });
});
