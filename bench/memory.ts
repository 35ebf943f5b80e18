// The memory phase: the production build's RSS and heap with many Pending
// Leases and Offers in cache, its first full reconcile against a bare client,
// and a restart over the reconciled Leases (see bench/README.md).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { CONTROLLER_ENTRY, startController, type ControllerProcess } from '../e2e/support/controller.js';
import { G, api, bareClient, controllerKeySecret, createLeases, env, listLeases, log, mib, ms, namespace, offer, pool, results, sleep, waitUntil } from './support.js';

const MEM_LEASES = env('BENCH_MEM_LEASES', 5000);
const MEM_OFFERS = env('BENCH_MEM_OFFERS', 100);
// Over how many namespaces the Leases are spread; above 1 the controller watches all namespaces.
const MEM_NAMESPACES = env('BENCH_MEM_NAMESPACES', 1);
// The quiet window after the first reconcile.
const QUIET_MS = env('BENCH_MEM_QUIET_S', 60) * 1000;
// The Node flags the chart gives the controller (values.yaml nodeOptions), unless told otherwise.
const MEM_NODE_FLAGS = (process.env.BENCH_MEM_NODE_FLAGS ?? String(parseYaml(readFileSync(join(process.cwd(), 'charts/leasehold/values.yaml'), 'utf8')).nodeOptions ?? '')).split(' ').filter(Boolean);

/**
 * The memory phase runs the production build, as the image does: compile it
 * once, without blocking the event loop (the bench's kept-alive connections
 * must see the API server close them).
 */
async function buildController(): Promise<number> {
  const t = Date.now();
  await promisify(execFile)('npm', ['run', '--silent', 'build']);
  return Date.now() - t;
}

/** What the controller's own process metrics say about its memory. */
async function memoryOf(ctl: ControllerProcess) {
  const [rss, heapUsed, heapTotal, external] = await Promise.all(
    ['process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_heap_size_total_bytes', 'nodejs_external_memory_bytes'].map((m) => ctl.metric(`leasehold_${m}`)),
  );
  return { rss: rss!, heapUsed: heapUsed!, heapTotal: heapTotal!, external: external! };
}

/**
 * Asks /healthz every half second until stopped, on its own timer (not
 * the bench's polls, which wait on the API server): the slowest answer is
 * what a liveness probe would have seen while the controller worked.
 */
function healthProbe(ctl: ControllerProcess) {
  const url = ctl.metricsURL.replace(/\/metrics$/, '/healthz');
  const answers: number[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const t = Date.now();
      try {
        await fetch(url, { signal: AbortSignal.timeout(30_000) });
      } catch {
        // A refused or timed-out probe counts as its whole wait.
      }
      answers.push(Date.now() - t);
      await sleep(500);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const sorted = [...answers].sort((a, b) => a - b);
      return { probes: sorted.length, maxMs: sorted.at(-1) ?? 0, p99Ms: sorted[Math.floor(sorted.length * 0.99)] ?? 0, over1s: sorted.filter((a) => a > 1000).length };
    },
  };
}

/** Reconciles each controller has finished, and whether its queue is empty. */
async function reconcileProgress(ctl: ControllerProcess, controller: string): Promise<{ done: number; queued: number }> {
  const done = await ctl.metric('leasehold_reconcile_total', { controller });
  const queued = await ctl.metric('leasehold_workqueue_depth', { controller });
  return { done, queued };
}

