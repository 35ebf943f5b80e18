// Every Compute Engine instance status, as the pool reads it: which ones are
// capacity, which are deleted (once), which are left to Compute Engine, and
// that a status nobody here knows is left alone and reported, never counted.
// Also: a zone the aggregated list could not read hides VMs, it does not end them.
import { describe, expect, it } from '@jest/globals';
import type { Receipt, RunnerTargetStatus } from '../../../src/api/index.js';
import { CAPACITY_STATES } from './demand.js';
import type { Observation } from '../observation.js';
import { vmPhase } from '../observation.js';
import { poolVM } from '../checkrun/providers.js';
import { planCheck, type CheckPlan } from './plan.js';
import { resumeStep } from './resume.js';
import { poolGone, teardownPlan } from './teardown.js';
import { NOW, ago, host, job, runner, spec, vm } from '../testing/pool.js';

const observation = (over: Partial<Observation> = {}): Observation => ({ at: NOW, jobs: [], runners: [], vms: [], probes: new Map(), ...over });
const plan = (status: RunnerTargetStatus, obs: Partial<Observation>): CheckPlan => planCheck({ name: 'pool', spec, status, observation: observation(obs) });
// Launches left out: the spec's floor of 1 launches one wherever no host is capacity.
const kinds = (p: CheckPlan) => p.changes.filter((c) => c.kind !== 'launch').map((c) => `${c.kind} ${c.kind === 'resume' ? c.receipt.hosts.join(',') : c.intent.hosts.join(',')}`);
const instance = (status: string) => ({ id: '1', name: 'a', zone: 'us-central1-a', machineType: 'n2d-standard-8', status, labels: {}, spot: true, address: '10.0.0.2', creationTimestamp: ago(600) });

describe('instance statuses', () => {
  it.each([
    ['PENDING', 'PENDING', 'booting'],
    ['PROVISIONING', 'PROVISIONING', 'booting'],
    ['STAGING', 'STAGING', 'booting'],
    ['REPAIRING', 'REPAIRING', 'booting'],
    ['RUNNING', 'RUNNING', 'running'],
    ['STOPPING', 'STOPPING', 'leaving'],
    ['PENDING_STOP', 'PENDING_STOP', 'leaving'],
    ['SUSPENDING', 'SUSPENDING', 'leaving'],
    ['DEPROVISIONING', 'DEPROVISIONING', 'leaving'],
    ['STOPPED', 'STOPPED', 'ended'],
    ['SUSPENDED', 'SUSPENDED', 'ended'],
    ['TERMINATED', 'TERMINATED', 'ended'],
    ['HIBERNATING', 'UNKNOWN', 'unknown'],
    ['UNKNOWN', 'UNKNOWN', 'unknown'],
    ['', 'UNKNOWN', 'unknown'],
  ])('Compute Engine %j is %s, %s', (given, status, phase) => {
    const v = poolVM(instance(given));
    expect(v.status).toBe(status);
    expect(vmPhase(v)).toBe(phase);
    if (status === 'UNKNOWN') expect(v.reportedStatus).toBe(given || '(empty)');
    else expect(v.reportedStatus).toBeUndefined();
  });

  // One job queued, floor 1: a host that is capacity means no launch; one that is not means one launch.
  it.each([
    ['PENDING', { capacity: true, delete: false, kept: true }],
    ['PROVISIONING', { capacity: true, delete: false, kept: true }],
    ['STAGING', { capacity: true, delete: false, kept: true }],
    ['REPAIRING', { capacity: true, delete: false, kept: true }],
    ['RUNNING', { capacity: true, delete: false, kept: true }],
    ['STOPPING', { capacity: false, delete: false, kept: false }],
    ['PENDING_STOP', { capacity: false, delete: false, kept: false }],
    ['SUSPENDING', { capacity: false, delete: false, kept: false }],
    ['DEPROVISIONING', { capacity: false, delete: false, kept: false }],
    ['STOPPED', { capacity: false, delete: true, kept: false }],
    ['SUSPENDED', { capacity: false, delete: true, kept: false }],
    ['TERMINATED', { capacity: false, delete: true, kept: false }],
    ['HIBERNATING', { capacity: false, delete: false, kept: true }],
  ])('a Registering host whose VM is %s', (given, want) => {
    const v = poolVM(instance(given));
    const p = plan({ hosts: [host('a', 'Registering', { createdAt: ago(600) })] }, { vms: [v], jobs: [job('queued')] });
    const a = p.hosts.find((h) => h.name === 'a');
    expect({ capacity: !!a && CAPACITY_STATES.includes(a.state), delete: kinds(p).includes('delete a'), kept: !!a }).toEqual(want);
    expect(p.plan.launch).toBe(want.capacity ? 0 : 1);
  });

  it('an unknown status: the host is Unknown with the status in its message, an UnknownVMStatus event, no delete even past the boot grace', () => {
    const v = poolVM({ ...instance('HIBERNATING'), creationTimestamp: ago(7200) });
    const p = plan({ hosts: [host('a', 'Idle', { idleSince: ago(900) })] }, { vms: [v], runners: [runner('a')] });
    expect(p.hosts[0]).toMatchObject({ name: 'a', state: 'Unknown', message: expect.stringContaining('HIBERNATING') });
    expect(p.hosts[0]!.idleSince).toBeUndefined();
    expect(p.events).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'Warning', reason: 'UnknownVMStatus', message: expect.stringContaining('HIBERNATING') })]));
    expect(p.changes.filter((c) => c.kind !== 'launch')).toEqual([]);
    // Adopted as Unknown when status did not list it, and not drained as surplus.
    const adopted = plan({}, { vms: [v] });
    expect(adopted.hosts.filter((h) => h.state !== 'Launching')).toEqual([expect.objectContaining({ name: 'a', state: 'Unknown' })]);
    expect(adopted.plan.launch).toBe(1);
    expect(adopted.changes.filter((c) => c.kind !== 'launch')).toEqual([]);
    // A teardown leaves it too.
    expect(teardownPlan(adopted, { vms: [v], runners: [] }).changes.filter((c) => c.kind === 'delete')).toEqual([]);
  });

  it('a VM Compute Engine is taking down is sent no second delete: a Deleting host, a resumed Delete receipt, a teardown', () => {
    for (const status of ['STOPPING', 'DEPROVISIONING'] as const) {
      const p = plan({ hosts: [host('a', 'Deleting')] }, { vms: [vm('a', status)] });
      expect(kinds(p)).toEqual([]);
      expect(p.hosts.filter((h) => h.state !== 'Launching').map((h) => `${h.name} ${h.state}`)).toEqual(['a Deleting']);
      const receipt: Receipt = { id: 'r', action: 'Delete', phase: 'Intended', at: ago(60), hosts: ['a'], zone: 'us-central1-a', requestId: 'q' };
      expect(resumeStep(receipt, observation({ vms: [vm('a', status)] })).step).toBe('done');
      expect(teardownPlan(plan({}, { vms: [vm('a', status)] }), { vms: [vm('a', status)], runners: [] }).changes).toEqual([]);
    }
  });
});

