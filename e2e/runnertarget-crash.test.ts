// RunnerTarget crash consistency: the controller is SIGKILLed while one
// target's launch is held at each step (found from the emulators and the
// hosts), then started again with the same flags; every launch converges to
// one VM with its runner online and its receipt Done, with no VM leaked or
// doubled and no runner registration left behind. Then two live replicas
// share the targets: the check Lease lets one act per target at a time.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import type { ControllerProcess } from './support/controller.js';
import { waitFor } from './support/kube.js';
import { startRunnerTargetWorld, type RunnerTargetWorld } from './support/runnertarget-crash.js';

let w: RunnerTargetWorld;
let controller: ControllerProcess;

beforeAll(async () => {
  w = await startRunnerTargetWorld('rtcrash');
  controller = await w.startController();
}, 120_000);

afterAll(async () => {
  await w?.stop();
});

const JOB = [{ labels: ['self-hosted', 'linux'] }];
const launches = async (name: string) => ((await w.get(name))?.status?.receipts ?? []).filter((r: any) => r.action === 'Launch');
const inserts = () => w.gce.requests.filter((r) => r.op === 'insert');
const held = (t: any) => (t?.status?.conditions ?? []).find((c: any) => c.type === 'Held');

/** The replica named in the Held condition: who held the check lease when this status was written. */
function writerOf(t: any): string | undefined {
  const c = held(t);
  const m = c?.status === 'True' ? /^(\S+) holds the check lease$/.exec(c.message ?? '') : undefined;
  return m?.[1];
}

/** The identity a controller process logged at start. */
async function identityOf(c: ControllerProcess): Promise<string> {
  return waitFor('the controller identity in its log', async () => {
    for (const line of readFileSync(c.logFile, 'utf8').split('\n')) {
      try {
        const entry = JSON.parse(line);
        if (entry.identity && entry.msg === 'manager started') return entry.identity as string;
      } catch {
        // not a log line
      }
    }
    return undefined;
  }, 30_000);
}

/** Every version of the objects under `path`, in the order the API server wrote them, with when each arrived. */
async function record(path: string): Promise<{ seen: { at: number; obj: any }[]; stop(): void }> {
  const kc = new KubeConfig();
  kc.loadFromFile(process.env.E2E_KUBECONFIG!);
  const seen: { at: number; obj: any }[] = [];
  const ctl = await new Watch(kc).watch(path, {}, (type, obj) => {
    if (type === 'ADDED' || type === 'MODIFIED') seen.push({ at: Date.now(), obj });
  }, () => undefined);
  return { seen, stop: () => ctl.abort() };
}

