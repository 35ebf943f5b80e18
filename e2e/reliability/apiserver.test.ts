// API server faults, on a private control plane: kube-apiserver and etcd are
// restarted mid-run, and a second client patches every Lease's annotations
// in a tight loop so resourceVersions move and the controller's status
// writes meet 409 conflicts. No side effect may follow a failed intent
// write: each Lease's provider acquires (sshd provider calls, emulator
// launches) number at most its successful Launching writes (one launch
// attempt each), and everything converges with nothing leaked or doubled.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { join } from 'node:path';
import { ControlPlane } from '../cluster/controlplane.js';
import { alive, calls, commandLedger, lambdaLedger, report, runLifecycles, setHold, sleep, sshdSampler, until, type Restartable } from '../support/chaos.js';
import { harness, processesLeft, type Harness } from './harness.js';

const SOAK = process.env.LEASEHOLD_SOAK === '1';
let cp: ControlPlane;
let h: Harness;
let ctl: Restartable;

beforeAll(async () => {
  cp = await ControlPlane.start({ binDir: process.env.E2E_BIN_DIR });
  const crds = await cp.kubectl(['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
  expect(crds.code).toBe(0);
  await cp.kubectl(['wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s']);
  h = await harness('apifaults', { kubeconfig: cp.info.kubeconfig, binDir: cp.info.binDir });
  // Leader election off: a replica whose renewals fail past the renew
  // deadline exits by design; this suite is about one process riding it out.
  ctl = h.controller(['--no-leader-elect', '--resync-period', '20s']);
  await ctl.up();
}, 180_000);

afterAll(async () => {
  await h?.cleanup([ctl]);
  const left = h ? processesLeft(h, [ctl]) : [];
  await cp?.stop();
  if (left.length) throw new Error(`processes left: ${left.join(', ')}`);
});

describe('API server faults', () => {
  it('apiserver+etcd restarts and 409 storms on status writes: no acquire without its intent, all converge, nothing leaked or doubled', async () => {
    const n = SOAK ? 12 : 6;
    const names = [...Array.from({ length: n }, (_, i) => `al-${i}`), ...Array.from({ length: n }, (_, i) => `ac-${i}`)];
    // Every Launching write that succeeded, per Lease, seen from the outside
    // as status.launch.attempt (each successful OFFER_CHOSEN write makes one).
    const attempts = new Map<string, number>();
    let touches = 0;
    let running = true;
    const storm = (async () => {
      while (running) {
        const items = await h.api.list(h.ns).catch(() => [] as any[]);
        for (const l of items) {
          const a = l.status?.launch?.attempt ?? 0;
          attempts.set(l.metadata.name, Math.max(a, attempts.get(l.metadata.name) ?? 0));
        }
        // Half the Leases each round, every 50-250 ms: writes made from a
        // cache a patch has overtaken conflict, yet a retry can still win
        // (a patch on every Lease every few ms is a livelock no client escapes).
        await Promise.all(items.filter(() => Math.random() < 0.5).map((l) => h.api.touch(h.ns, l.metadata.name, String(++touches)).catch(() => undefined)));
        await sleep(50 + Math.random() * 200);
      }
    })();
    const restarts = (async () => {
      await sleep(6000);
      await cp.restart(1500);
      await sleep(8000);
      await cp.restart(1500);
    })();
    // Slow acquires a little, so the restarts land while machines are being made.
    setHold(h.machines, 'acquire-before', 1);
    const sampler = sshdSampler(h.machines);
    const t0 = Date.now();
    let lambda;
    let command;
    try {
      [lambda, command] = await Promise.all([
        runLifecycles(h.api, h.ns, names.slice(0, n), { where: 'cpus>=1', offer: h.lambdaOffer }, 200_000, 700),
        runLifecycles(h.api, h.ns, names.slice(n), { where: 'cpus>=1', offer: h.commandOffer }, 200_000, 700),
        restarts,
      ]);
    } finally {
      running = false;
      await storm;
    }
    await until('provider commands ended', () => calls(h.machines).filter((c) => c.event === 'start').every((c) => !alive(c.pid)), 30_000, 100);
    await until('Lambda instances terminated', () => h.emu.instances(h.apiKey).every((i) => i.status === 'terminated'), 15_000, 100).catch(() => undefined);
    sampler.stop();
    const conflicts = ctl.ctl ? await ctl.ctl.metric('leasehold_kube_responses_total', { code: '409' }) : 0;
    const restartsSeen = ctl.ctl ? await ctl.ctl.metric('leasehold_informer_restarts_total') : 0;

    // No acquire without its intent: per Lease, provider-side acquires <= successful Launching writes.
    const excess: string[] = [];
    const acquires = new Map<string, number>();
    for (const c of calls(h.machines)) if (c.verb === 'acquire' && c.event === 'start') acquires.set(c.id, (acquires.get(c.id) ?? 0) + 1);
    for (const [name, id] of command!.ids) {
      const a = acquires.get(id) ?? 0;
      if (a > (attempts.get(name) ?? 0) || a > 1) excess.push(`${name}: ${a} acquires, ${attempts.get(name) ?? 0} Launching writes`);
    }
    const launchedPerName = new Map<string, number>();
    for (const i of h.emu.instances(h.apiKey)) launchedPerName.set(i.name ?? '', (launchedPerName.get(i.name ?? '') ?? 0) + 1);
    for (const [name, id] of lambda!.ids) {
      const a = launchedPerName.get(await h.machineName(id)) ?? 0;
      if (a > (attempts.get(name) ?? 0) || a > 1) excess.push(`${name}: ${a} instances, ${attempts.get(name) ?? 0} Launching writes`);
    }
    const c = commandLedger(h.machines, sampler.max);
    const l = lambdaLedger(h.emu, h.apiKey);
    const settled = [...lambda!.settled.values(), ...command!.settled.values()];
    report('apiserver', {
      leases: names.length,
      ready: settled.filter((p) => p === 'Ready').length,
      failed: settled.filter((p) => p === 'Failed').length,
      controlPlaneRestarts: 2,
      informerRestarts: restartsSeen,
      annotationPatches: touches,
      conflicts409: conflicts,
      launchingWrites: [...attempts.values()].reduce((a, b) => a + b, 0),
      sshdAcquires: [...acquires.values()].reduce((a, b) => a + b, 0),
      lambdaInstances: l.instances,
      leaked: c.leaked + l.leaked,
      doubled: c.doubled + l.doubled,
      seconds: Math.round((Date.now() - t0) / 1000),
    });
    expect(excess).toEqual([]);
    expect([...c.detail, ...l.detail]).toEqual([]);
    // The storm really made the controller's writes conflict, and the restarts really cut its watches.
    expect(conflicts).toBeGreaterThan(0);
    expect(restartsSeen).toBeGreaterThan(0);
  }, SOAK ? 1_000_000 : 260_000);
});