describe('a zone the list could not read', () => {
  const zoneB = { unreachableZones: ['us-central1-b'] };
  it('hides its VMs: their hosts stay, are not preempted, and their runners are not removed', () => {
    const p = plan({ hosts: [host('b1', 'Idle', { zone: 'us-central1-b', idleSince: ago(900) })] }, { runners: [runner('b1')], ...zoneB });
    expect(p.hosts.map((h) => `${h.name} ${h.state}`)).toEqual(['b1 Idle']);
    expect(p.events.map((e) => e.reason)).not.toContain('Preempted');
    expect(p.events.map((e) => e.reason)).toContain('ZoneUnreachable');
    expect(kinds(p).filter((k) => !k.startsWith('launch') && !k.startsWith('deregister'))).toEqual([]);
    // Without the warning the same observation is a preemption.
    const seen = plan({ hosts: [host('b1', 'Idle', { zone: 'us-central1-b', idleSince: ago(900) })] }, { runners: [runner('b1')] });
    expect(seen.events.map((e) => e.reason)).toContain('Preempted');
    expect(kinds(seen)).toContain('removeRunner b1');
  });

  it('keeps a Launching host whose launch settled while its zone is unreadable: no second host for the floor', () => {
    // The runner came online (the receipt settled Done) before any check saw the VM, and now its zone cannot be listed.
    const status = { hosts: [host('b1', 'Launching', { zone: 'us-central1-b' })] };
    const floorOne = { ...spec, floor: 1, maxHosts: 2 };
    const p = planCheck({ name: 'pool', spec: floorOne, status, observation: observation({ runners: [runner('b1')], ...zoneB }) });
    expect(p.hosts.map((h) => h.name)).toContain('b1');
    expect(p.changes.filter((c) => c.kind === 'launch')).toEqual([]);
    // Once the zone is listed without it, it was never launched: the floor is made up.
    const listed = planCheck({ name: 'pool', spec: floorOne, status, observation: observation({}) });
    expect(listed.hosts.map((h) => h.name)).not.toContain('b1');
    expect(listed.changes.filter((c) => c.kind === 'launch')).toHaveLength(1);
    expect(teardownPlan(p, { vms: [], runners: [], ...zoneB }).hosts.map((h) => h.name)).toContain('b1');
  });

  it('a runner with no host in status is not removed while any zone is unreadable; one whose host is in a readable zone is', () => {
    const p = plan({ hosts: [host('a1', 'Idle', { idleSince: ago(900) })] }, { runners: [runner('stray'), runner('a1')], ...zoneB });
    expect(kinds(p)).toEqual(['removeRunner a1']);
  });

  it('resumed receipts there wait; the pool is not gone while a zone is unreadable', () => {
    for (const action of ['Launch', 'Delete'] as const) {
      const receipt: Receipt = { id: 'r', action, phase: 'Intended', at: ago(60), hosts: ['b1'], zone: 'us-central1-b', requestId: 'q' };
      expect(resumeStep(receipt, observation(zoneB)).step).toBe('wait');
      expect(resumeStep(receipt, observation()).step).toBe(action === 'Launch' ? 'repeat' : 'done');
    }
    expect(poolGone({ vms: [], runners: [], ...zoneB })).toBe(false);
    expect(poolGone({ vms: [], runners: [] })).toBe(true);
  });
});
