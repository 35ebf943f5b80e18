import { describe, expect, it } from '@jest/globals';
import type { RunnerTargetStatus } from '../../../src/api/index.js';
import { planCheck } from './plan.js';
import { openReceipts, receiptFor } from './receipts.js';
import { ABANDON_AFTER_MS, abandonLaunches, poolGone, teardownPlan, teardownSpec } from './teardown.js';
import { ago, host, job, NOW, runner, spec, vm } from '../testing/pool.js';

const observe = (over: Partial<Parameters<typeof planCheck>[0]['observation']> = {}) => ({ at: NOW, jobs: [job('queued', ['self-hosted', 'linux'])], runners: [], vms: [], probes: new Map(), ...over });

function teardown(status: RunnerTargetStatus, observation: ReturnType<typeof observe>) {
  return teardownPlan(planCheck({ name: 'pool', spec: teardownSpec(spec), status, observation }), observation);
}

describe('teardownPlan', () => {
  it('launches nothing however many jobs wait', () => {
    const plan = teardown({}, observe());
    expect(plan.changes).toEqual([]);
    expect(plan.plan.launch).toBe(0);
  });

  it('an idle host long idle is drained the usual way: its runner removed first, its VM not yet deleted', () => {
    const status = { hosts: [host('pool-0000000a', 'Idle', { idleSince: ago(600), runnerID: 1 })] };
    const plan = teardown(status, observe({ vms: [vm('pool-0000000a')], runners: [runner('pool-0000000a')] }));
    expect(plan.changes.map((c) => c.kind)).toEqual(['deregister']);
  });

  it('a busy host stays', () => {
    const status = { hosts: [host('pool-0000000a', 'Busy', { runnerID: 1 })] };
    const plan = teardown(status, observe({ vms: [vm('pool-0000000a')], runners: [runner('pool-0000000a', true)] }));
    expect(plan.changes).toEqual([]);
  });

  it('a VM that never got a runner is deleted at once, and its open launch is not continued', () => {
    const launch = receiptFor({ action: 'Launch', hosts: ['pool-0000000b'], zone: 'us-central1-a', machineType: 'n2d-standard-8', provisioningModel: 'SPOT' }, NOW - 60_000, 'u-1');
    const status = { hosts: [host('pool-0000000b', 'Launching', { createdAt: ago(60) })], receipts: [launch] };
    const plan = teardown(status, observe({ vms: [vm('pool-0000000b', 'RUNNING', { createdAt: ago(60) })] }));
    expect(plan.changes).toEqual([expect.objectContaining({ kind: 'delete', intent: expect.objectContaining({ action: 'Delete', hosts: ['pool-0000000b'] }) })]);
  });

  it.each([
    [[], [], true],
    [[vm('pool-0000000a')], [], false],
    [[], [runner('pool-0000000a')], false],
  ])('the pool is gone only with no VM and no runner (%#)', (vms, runners, gone) => {
    expect(poolGone({ vms, runners })).toBe(gone);
  });
});

describe('abandonLaunches: a target being deleted settles every launch it will not finish', () => {
  const launch = (ageS: number) => receiptFor({ action: 'Launch', hosts: ['pool-0000000c'], zone: 'us-central1-a', machineType: 'n2d-standard-8', provisioningModel: 'SPOT' }, NOW - ageS * 1000, 'u-1');
  const deletedLongAgo = NOW - 10 * 60_000;

  it.each([
    ['its runner is online', 30, [vm('pool-0000000c')], [runner('pool-0000000c')], 'Done'],
    ['its VM runs and its runner is registered but offline (config written, runner not started)', 30, [vm('pool-0000000c')], [runner('pool-0000000c', false, { status: 'offline' })], 'Failed'],
    ['its VM runs with no runner (config not written yet)', 30, [vm('pool-0000000c')], [], 'Failed'],
    ['its VM still boots', 5, [vm('pool-0000000c', 'PROVISIONING')], [], 'Failed'],
    ['no VM appeared long after the insert could land', ABANDON_AFTER_MS / 1000 + 1, [], [], 'Failed'],
    ['no VM yet, the insert may still land', 10, [], [], 'Intended'],
  ])('%s', (_what, ageS, vms, runners, phase) => {
    const out = abandonLaunches([launch(ageS)], { at: NOW, vms, runners }, deletedLongAgo);
    expect(out.receipts[0]!.phase).toBe(phase);
    expect(out.events.length).toBe(phase === 'Intended' ? 0 : 1);
  });

  it('keeps a launch with no VM open while the deletion is recent, whatever the receipt\'s age', () => {
    const out = abandonLaunches([launch(3600)], { at: NOW, vms: [], runners: [] }, NOW - 5_000);
    expect(openReceipts(out.receipts)).toHaveLength(1);
  });

  it('leaves receipts of other actions to the plan, which continues them', () => {
    const del = receiptFor({ action: 'Delete', hosts: ['pool-0000000c'], zone: 'us-central1-a' }, NOW - 600_000, 'u-1');
    expect(abandonLaunches([del], { at: NOW, vms: [vm('pool-0000000c')], runners: [] }, deletedLongAgo).receipts).toEqual([del]);
  });

  it('an open receipt keeps the finalizer even with no VM and no runner seen', () => {
    expect(poolGone({ vms: [], runners: [] }, [launch(10)])).toBe(false);
    expect(poolGone({ vms: [], runners: [] }, abandonLaunches([launch(600)], { at: NOW, vms: [], runners: [] }, deletedLongAgo).receipts)).toBe(true);
  });
});

describe('teardownPlan after a launch was abandoned', () => {
  it('removes a registration that is not online before anything else, and keeps the VM until its host drains', () => {
    const status = { hosts: [host('pool-0000000c', 'Registering', { createdAt: ago(60), runnerID: 7 })] };
    const plan = teardown(status, observe({ vms: [vm('pool-0000000c', 'RUNNING', { createdAt: ago(60) })], runners: [runner('pool-0000000c', false, { status: 'offline', id: 7 })] }));
    expect(plan.changes).toEqual([expect.objectContaining({ kind: 'deregister', runnerID: 7 })]);
  });

  it('does not delete at once the VM of a drained host whose runner is gone: SSH must confirm no job runs first', () => {
    const status = { hosts: [host('pool-0000000c', 'Draining', { runnerID: 7 })] };
    const unknown = teardown(status, observe({ vms: [vm('pool-0000000c')] }));
    expect(unknown.changes).toEqual([]);
    const confirmed = teardown(status, observe({ vms: [vm('pool-0000000c')], probes: new Map([['pool-0000000c', { job: 'none' }]]) as never }));
    expect(confirmed.changes).toEqual([expect.objectContaining({ kind: 'delete', reason: 'Drained' })]);
  });

  it('a host whose runner ran a job and left drains rather than being deleted unconfirmed', () => {
    const status = { hosts: [host('pool-0000000c', 'Idle', { runnerID: 7, idleSince: ago(600) })] };
    const plan = teardown(status, observe({ vms: [vm('pool-0000000c')] }));
    expect(plan.changes.filter((c) => c.kind === 'delete')).toEqual([]);
  });
});