describe('RunnerTarget under SIGKILL and two replicas', () => {
  it('a controller SIGKILLed with a launch at each step: started again, every launch ends with one VM, its runner online and its receipt Done; nothing leaked, doubled or left registered', async () => {
    // Three launches whose first check inserts, then held where a follow-up check (10 s later) leaves them:
    // the VM booting; the runner config made at GitHub but its write on the host stalled; the config written
    // but its runner not started.
    const boot = w.holdBoot('crash-boot');
    const delivery = w.holdDelivery('crash-config');
    const runners = w.holdRunners('crash-runner');
    for (const name of ['crash-boot', 'crash-config', 'crash-runner']) {
      w.gh.queueRun(name, JOB);
      await w.target(name, name);
    }
    await waitFor('the boot seen by a check, the config write stalled, the config on the host', async () => {
      const booting = (await w.events('crash-boot')).some((e) => e.reason === 'LaunchWaiting') && w.vmsOf('crash-boot')[0]?.status === 'STAGING';
      const vm = w.vmsOf('crash-runner')[0];
      return booting && delivery.held() && vm !== undefined && w.configOn(vm.name) !== undefined;
    }, 120_000);

    // Before the insert reaches Compute Engine: it hangs there, never acted on.
    w.gce.fault({ op: 'insert', mode: 'hang', times: 1 });
    const before = inserts().length;
    w.gh.queueRun('crash-insert', JOB);
    await w.target('crash-insert', 'crash-insert');
    const hung = await waitFor('the insert hanging at Compute Engine', async () => inserts()[before], 60_000);
    // In flight: the Operation of the insert stays RUNNING.
    w.gce.runningMs = 60_000;
    w.gh.queueRun('crash-operation', JOB);
    await w.target('crash-operation', 'crash-operation');
    const op = await waitFor('the insert Operation RUNNING', async () => w.gce.operations().find((o) => o.operationType === 'insert' && o.targetLink.includes('/instances/crash-operation-') && o.status === 'RUNNING'), 60_000);
    w.gce.runningMs = 150;

    await controller.stop('SIGKILL');
    // Where each launch stood when the controller died.
    expect(hung.fault).toBe('hang');
    expect(w.vmsOf('crash-insert')).toEqual([]);
    expect(w.gce.operations().find((o) => o.name === op.name)!.status).not.toBe('DONE');
    expect(w.vmsOf('crash-boot').map((v) => v.status)).toEqual(['STAGING']);
    const configHost = w.vmsOf('crash-config')[0]!.name;
    const stale = w.runnersOf('crash-config');
    expect(stale).toEqual([expect.objectContaining({ name: configHost, status: 'offline' })]);
    expect(w.configOn(configHost)).toBeUndefined();
    expect(w.runnersOf('crash-runner')).toEqual([expect.objectContaining({ status: 'offline' })]);
    const intended: Record<string, any> = {};
    for (const name of ['crash-insert', 'crash-operation', 'crash-boot', 'crash-config', 'crash-runner']) {
      const l = await launches(name);
      expect(l).toEqual([expect.objectContaining({ phase: 'Intended' })]);
      intended[name] = l[0];
    }
    const runnerChecked = (await w.get('crash-runner')).status.lastCheckAt;

    boot.release();
    delivery.release();
    controller = await w.startController();
    // The runner starts only once the new controller has looked at its host: its config must not be replaced meanwhile.
    await waitFor('a check of crash-runner by the new controller', async () => (await w.get('crash-runner'))?.status?.lastCheckAt !== runnerChecked, 120_000, 500);
    runners.release();

    // The dead replica's check leases run out first (30 s by the new replica's clock).
    for (const name of Object.keys(intended)) {
      await waitFor(`${name} converged`, async () => {
        const l = await launches(name);
        return l.length === 1 && l[0].phase === 'Done' && w.runnersOf(name).map((r) => r.status).join() === 'online';
      }, 180_000, 1000);
    }
    for (const [name, receipt] of Object.entries(intended)) {
      const [vm, ...doubled] = w.vmsOf(name);
      expect(doubled).toEqual([]);
      expect(vm).toMatchObject({ name: receipt.hosts[0], status: 'RUNNING', requestId: receipt.requestId });
      expect(w.runnersOf(name)).toEqual([expect.objectContaining({ name: vm!.name, status: 'online' })]);
      const t = await w.get(name);
      expect(t.status.receipts).toEqual([expect.objectContaining({ id: receipt.id, action: 'Launch', phase: 'Done' })]);
      expect(t.status.hosts).toEqual([expect.objectContaining({ name: vm!.name })]);
    }
    // No VM of any other name, none left unlabelled.
    expect(w.gce.instances()).toHaveLength(5);
    // The registration whose config never reached its host was removed; the one config made again is the only other.
    expect(w.gh.requests.filter((r) => r.op === 'delete-runner' && r.path.endsWith(`/${stale[0]!.id}`) && r.status === 204)).toHaveLength(1);
    expect(w.runnersOf('crash-config')[0]!.id).not.toBe(stale[0]!.id);
    expect(w.gh.requests.filter((r) => r.op === 'generate-jitconfig' && r.status === 201)).toHaveLength(6);
    // The runner that was starting kept its registration: one config, never replaced.
    expect(w.gh.requests.filter((r) => r.op === 'delete-runner')).toHaveLength(1);
  }, 420_000);

  it('two live replicas on the same targets: one acts per target at a time, every receipt written by the holder of its check lease, no VM doubled', async () => {
    const second = await w.startController();
    const replicas = new Set([await identityOf(controller), await identityOf(second)]);
    expect(replicas.size).toBe(2);
    const targets = await record(`/apis/leasehold.dev/v1alpha1/namespaces/${w.ns}/runnertargets`);
    const leases = await record(`/apis/coordination.k8s.io/v1/namespaces/${w.ns}/leases`);
    // Each insert's Operation runs a second: two replicas launching for one target at once would overlap.
    w.gce.runningMs = 1000;
    const names = ['pair-a', 'pair-b', 'pair-c'];
    try {
      for (const name of names) {
        w.gh.queueRun(name, [...JOB, ...JOB]);
        await w.target(name, name, { maxHosts: 2, checkInterval: '50s' });
      }
      for (const name of names) {
        await waitFor(`${name}: two hosts with their runners online`, async () => {
          const l = await launches(name);
          return l.length === 2 && l.every((r: any) => r.phase === 'Done') && w.runnersOf(name).filter((r) => r.status === 'online').length === 2;
        }, 180_000, 1000);
      }
      // Both replicas have held check leases: the exclusion was between two live replicas, not one idle one.
      await waitFor('both replicas holding check leases', async () => replicas.size === new Set(leases.seen.map((v) => v.obj.spec?.holderIdentity).filter((h) => replicas.has(h))).size, 120_000, 500);
    } finally {
      w.gce.runningMs = 150;
      targets.stop();
      leases.stop();
    }

    for (const name of names) {
      const uid = (await w.get(name)).metadata.uid;
      // Who held the target's check lease when: from each version of the Lease, as it arrived.
      const spans: { holder: string; from: number; to: number }[] = [];
      for (const v of leases.seen.filter((x) => x.obj.metadata.name === `runnertarget-${uid}`)) {
        const holder = v.obj.spec?.holderIdentity ?? '';
        const last = spans.at(-1);
        if (last && last.to === Infinity && last.holder === holder) continue;
        if (last && last.to === Infinity) last.to = v.at;
        if (holder) spans.push({ holder, from: v.at, to: Infinity });
      }
      // Each receipt was first written by one check, whose Held condition names its replica.
      const versions = targets.seen.filter((x) => x.obj.metadata.name === name).map((x) => x.obj);
      const writers = new Map<string, string | undefined>();
      for (const v of versions) for (const r of v.status?.receipts ?? []) if (!writers.has(r.id)) writers.set(r.id, writerOf(v));
      expect([...writers.values()].every((h) => h !== undefined && replicas.has(h))).toBe(true);
      const receipts = (await w.get(name)).status.receipts;
      expect(receipts.map((r: any) => [r.action, r.phase])).toEqual([['Launch', 'Done'], ['Launch', 'Done']]);

      // The provider changes for the target: one insert per VM, none overlapping, each made while the
      // replica that wrote its receipt held the check lease.
      const vms = w.vmsOf(name);
      expect(vms).toHaveLength(2);
      const ops = w.gce.operations().filter((o) => o.operationType === 'insert' && vms.some((v) => o.targetLink.endsWith(`/instances/${v.name}`)));
      expect(ops).toHaveLength(2);
      ops.sort((a, b) => Date.parse(a.insertTime) - Date.parse(b.insertTime));
      expect(Date.parse(ops[1]!.insertTime)).toBeGreaterThanOrEqual(Date.parse(ops[0]!.endTime!));
      for (const vm of vms) {
        const receipt = receipts.find((r: any) => r.requestId === vm.requestId);
        const writer = writers.get(receipt.id)!;
        const at = Date.parse(ops.find((o) => o.targetLink.endsWith(`/instances/${vm.name}`))!.insertTime);
        expect(spans.filter((s) => s.from <= at && at <= s.to).map((s) => s.holder)).toEqual([writer]);
      }
      // The lease kept the replicas apart, not the resourceVersion check behind it: no write conflicted.
      const reasons = (await w.events(name)).map((e) => e.reason);
      expect(reasons).not.toContain('StatusConflict');
      expect(reasons).not.toContain('NotDurable');
    }
    const turnedAway = (await Promise.all(names.map((n) => w.events(n)))).flat().filter((e) => e.reason === 'HeldElsewhere');
    expect(turnedAway.length).toBeGreaterThan(0);
    expect(w.gce.instances().filter((i) => i.labels['leasehold-runnertarget']?.startsWith('pair-'))).toHaveLength(6);
  }, 420_000);
});
