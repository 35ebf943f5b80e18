// RunnerTarget checks run off the reconcile workers: with more long checks
// than workers (four launches whose insert Operations stay RUNNING, against
// the controller's four RunnerTarget workers), a new target is still checked
// at once; and a SIGTERM gives the long checks the shutdown grace, then ends
// them and hands their check leases back for the next replica.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ControllerProcess } from './support/controller.js';
import { getJSON, waitFor } from './support/kube.js';
import { startRunnerTargetWorld, type RunnerTargetWorld } from './support/runnertarget-crash.js';

let w: RunnerTargetWorld;
let controller: ControllerProcess;

beforeAll(async () => {
  w = await startRunnerTargetWorld('rtchecks', ['--runner-check-concurrency', '8', '--shutdown-grace', '3s']);
  controller = await w.startController();
}, 120_000);

afterAll(async () => {
  if (w) w.gce.runningMs = 150;
  await w?.stop();
});

const JOB = [{ labels: ['self-hosted', 'linux'] }];
const SLOW = ['slow-0', 'slow-1', 'slow-2', 'slow-3'];
const runningInserts = () => w.gce.operations().filter((o) => o.operationType === 'insert' && o.status !== 'DONE');

describe('RunnerTarget checks on the effect runner', () => {
  it('a new target is checked while more long checks run than there are workers; SIGTERM ends them after the grace and releases their leases', async () => {
    // Every insert's Operation stays RUNNING for 90 s (fixed when it is made): each launching check waits on it.
    w.gce.runningMs = 90_000;
    for (const name of SLOW) {
      w.gh.queueRun(name, JOB);
      await w.target(name, name);
    }
    await waitFor('four launches waiting on their insert Operation', async () => SLOW.every((n) => runningInserts().some((o) => o.targetLink.includes(`/instances/${n}-`))), 120_000, 250);
    const before = await Promise.all(SLOW.map(async (n) => (await w.get(n))?.status?.lastCheckAt));
    expect(await controller.metric('leasehold_effects_in_flight', { controller: 'runnertarget', kind: 'check' })).toBe(4);

    const applied = Date.now();
    await w.target('quick', 'quick', { dryRun: true });
    await waitFor('quick checked', async () => (await w.get('quick'))?.status?.lastCheckAt, 60_000, 100);
    console.log(`runnertarget checks: a new target checked ${Date.now() - applied} ms after kubectl apply, with 4 long checks running on 4 workers' worth of targets`);
    // None of the long checks had ended when the new one was done.
    expect(runningInserts().length).toBeGreaterThanOrEqual(4);
    expect(await Promise.all(SLOW.map(async (n) => (await w.get(n))?.status?.lastCheckAt))).toEqual(before);

    // SIGTERM: the long checks get the 3 s grace, then end where they are and let go of their leases.
    const stopped = Date.now();
    await controller.stop('SIGTERM');
    const tookMs = Date.now() - stopped;
    expect(tookMs).toBeLessThan(45_000);
    for (const n of SLOW) {
      const uid = (await w.get(n)).metadata.uid;
      const lease = await getJSON(w.kubectl, ['-n', w.ns, 'leases.coordination.k8s.io', `runnertarget-${uid}`]);
      expect({ n, holder: lease?.spec?.holderIdentity ?? '' }).toEqual({ n, holder: '' });
    }

    // The next replica continues each launch (same requestId) once its Operation is done: one VM each, runners online.
    w.gce.runningMs = 150;
    controller = await w.startController();
    for (const n of SLOW) {
      await waitFor(`${n} launched`, async () => w.runnersOf(n).some((r) => r.status === 'online'), 240_000, 500);
      expect(w.vmsOf(n)).toHaveLength(1);
    }
  }, 540_000);
});
