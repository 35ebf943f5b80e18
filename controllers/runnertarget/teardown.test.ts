import { describe, expect, it } from '@jest/globals';
import type { RunnerTargetStatus } from '../../src/api/index.js';
import { planCheck } from './plan.js';
import { receiptFor } from './receipts.js';
import { poolGone, teardownPlan, teardownSpec } from './teardown.js';
import { ago, host, job, NOW, runner, spec, vm } from './testing/pool.js';

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
