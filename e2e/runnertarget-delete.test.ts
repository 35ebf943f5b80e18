// A RunnerTarget deleted at each step of a launch, the controller running
// throughout: its receipt settles, its host drains or its VM goes, and the
// finalizer leaves with no VM and no runner registration behind. The steps
// are held as in the crash tests: the insert hanging before Compute Engine
// acts on it, its Operation still RUNNING, the VM booting, the runner config
// write stalled on a running VM, the config written but the runner not
// started, and the runner online.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from './support/kube.js';
import { startRunnerTargetWorld, type RunnerTargetWorld } from './support/runnertarget-crash.js';

let w: RunnerTargetWorld;

beforeAll(async () => {
  w = await startRunnerTargetWorld('rtdelete');
  await w.startController();
}, 120_000);

afterAll(async () => {
  await w?.stop();
});

const JOB = [{ labels: ['self-hosted', 'linux'] }];
const inserts = () => w.gce.requests.filter((r) => r.op === 'insert');
const launchOf = async (name: string) => ((await w.get(name))?.status?.receipts ?? []).find((r: any) => r.action === 'Launch');
const remove = (name: string) => w.kubectl(['delete', 'runnertarget', name, '-n', w.ns, '--wait=false']);

describe('a RunnerTarget deleted at any step of a launch', () => {
  it('goes, with its receipt settled and no VM or runner left, from every step', async () => {
    const deleted: string[] = [];

    // The insert hangs at Compute Engine, never acted on: no VM will appear.
    w.gce.fault({ op: 'insert', mode: 'hang', times: 1 });
    const before = inserts().length;
    w.gh.queueRun('del-insert', JOB);
    await w.target('del-insert', 'del-insert');
    await waitFor('the insert hanging at Compute Engine', async () => inserts()[before], 60_000);
    expect(await launchOf('del-insert')).toMatchObject({ phase: 'Intended' });
    await remove('del-insert');
    deleted.push('del-insert');

    // The insert accepted, its Operation RUNNING.
    w.gce.runningMs = 60_000;
    w.gh.queueRun('del-operation', JOB);
    await w.target('del-operation', 'del-operation');
    await waitFor('the insert Operation RUNNING', async () => w.gce.operations().find((o) => o.operationType === 'insert' && o.targetLink.includes('/instances/del-operation-') && o.status === 'RUNNING'), 60_000);
    await remove('del-operation');
    deleted.push('del-operation');
    w.gce.runningMs = 150;

    // The VM booting (STAGING), the runner config write stalled on a running VM, the config written but its runner not started.
    const boot = w.holdBoot('del-boot');
    const delivery = w.holdDelivery('del-config');
    const runners = w.holdRunners('del-runner');
    for (const name of ['del-boot', 'del-config', 'del-runner', 'del-online']) {
      w.gh.queueRun(name, JOB);
      await w.target(name, name);
    }
    await waitFor('del-boot STAGING', async () => w.vmsOf('del-boot')[0]?.status === 'STAGING', 120_000);
    await remove('del-boot');
    deleted.push('del-boot');
    await waitFor('del-config: the config write stalled', async () => delivery.held(), 120_000);
    expect(w.runnersOf('del-config')).toEqual([expect.objectContaining({ status: 'offline' })]);
    await remove('del-config');
    deleted.push('del-config');
    await waitFor('del-runner: the config on its host', async () => {
      const vm = w.vmsOf('del-runner')[0];
      return vm !== undefined && w.configOn(vm.name) !== undefined;
    }, 120_000);
    expect(w.runnersOf('del-runner')).toEqual([expect.objectContaining({ status: 'offline' })]);
    await remove('del-runner');
    deleted.push('del-runner');
    // About a second after its runner came online.
    await waitFor('del-online: its runner online', async () => w.runnersOf('del-online').some((r) => r.status === 'online'), 120_000, 100);
    await remove('del-online');
    deleted.push('del-online');

    // Let the held steps go, as the hosts would eventually; none of them may bring a launch back.
    boot.release();
    delivery.release();
    runners.release();

    for (const name of deleted) {
      await waitFor(`${name} gone`, async () => (await w.get(name)) === undefined, 300_000, 1000);
    }
    for (const name of deleted) {
      expect({ name, vms: w.vmsOf(name).filter((v) => v.status !== 'TERMINATED').map((v) => `${v.name} ${v.status}`) }).toEqual({ name, vms: [] });
      expect({ name, runners: w.runnersOf(name).map((r) => r.name) }).toEqual({ name, runners: [] });
    }
    // The launch that never reached Compute Engine was settled, not waited on forever.
    const abandoned = (await w.events('del-insert')).filter((e) => e.reason === 'LaunchAbandoned');
    expect(abandoned).toEqual([expect.objectContaining({ message: expect.stringMatching(/no VM appeared/) })]);
    // One VM at most was ever made per target: nothing was launched again while it was being deleted.
    for (const name of deleted) expect({ name, made: w.gce.inserts().filter((i) => i.name.startsWith(`${name}-`) && !i.refused).length }).toEqual({ name, made: name === 'del-insert' ? 0 : 1 });
  }, 600_000);
});
