import { describe, expect, it } from '@jest/globals';
import type { Receipt } from '../../../src/api/index.js';
import type { Observation } from '../observation.js';
import { resumeStep, type ResumeStep } from './resume.js';
import { NOW, ago, runner, vm } from '../testing/pool.js';

const receipt = (action: Receipt['action'], agoS = 120): Receipt => ({ id: 'r-1', action, phase: 'Intended', at: ago(agoS), hosts: ['a'], requestId: 'req' });
const seen = (over: Partial<Pick<Observation, 'vms' | 'runners'>>) => ({ at: NOW, vms: [], runners: [], ...over });

describe('resumeStep', () => {
  it.each<[string, Receipt, ReturnType<typeof seen>, ResumeStep['step']]>([
    ['launch: no VM yet, insert again', receipt('Launch'), seen({}), 'repeat'],
    ['launch: VM provisioning, wait', receipt('Launch'), seen({ vms: [vm('a', 'PROVISIONING')] }), 'waitForBoot'],
    ['launch: VM staging, wait', receipt('Launch'), seen({ vms: [vm('a', 'STAGING')] }), 'waitForBoot'],
    ['launch: VM repairing, wait', receipt('Launch'), seen({ vms: [vm('a', 'REPAIRING')] }), 'waitForBoot'],
    ['launch: VM running, no runner: deliver the config', receipt('Launch'), seen({ vms: [vm('a')] }), 'deliverConfig'],
    ['launch: runner online: done', receipt('Launch'), seen({ vms: [vm('a')], runners: [runner('a')] }), 'done'],
    ['launch: runner registered but offline: to the host, which says whether its config arrived', receipt('Launch'), seen({ vms: [vm('a')], runners: [runner('a', false, { status: 'offline' })] }), 'deliverConfig'],
    ['launch: runner offline, VM still booting: wait', receipt('Launch'), seen({ vms: [vm('a', 'STAGING')], runners: [runner('a', false, { status: 'offline' })] }), 'waitForBoot'],
    ['launch: preempted while booting: failed', receipt('Launch'), seen({ vms: [vm('a', 'TERMINATED')] }), 'failed'],
    ['launch: past 40 min with no runner: failed', receipt('Launch', 2401), seen({ vms: [vm('a')] }), 'failed'],
    ['launch: at 39 min still delivering', receipt('Launch', 2340), seen({ vms: [vm('a')] }), 'deliverConfig'],
    ['launch: past 40 min but registered: done', receipt('Launch', 9999), seen({ vms: [vm('a')], runners: [runner('a')] }), 'done'],
    ['register: runner there: done', receipt('Register'), seen({ vms: [vm('a')], runners: [runner('a')] }), 'done'],
    ['register: no runner: again', receipt('Register'), seen({ vms: [vm('a')] }), 'repeat'],
    ['register: registered but offline: to the host, which says whether the new config arrived', receipt('Register'), seen({ vms: [vm('a')], runners: [runner('a', false, { status: 'offline' })] }), 'deliverConfig'],
    ['register: VM gone: failed', receipt('Register'), seen({}), 'failed'],
    ['register: VM being preempted: failed', receipt('Register'), seen({ vms: [vm('a', 'STOPPING')] }), 'failed'],
    ['deregister: runner gone: done', receipt('Deregister'), seen({ vms: [vm('a')] }), 'done'],
    ['deregister: runner still there: again', receipt('Deregister'), seen({ vms: [vm('a')], runners: [runner('a')] }), 'repeat'],
    ['remove runner: gone: done', receipt('RemoveRunner'), seen({}), 'done'],
    ['remove runner: still there: again', receipt('RemoveRunner'), seen({ runners: [runner('a', true)] }), 'repeat'],
    ['delete: VM gone: done', receipt('Delete'), seen({}), 'done'],
    ['delete: VM still there: again', receipt('Delete'), seen({ vms: [vm('a', 'RUNNING')] }), 'repeat'],
    ['delete: VM STOPPING: done, no second delete', receipt('Delete'), seen({ vms: [vm('a', 'STOPPING')] }), 'done'],
    ['delete: VM DEPROVISIONING: done, no second delete', receipt('Delete'), seen({ vms: [vm('a', 'DEPROVISIONING')] }), 'done'],
    ['delete: VM TERMINATED: again', receipt('Delete'), seen({ vms: [vm('a', 'TERMINATED')] }), 'repeat'],
  ])('%s', (_name, r, observation, step) => {
    expect(resumeStep(r, observation).step).toBe(step);
  });

  it('names the offline registration, and only that one, for the delivery to look at', () => {
    const offline = runner('a', false, { status: 'offline' });
    expect(resumeStep(receipt('Launch'), seen({ vms: [vm('a')], runners: [offline] }))).toMatchObject({ step: 'deliverConfig', stale: { id: offline.id } });
    expect(resumeStep(receipt('Launch'), seen({ vms: [vm('a')] }))).not.toHaveProperty('stale');
  });

  it('says what it found', () => {
    expect(resumeStep(receipt('Launch', 2401), seen({ vms: [vm('a')] })).message).toBe('no runner registered for a within 40 min of its launch');
  });
});
