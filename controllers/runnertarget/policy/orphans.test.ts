import { describe, expect, it } from '@jest/globals';
import type { RunnerHost } from '../../../src/api/index.js';
import type { PoolRunner, PoolVM } from '../observation.js';
import { findOrphans, type OrphanReport } from './orphans.js';
import { NOW, ago, host, runner, vm } from '../testing/pool.js';

const HOUR = 3600;

describe('findOrphans', () => {
  const none: OrphanReport = { mark: [], unmark: [], deleteVMs: [], removeRunners: [], preempted: [] };
  it.each<[string, RunnerHost[], PoolVM[], PoolRunner[], string[], Partial<Record<keyof OrphanReport, unknown>>]>([
    ['a healthy host', [host('a', 'Idle')], [vm('a')], [runner('a')], [], {}],
    ['a VM with no runner within the boot grace', [host('a', 'Registering', { createdAt: ago(600) })], [vm('a', 'RUNNING', { createdAt: ago(600) })], [], [], {}],
    ['a VM with no runner after the boot grace: marked', [host('a', 'Registering')], [vm('a', 'RUNNING', { createdAt: ago(HOUR) })], [], [], { mark: ['a'] }],
    ['an unknown VM of the pool with no runner: marked', [], [vm('x', 'RUNNING', { createdAt: ago(HOUR) })], [], [], { mark: ['x'] }],
    [
      'marked last check, still no runner: deleted',
      [host('a', 'Registering', { orphanSince: ago(300) })],
      [vm('a', 'RUNNING', { createdAt: ago(HOUR) })],
      [],
      [],
      { deleteVMs: [expect.objectContaining({ name: 'a', reason: 'Orphan' })] },
    ],
    ['marked, then the runner came: unmarked', [host('a', 'Idle', { orphanSince: ago(300) })], [vm('a')], [runner('a')], [], { unmark: ['a'] }],
    [
      'a registration that never came online (a zombie) after the boot grace: marked as no runner',
      [host('a', 'Registering')],
      [vm('a', 'RUNNING', { createdAt: ago(HOUR) })],
      [runner('a', false, { status: 'offline' })],
      [],
      { mark: ['a'] },
    ],
    [
      'a zombie registration, marked last check: the VM is deleted (its registration then goes as a ghost)',
      [host('a', 'Registering', { orphanSince: ago(300) })],
      [vm('a', 'RUNNING', { createdAt: ago(HOUR) })],
      [runner('a', false, { status: 'offline' })],
      [],
      { deleteVMs: [expect.objectContaining({ name: 'a', reason: 'Orphan', message: expect.stringMatching(/no online runner/) })] },
    ],
    ['a zombie registration within the boot grace: waited for', [host('a', 'Registering', { createdAt: ago(600) })], [vm('a', 'RUNNING', { createdAt: ago(600) })], [runner('a', false, { status: 'offline' })], [], {}],
    ['a runner that was online and went offline is no orphan: the offline grace handles it', [host('a', 'Offline', { offlineSince: ago(60) })], [vm('a')], [runner('a', false, { status: 'offline' })], [], {}],
    ['a draining host has no runner on purpose', [host('a', 'Draining', { orphanSince: ago(300) })], [vm('a')], [], [], {}],
    ['a deleting host has no runner on purpose', [host('a', 'Deleting')], [vm('a')], [], [], {}],
    [
      'a runner whose VM is gone: removed',
      [],
      [],
      [runner('ghost')],
      [],
      { removeRunners: [expect.objectContaining({ name: 'ghost', message: 'runner ghost is registered but its VM is gone' })] },
    ],
    ['a runner whose launch is still intended is not a ghost', [], [], [runner('a')], ['a'], {}],
    [
      'a TERMINATED spot VM: preempted, its VM deleted and its runner removed',
      [host('a', 'Busy')],
      [vm('a', 'TERMINATED')],
      [runner('a', true)],
      [],
      { preempted: ['a'], deleteVMs: [expect.objectContaining({ name: 'a', reason: 'Preempted' })], removeRunners: [expect.objectContaining({ name: 'a' })] },
    ],
    ['a host whose VM vanished: preempted', [host('a', 'Idle')], [], [], [], { preempted: ['a'] }],
    ['a launching host with no VM yet is not preempted', [host('a', 'Launching')], [], [], ['a'], {}],
    ['a deleting host whose VM is gone is not preempted', [host('a', 'Deleting')], [], [], [], {}],
  ])('%s', (_name, hosts, vms, runners, launching, want) => {
    expect(findOrphans({ hosts, vms, runners, launching: new Set(launching), now: NOW })).toEqual({ ...none, ...want });
  });

  it('the boot grace is a parameter', () => {
    const report = findOrphans({ hosts: [], vms: [vm('a', 'RUNNING', { createdAt: ago(120) })], runners: [], launching: new Set(), now: NOW, bootGraceMs: 60_000 });
    expect(report.mark).toEqual(['a']);
  });

  it('a VM is deleted as an orphan only after being marked at an earlier check', () => {
    const vms = [vm('a', 'RUNNING', { createdAt: ago(HOUR) })];
    const first = findOrphans({ hosts: [host('a', 'Registering')], vms, runners: [], launching: new Set(), now: NOW });
    expect(first.deleteVMs).toEqual([]);
    const second = findOrphans({ hosts: [host('a', 'Registering', { orphanSince: ago(0) })], vms, runners: [], launching: new Set(), now: NOW + 300_000 });
    expect(second.deleteVMs.map((d) => d.name)).toEqual(['a']);
  });
});
