import { describe, expect, it } from '@jest/globals';
import type { RunnerHost } from '../../../src/api/index.js';
import { observeHosts, priceOf } from './hosts.js';
import type { HostProbe, Observation } from '../observation.js';
import { NOW, ago, host, iso, job, runner, spec, vm } from '../testing/pool.js';

const observation = (over: Partial<Observation> = {}): Observation => ({ at: NOW, jobs: [], runners: [], vms: [], probes: new Map(), ...over });
const tiers = spec.gce.machineTypeTiers;

describe('observeHosts', () => {
  it.each<[string, RunnerHost, Partial<Observation>, Partial<RunnerHost>]>([
    ['launching, VM still provisioning', host('a', 'Launching'), { vms: [vm('a', 'PROVISIONING')] }, { state: 'Launching' }],
    ['launching, VM running, no runner yet', host('a', 'Launching'), { vms: [vm('a')] }, { state: 'Registering' }],
    ['registered and idle: the idle clock starts', host('a', 'Registering'), { vms: [vm('a')], runners: [runner('a')] }, { state: 'Idle', idleSince: iso(NOW) }],
    ['still idle: the clock keeps its start', host('a', 'Idle', { idleSince: ago(600) }), { vms: [vm('a')], runners: [runner('a')] }, { state: 'Idle', idleSince: ago(600) }],
    ['busy flag', host('a', 'Idle', { idleSince: ago(600) }), { vms: [vm('a')], runners: [runner('a', true)] }, { state: 'Busy', idleSince: undefined }],
    [
      'a job in progress on it while the flag still reads false',
      host('a', 'Idle', { idleSince: ago(600) }),
      { vms: [vm('a')], runners: [runner('a')], jobs: [job('in_progress', ['self-hosted'], { runnerName: 'a' })] },
      { state: 'Busy', idleSince: undefined },
    ],
    [
      'a job process seen over SSH while the flag reads false',
      host('a', 'Idle', { idleSince: ago(600) }),
      { vms: [vm('a')], runners: [runner('a')], probes: new Map<string, HostProbe>([['a', { job: 'running' }]]) },
      { state: 'Busy' },
    ],
    ['busy again then idle: the clock restarts', host('a', 'Busy'), { vms: [vm('a')], runners: [runner('a')] }, { state: 'Idle', idleSince: iso(NOW) }],
    [
      'an idle runner goes offline: Offline, its clock starts',
      host('a', 'Idle', { idleSince: ago(600), runnerID: 7 }),
      { vms: [vm('a')], runners: [runner('a', false, { status: 'offline', id: 7 })] },
      { state: 'Offline', offlineSince: iso(NOW), idleSince: undefined, runnerID: 7, message: `runner a went offline (seen since ${iso(NOW)}); it takes no jobs, and is drained and replaced unless it is back online within the offline grace` },
    ],
    ['a busy runner goes offline (its job ended, or its process crashed)', host('a', 'Busy'), { vms: [vm('a')], runners: [runner('a', false, { status: 'offline' })] }, { state: 'Offline', offlineSince: iso(NOW) }],
    ['still offline: the clock keeps its start', host('a', 'Offline', { offlineSince: ago(120) }), { vms: [vm('a')], runners: [runner('a', false, { status: 'offline' })] }, { state: 'Offline', offlineSince: ago(120) }],
    ['offline but a job runs on it: busy', host('a', 'Offline', { offlineSince: ago(120) }), { vms: [vm('a')], runners: [runner('a', false, { status: 'offline' })], probes: new Map<string, HostProbe>([['a', { job: 'running' }]]) }, { state: 'Busy', offlineSince: undefined }],
    ['back online: idle, the offline clock gone', host('a', 'Offline', { offlineSince: ago(120) }), { vms: [vm('a')], runners: [runner('a')] }, { state: 'Idle', idleSince: iso(NOW), offlineSince: undefined }],
    ['offline and then removed (GitHub drops a JIT runner after its job): drained', host('a', 'Offline', { offlineSince: ago(120), runnerID: 7 }), { vms: [vm('a')] }, { state: 'Draining', offlineSince: undefined, runnerID: 7 }],
    [
      'a registration not yet online on a booting host is registering, not offline (the boot grace covers it)',
      host('a', 'Registering'),
      { vms: [vm('a')], runners: [runner('a', false, { status: 'offline' })] },
      { state: 'Registering', message: 'runner registered but offline' },
    ],
    ['an offline host whose VM is gone: left for the orphan policy', host('a', 'Offline', { offlineSince: ago(120) }), {}, { state: 'Offline', offlineSince: ago(120) }],
    [
      'its runner gone after its job (JIT runners are ephemeral): drained, not waiting as a registering host',
      host('a', 'Busy', { runnerID: 7 }),
      { vms: [vm('a')] },
      { state: 'Draining', runnerID: 7, message: 'runner a is gone (a just-in-time runner leaves after its one job); confirming over SSH that no job runs before the VM is deleted' },
    ],
    ['an idle host whose runner was removed: drained', host('a', 'Idle', { runnerID: 7, idleSince: ago(600) }), { vms: [vm('a')] }, { state: 'Draining', idleSince: undefined }],
    ['its runner gone while SSH still sees the job: busy until it ends', host('a', 'Busy', { runnerID: 7 }), { vms: [vm('a')], probes: new Map<string, HostProbe>([['a', { job: 'running' }]]) }, { state: 'Busy' }],
    ['a booted host whose runner never came: still registering', host('a', 'Registering'), { vms: [vm('a')] }, { state: 'Registering' }],
    ['draining stays draining', host('a', 'Draining'), { vms: [vm('a')], runners: [runner('a')] }, { state: 'Draining' }],
    ['deleting stays deleting', host('a', 'Deleting'), { vms: [vm('a')] }, { state: 'Deleting' }],
    ['VM gone: left for the orphan policy', host('a', 'Idle', { idleSince: ago(600) }), {}, { state: 'Idle', idleSince: ago(600) }],
  ])('%s', (_name, h, over, want) => {
    const [next] = observeHosts([h], observation(over), tiers);
    const { idleSince, offlineSince, ...rest } = want;
    expect(next).toMatchObject(rest);
    // Status must not keep a stale idle or offline clock.
    if ('idleSince' in want) expect(next!.idleSince).toBe(idleSince);
    if ('offlineSince' in want) expect(next!.offlineSince).toBe(offlineSince);
  });

  it('adopts VMs of the pool that status does not list, at their tier price', () => {
    const hosts = observeHosts([], observation({ vms: [vm('x', 'RUNNING', { machineType: 'n2d-standard-16', provisioningModel: 'STANDARD' }), vm('t', 'TERMINATED')], runners: [runner('x')] }), tiers);
    expect(hosts).toEqual([expect.objectContaining({ name: 'x', state: 'Idle', pricePerHour: 0.7, provisioningModel: 'STANDARD', message: expect.stringMatching(/adopted/) })]);
  });
});

describe('priceOf', () => {
  it.each<[string, 'SPOT' | 'STANDARD', number]>([
    ['n2d-standard-8', 'SPOT', 0.07],
    ['n2d-standard-16', 'STANDARD', 0.7],
    ['e2-unknown', 'SPOT', 0.14],
    ['e2-unknown', 'STANDARD', 0.7],
  ])('%s %s: %s', (machineType, provisioningModel, price) => expect(priceOf({ machineType, provisioningModel }, tiers)).toBe(price));
});