export async function memoryPhase() {
  const ns = await namespace('bench-mem');
  await controllerKeySecret(ns);
  const buildMs = await buildController();
  log(`memory: production build (npm run build) in ${ms(buildMs)}`);
  const t0 = Date.now();
  await pool(Array.from({ length: MEM_OFFERS }, (_, i) => i), 8, (i) =>
    offer(`bench-mem-${i}`, { command: { acquire: ['/bin/true'], release: ['/bin/true'], shape: { os: 'linux', arch: 'amd64', cpus: 1 + (i % 64), tools: ['docker', `tool-${i}`] } }, pricePerHour: i / 10 }),
  );
  // No Offer has a GPU: every Lease stays Pending, no machine is made.
  // The Leases, spread evenly over MEM_NAMESPACES namespaces (the first one is the controller's own when there is one).
  const leaseNamespaces = MEM_NAMESPACES <= 1 ? [ns] : await Promise.all(Array.from({ length: MEM_NAMESPACES }, (_, k) => namespace(`bench-mem-${k}`)));
  const tLeases = Date.now();
  await pool(leaseNamespaces, 1, (lns, k) => {
    const here = Math.floor(MEM_LEASES / leaseNamespaces.length) + (k < MEM_LEASES % leaseNamespaces.length ? 1 : 0);
    return createLeases(lns, here, (i) => ({ where: `gpu=h100,cpus>=${1 + ((i + k) % 16)}` }), 16);
  });
  const createMs = Date.now() - tLeases;
  log(`memory: ${MEM_OFFERS} Offers and ${MEM_LEASES} Leases in ${leaseNamespaces.length} namespace(s) created in ${ms(Date.now() - t0)} (leases ${ms(createMs)})`);
  const watch = MEM_NAMESPACES <= 1 ? ['--watch-namespace', ns] : [];
  const args = ['--no-leader-elect', ...watch, '--namespace', ns, '--max-leases', '10', '--check-interval', '1m', '--log-level', 'info'];
  const pendingNow = async () => {
    let n = 0;
    for (const lns of leaseNamespaces) n += (await listLeases(lns)).filter((l) => l.status?.phase === 'Pending' && l.status?.observedGeneration === l.metadata.generation).length;
    return n;
  };
  const run = { compiled: true, nodeFlags: MEM_NODE_FLAGS };
  const tStart = Date.now();
  let ctl = await startController(api.cp.info.kubeconfig, args, {}, run);
  try {
    const healthyMs = Date.now() - tStart;
    const health = healthProbe(ctl);
    let peak = 0;
    let polls = 0;
    await waitUntil(`${MEM_LEASES} Leases Pending`, async () => {
      if (polls++ % 8 === 0) peak = Math.max(peak, await ctl.metric('leasehold_process_resident_memory_bytes'));
      return (await pendingNow()) === MEM_LEASES;
    }, 30 * 60_000, 250);
    const coldMs = Date.now() - tStart;
    const healthz = await health.stop();
    // Its floor: the writes it had to make (a status write and an event per Lease), made by a bare client.
    const coldWrites = await ctl.writes();
    // The controller creates nothing but Events here (POST); status writes are PATCH.
    const posts = await ctl.metric('leasehold_kube_requests_total', { client: 'controller', verb: 'POST' });
    log(`memory: first full reconcile in ${ms(coldMs)} with ${coldWrites} controller writes; /healthz ${JSON.stringify(healthz)}`);
    await sleep(15_000);
    const settled = await memoryOf(ctl);
    // A quiet minute: nothing changes, so nothing may be written (an event
    // series may still write its last counts in the first half of it).
    const quietFrom = await ctl.writes();
    await sleep(QUIET_MS);
    const quietWrites = (await ctl.writes()) - quietFrom;
    results.memory = {
      leases: MEM_LEASES,
      offers: MEM_OFFERS,
      namespaces: leaseNamespaces.length,
      build: `compiled (dist/${CONTROLLER_ENTRY}.js)`,
      nodeFlags: MEM_NODE_FLAGS.join(' '),
      coldStartToHealthySeconds: healthyMs / 1000,
      coldStartToFirstFullReconcileSeconds: coldMs / 1000,
      controllerWritesInFirstReconcile: coldWrites,
      eventCreatesInFirstReconcile: posts,
      healthzDuringFirstReconcile: healthz,
      quietSeconds: QUIET_MS / 1000,
      controllerWritesInQuiet: quietWrites,
      rssSettled: mib(settled.rss),
      rssPeakDuringFirstReconcile: mib(Math.max(peak, settled.rss)),
      heapUsed: mib(settled.heapUsed),
      heapTotal: mib(settled.heapTotal),
      external: mib(settled.external),
    };
    await ctl.stop();

    // A second start over the same, already reconciled Leases: nothing has
    // changed, so nothing should be written. Done when every Lease and Offer
    // has been reconciled once and the queues are empty.
    const tRestart = Date.now();
    ctl = await startController(api.cp.info.kubeconfig, args, {}, run);
    const restartHealthyMs = Date.now() - tRestart;
    let restartPeak = 0;
    polls = 0;
    await waitUntil(`${MEM_LEASES} Leases reconciled after the restart`, async () => {
      if (polls++ % 8 === 0) restartPeak = Math.max(restartPeak, await ctl.metric('leasehold_process_resident_memory_bytes'));
      const [lease, offer] = await Promise.all([reconcileProgress(ctl, 'lease'), reconcileProgress(ctl, 'offer')]);
      return lease.done >= MEM_LEASES && offer.done >= MEM_OFFERS && lease.queued === 0 && offer.queued === 0;
    }, 30 * 60_000, 250);
    const restartMs = Date.now() - tRestart;
    const restartWrites = await ctl.writes();
    await sleep(15_000);
    const restartSettled = await memoryOf(ctl);
    results.memory = {
      ...(results.memory as object),
      restartToHealthySeconds: restartHealthyMs / 1000,
      restartToFirstFullReconcileSeconds: restartMs / 1000,
      controllerWritesInRestartReconcile: restartWrites,
      controllerWritesRestartPlus15s: await ctl.writes(),
      restartRssPeak: mib(Math.max(restartPeak, restartSettled.rss)),
      restartRssSettled: mib(restartSettled.rss),
      restartHeapUsed: mib(restartSettled.heapUsed),
    };
    log(`memory: restart reconciled everything in ${ms(restartMs)} with ${restartWrites} controller writes`);
    await ctl.stop();

    const bareMs = await bareClient(coldWrites, Math.min(MEM_LEASES, 1000), 4);
    Object.assign(results.memory as object, {
      bareClientSecondsSameWrites4InFlight: bareMs / 1000,
      firstReconcileOverBareRatio: Number((coldMs / bareMs).toFixed(2)),
      afterHealthyOverBareRatio: Number(((coldMs - healthyMs) / bareMs).toFixed(2)),
    });
    log(`memory: ${JSON.stringify(results.memory)}`);
  } finally {
    await ctl.stop();
    for (const lns of leaseNamespaces) await api.custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: lns }).catch(() => undefined);
    await pool(Array.from({ length: MEM_OFFERS }, (_, i) => i), 8, (i) => api.custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: `bench-mem-${i}` }).catch(() => undefined));
  }
}
