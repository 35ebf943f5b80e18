import { describe, expect, it } from '@jest/globals';
import type { RunnerHost } from '../../src/api/index.js';
import { observeHosts, priceOf } from './hosts.js';
import type { HostProbe, Observation } from './observation.js';
import { NOW, ago, host, iso, job, runner, spec, vm } from './testing/pool.js';

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
    ['runner offline', host('a', 'Idle', { idleSince: ago(600) }), { vms: [vm('a')], runners: [runner('a', false, { status: 'offline' })] }, { state: 'Registering', idleSince: undefined }],
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
    const { idleSince, ...rest } = want;
    expect(next).toMatchObject(rest);
    // Status must not keep a stale idle clock.
    if ('idleSince' in want) expect(next!.idleSince).toBe(idleSince);
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
