// Leasehold benchmarks: ratios measured in one run, against a control plane
// this script starts (e2e/cluster/controlplane.ts) and the real controller
// process (CONTROLLER_ENTRY; the memory phase runs its production build).
// Nothing is asserted; numbers are printed.
//
//   node --import tsx bench/run.ts            (make bench)
//
// Phases (BENCH_PHASES, comma-separated; default all):
//   loop     N Leases (BENCH_N, 1000) to Ready on ONE shared real sshd machine
//            (a command Offer whose acquire prints that machine's target), vs a
//            bare @kubernetes/client-node client making the same number of API
//            writes; writes per lease lifecycle; the quiet cost once they idle.
//   memory   controller RSS with BENCH_MEM_LEASES (5000) Pending Leases and
//            BENCH_MEM_OFFERS (100) Offers in cache, compiled and with the chart's
//            nodeOptions (BENCH_MEM_NODE_FLAGS overrides); cold start to first full
//            reconcile; a restart over the reconciled Leases: its time and writes.
//   lambda   BENCH_LAMBDA_N (10) Leases launched together against the Lambda
//            emulator with the real 12 s launch rule, vs the floor (N-1) x 12 s.
//   idle     BENCH_IDLE_N (50) Leases with idleTimeout BENCH_IDLE_TIMEOUT (10s) and
//            --check-interval BENCH_IDLE_CHECK (5s): release lateness distribution.
import * as k8s from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../e2e/cluster/controlplane.js';
import { CONTROLLER_ENTRY, startController, sumMetric, type ControllerProcess } from '../e2e/support/controller.js';
import { startLambdaEmulator } from '../e2e/fakes/lambda/server.js';
import { generateControllerKey } from '../src/machine/keys.js';
import { makeCountingClient } from '../src/kube/client.js';
import { Metrics } from '../src/kube/metrics.js';
import { parse as parseYaml } from 'yaml';

const env = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const N = env('BENCH_N', 1000);
const QUIET_S = env('BENCH_QUIET_S', 60);
const MEM_LEASES = env('BENCH_MEM_LEASES', 5000);
const MEM_OFFERS = env('BENCH_MEM_OFFERS', 100);
// The Node flags the chart gives the controller (values.yaml nodeOptions), unless told otherwise.
const MEM_NODE_FLAGS = (process.env.BENCH_MEM_NODE_FLAGS ?? String(parseYaml(readFileSync(join(process.cwd(), 'charts/leasehold/values.yaml'), 'utf8')).nodeOptions ?? '')).split(' ').filter(Boolean);
const LAMBDA_N = env('BENCH_LAMBDA_N', 10);
const IDLE_N = env('BENCH_IDLE_N', 50);
const IDLE_TIMEOUT = process.env.BENCH_IDLE_TIMEOUT ?? '10s';
const IDLE_CHECK = process.env.BENCH_IDLE_CHECK ?? '5s';
const PHASES = new Set((process.env.BENCH_PHASES ?? 'loop,memory,lambda,idle').split(','));

const G = { group: 'leasehold.dev', version: 'v1alpha1' };
const work = mkdtempSync(join(tmpdir(), 'leasehold-bench-'));
const results: Record<string, unknown> = { machine: `${cpus().length} cores, node ${process.version}` };
const log = (s: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cp: ControlPlane;
let custom: k8s.CustomObjectsApi;
let core: k8s.CoreV1Api;

/** Runs fn over items with at most `width` in flight. */
async function pool<T>(items: T[], width: number, fn: (t: T, i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  }));
}

/**
 * The bench's view of one namespace's Leases: an informer (one list, then a
 * watch), so that waiting for N Leases costs the API server nothing per poll.
 * Polling with a list of 1000-5000 objects every second loaded the API
 * server the controller is measured against (earlier runs did that).
 */
const trackers = new Map<string, Promise<k8s.Informer<any> & k8s.ObjectCache<any>>>();
let kubeConfig: k8s.KubeConfig;
function tracker(namespace: string) {
  let t = trackers.get(namespace);
  if (!t) {
    const path = `/apis/leasehold.dev/v1alpha1/namespaces/${namespace}/leases`;
    const inf = k8s.makeInformer<any>(kubeConfig, path, () => custom.listNamespacedCustomObject({ ...G, plural: 'leases', namespace }) as any);
    inf.on('error', () => setTimeout(() => void inf.start().catch(() => undefined), 1000));
    t = inf.start().then(() => inf);
    trackers.set(namespace, t);
  }
  return t;
}

async function listLeases(namespace: string): Promise<any[]> {
  return [...(await tracker(namespace)).list()];
}

async function stopTrackers(): Promise<void> {
  for (const t of trackers.values()) await (await t).stop();
  trackers.clear();
}

async function waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs: number, everyMs = 1000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

async function namespace(name: string): Promise<string> {
  await core.createNamespace({ body: { metadata: { name } } });
  return name;
}

/** The controller key made up front, so the shared machine can admit it before the controller starts. */
async function controllerKeySecret(ns: string): Promise<string> {
  const key = generateControllerKey();
  await core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name: 'leasehold-controller-ssh' },
      data: { id_ed25519: Buffer.from(key.privateKey).toString('base64'), 'id_ed25519.pub': Buffer.from(key.publicKey).toString('base64') },
    },
  });
  return key.publicKey;
}

/** One real sshd (e2e/providers/sshd-machine.sh) and a provider whose acquire prints its target for every lease. */
function sharedMachine(name: string, publicKey: string): { acquire: string[]; release: string[]; dir: string } {
  const dir = join(work, `machines-${name}`);
  const line = execFileSync(join(process.cwd(), 'e2e/providers/sshd-machine.sh'), ['acquire'], {
    env: { ...process.env, LEASEHOLD_LEASE_ID: `shared-${name}`, LEASEHOLD_LEASE_SSH_KEY: publicKey, LEASEHOLD_MACHINES_DIR: dir },
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString().trim().split('\n').pop()!;
  writeFileSync(join(work, `target-${name}.json`), `${line}\n`);
  const acquire = join(work, `acquire-${name}.sh`);
  writeFileSync(acquire, `#!/bin/sh\necho "sharing machine ${name}" >&2\nexec cat ${join(work, `target-${name}.json`)}\n`);
  chmodSync(acquire, 0o755);
  return { acquire: [acquire], release: ['/bin/true'], dir };
}

function stopSharedMachine(dir: string, name: string) {
  try {
    execFileSync(join(process.cwd(), 'e2e/providers/sshd-machine.sh'), ['release'], {
      env: { ...process.env, LEASEHOLD_LEASE_ID: `shared-${name}`, LEASEHOLD_MACHINES_DIR: dir },
      stdio: 'ignore',
    });
  } catch {
    // best effort
  }
}

async function offer(name: string, spec: Record<string, unknown>) {
  await custom.createClusterCustomObject({ ...G, plural: 'offers', body: { apiVersion: 'leasehold.dev/v1alpha1', kind: 'Offer', metadata: { name }, spec } });
}

async function createLeases(ns: string, n: number, spec: (i: number) => Record<string, unknown>, width = 8): Promise<number> {
  const t0 = Date.now();
  await pool(Array.from({ length: n }, (_, i) => i), width, (i) =>
    custom.createNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns, body: { apiVersion: 'leasehold.dev/v1alpha1', kind: 'Lease', metadata: { name: `l-${i}` }, spec: spec(i) } }),
  );
  return Date.now() - t0;
}

async function apiserverMetrics(): Promise<string> {
  return (await cp.kubectl(['get', '--raw', '/metrics'])).stdout;
}

function apiserverCounts(text: string): { writes: number; reads: number } {
  let writes = 0;
  let reads = 0;
  for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY']) writes += sumMetric(text, 'apiserver_request_total', { group: 'leasehold.dev', verb });
  for (const verb of ['GET', 'LIST', 'WATCH']) reads += sumMetric(text, 'apiserver_request_total', { group: 'leasehold.dev', verb });
  return { writes, reads };
}

async function controllerReads(ctl: ControllerProcess): Promise<number> {
  let sum = 0;
  for (const verb of ['GET', 'LIST', 'WATCH']) sum += await ctl.metric('leasehold_kube_requests_total', { client: 'controller', verb });
  return sum;
}

/**
 * The bare client: `writes` API writes with the same library against the same
 * API server, in a namespace no controller watches: `objects` Lease creates,
 * then status merge patches over them. Returns the time taken.
 */
let bareRuns = 0;
async function bareClient(writes: number, objects: number, width: number): Promise<number> {
  const bareNs = await namespace(`bench-bare-${++bareRuns}`);
  const made = Math.min(objects, writes);
  const t = Date.now();
  await createLeases(bareNs, made, () => ({ where: 'cpus>=1' }), width);
  const opts = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
  await pool(Array.from({ length: writes - made }, (_, i) => i), width, (i) =>
    custom.patchNamespacedCustomObjectStatus({ ...G, plural: 'leases', namespace: bareNs, name: `l-${i % made}`, body: { status: { message: `bare write ${i}` } } }, opts),
  );
  const took = Date.now() - t;
  await custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: bareNs }).catch(() => undefined);
  return took;
}

const ms = (n: number) => `${(n / 1000).toFixed(1)} s`;
const mib = (n: number) => `${Math.round(n / 2 ** 20)} MiB`;

// ---------------------------------------------------------------------------

async function loopPhase() {
  const ns = await namespace('bench-loop');
  const pub = await controllerKeySecret(ns);
  const machine = sharedMachine('loop', pub);
  await offer('bench-shared', { command: { acquire: machine.acquire, release: machine.release, shape: { os: 'linux', arch: process.arch === 'arm64' ? 'arm64' : 'amd64', cpus: 1 } }, pricePerHour: 0, idleTimeout: '1h', maxLifetime: '12h' });
  const ctl = await startController(cp.info.kubeconfig, ['--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', String(N), '--check-interval', '1m', '--acquire-timeout', '30m'], { LEASEHOLD_LOG_LEVEL: 'info' });
  try {
    await sleep(2000);
    const w0 = await ctl.writes();
    const t0 = Date.now();
    const createMs = await createLeases(ns, N, () => ({ where: 'cpus>=1', offer: 'bench-shared' }));
    log(`loop: created ${N} Leases in ${ms(createMs)}`);
    await waitUntil(`${N} Leases Ready`, async () => (await listLeases(ns)).filter((l) => l.status?.phase === 'Ready' || l.status?.phase === 'Idle').length === N, 60 * 60_000, 1000);
    const tReady = Date.now() - t0;
    const wReady = (await ctl.writes()) - w0;
    log(`loop: ${N} Ready in ${ms(tReady)} with ${wReady} controller writes`);

    const bare4 = await bareClient(wReady, N, 4);
    log(`loop: bare client (4 in flight, the controller's --concurrency) made ${wReady} writes in ${ms(bare4)}`);
    const bare1 = await bareClient(wReady, N, 1);
    log(`loop: bare client (serial) made ${wReady} writes in ${ms(bare1)}`);

    // Quiet: wait for the first check to move every Lease to Idle (the steady state), then a quiet window.
    await waitUntil(`${N} Leases Idle`, async () => (await listLeases(ns)).filter((l) => l.status?.phase === 'Idle').length === N, 30 * 60_000, 2000);
    await sleep(5000);
    const q0 = { w: await ctl.writes(), r: await controllerReads(ctl), s: apiserverCounts(await apiserverMetrics()) };
    await sleep(QUIET_S * 1000);
    const q1 = { w: await ctl.writes(), r: await controllerReads(ctl), s: apiserverCounts(await apiserverMetrics()) };
    const perMin = (d: number) => Number(((d * 60) / QUIET_S).toFixed(1));
    const quiet = {
      leases: N,
      phase: 'Idle (probed over SSH every 1m check)',
      windowSeconds: QUIET_S,
      controllerWritesPerMin: perMin(q1.w - q0.w),
      controllerReadsPerMin: perMin(q1.r - q0.r),
      apiserverLeaseholdWritesPerMin: perMin(q1.s.writes - q0.s.writes),
      apiserverLeaseholdReadsPerMin: perMin(q1.s.reads - q0.s.reads),
    };
    log(`loop: quiet ${JSON.stringify(quiet)}`);

    // The rest of the lifecycle: delete, release, finalizer off.
    const td = Date.now();
    await custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns });
    await waitUntil(`${N} Leases released and gone`, async () => (await listLeases(ns)).length === 0, 30 * 60_000, 1000);
    const tGone = Date.now() - td;
    const wAll = (await ctl.writes()) - w0;
    results.loop = {
      leases: N,
      createSeconds: createMs / 1000,
      toReadySeconds: tReady / 1000,
      controllerWritesToReady: wReady,
      writesPerLeaseToReady: Number((wReady / N).toFixed(2)),
      bareClientSeconds4InFlight: bare4 / 1000,
      bareClientSecondsSerial: bare1 / 1000,
      overheadRatio4InFlight: Number((tReady / bare4).toFixed(1)),
      overheadRatioSerial: Number((tReady / bare1).toFixed(1)),
      deleteToGoneSeconds: tGone / 1000,
      writesPerLeaseLifecycle: Number((wAll / N).toFixed(2)),
      quiet,
      controllerRSS: mib(await ctl.metric('leasehold_process_resident_memory_bytes')),
    };
    log(`loop: ${JSON.stringify(results.loop)}`);
  } finally {
    await ctl.stop();
    stopSharedMachine(machine.dir, 'loop');
    await custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: 'bench-shared' }).catch(() => undefined);
  }
}

/** The memory phase runs the production build, as the image does: compile it once. */
function buildController(): number {
  const t = Date.now();
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: ['ignore', 'ignore', 'inherit'] });
  return Date.now() - t;
}

/** What the controller's own process metrics say about its memory. */
async function memoryOf(ctl: ControllerProcess) {
  const [rss, heapUsed, heapTotal, external] = await Promise.all(
    ['process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_heap_size_total_bytes', 'nodejs_external_memory_bytes'].map((m) => ctl.metric(`leasehold_${m}`)),
  );
  return { rss: rss!, heapUsed: heapUsed!, heapTotal: heapTotal!, external: external! };
}

/** Reconciles each controller has finished, and whether its queue is empty. */
async function reconcileProgress(ctl: ControllerProcess, controller: string): Promise<{ done: number; queued: number }> {
  const done = await ctl.metric('leasehold_reconcile_total', { controller });
  const queued = await ctl.metric('leasehold_workqueue_depth', { controller });
  return { done, queued };
}

async function memoryPhase() {
  const ns = await namespace('bench-mem');
  await controllerKeySecret(ns);
  const buildMs = buildController();
  log(`memory: production build (npm run build) in ${ms(buildMs)}`);
  const t0 = Date.now();
  await pool(Array.from({ length: MEM_OFFERS }, (_, i) => i), 8, (i) =>
    offer(`bench-mem-${i}`, { command: { acquire: ['/bin/true'], release: ['/bin/true'], shape: { os: 'linux', arch: 'amd64', cpus: 1 + (i % 64), tools: ['docker', `tool-${i}`] } }, pricePerHour: i / 10 }),
  );
  // No Offer has a GPU: every Lease stays Pending, no machine is made.
  const createMs = await createLeases(ns, MEM_LEASES, (i) => ({ where: `gpu=h100,cpus>=${1 + (i % 16)}` }), 16);
  log(`memory: ${MEM_OFFERS} Offers and ${MEM_LEASES} Leases created in ${ms(Date.now() - t0)} (leases ${ms(createMs)})`);
  const args = ['--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', '10', '--check-interval', '1m', '--log-level', 'info'];
  const run = { compiled: true, nodeFlags: MEM_NODE_FLAGS };
  const tStart = Date.now();
  let ctl = await startController(cp.info.kubeconfig, args, {}, run);
  try {
    const healthyMs = Date.now() - tStart;
    let peak = 0;
    let polls = 0;
    await waitUntil(`${MEM_LEASES} Leases Pending`, async () => {
      if (polls++ % 8 === 0) peak = Math.max(peak, await ctl.metric('leasehold_process_resident_memory_bytes'));
      return (await listLeases(ns)).filter((l) => l.status?.phase === 'Pending' && l.status?.observedGeneration === l.metadata.generation).length === MEM_LEASES;
    }, 30 * 60_000, 250);
    const coldMs = Date.now() - tStart;
    // Its floor: the writes it had to make (a status write and an event per Lease), made by a bare client.
    const coldWrites = await ctl.writes();
    // The controller creates nothing but Events here (POST); status writes are PATCH.
    const posts = await ctl.metric('leasehold_kube_requests_total', { client: 'controller', verb: 'POST' });
    log(`memory: first full reconcile in ${ms(coldMs)} with ${coldWrites} controller writes`);
    await sleep(15_000);
    const settled = await memoryOf(ctl);
    results.memory = {
      leases: MEM_LEASES,
      offers: MEM_OFFERS,
      build: `compiled (dist/${CONTROLLER_ENTRY}.js)`,
      nodeFlags: MEM_NODE_FLAGS.join(' '),
      coldStartToHealthySeconds: healthyMs / 1000,
      coldStartToFirstFullReconcileSeconds: coldMs / 1000,
      controllerWritesInFirstReconcile: coldWrites,
      eventCreatesInFirstReconcile: posts,
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
    ctl = await startController(cp.info.kubeconfig, args, {}, run);
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
    await custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns }).catch(() => undefined);
    await pool(Array.from({ length: MEM_OFFERS }, (_, i) => i), 8, (i) => custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: `bench-mem-${i}` }).catch(() => undefined));
  }
}

async function lambdaPhase() {
  const ns = await namespace('bench-lambda');
  const emu = await startLambdaEmulator({ bootMs: 300, terminateMs: 300, catalog: [] });
  emu.setCatalog([{ name: 'cpu_1x_bench', description: 'cpu 1x bench', gpu_description: '', price_cents_per_hour: 40, specs: { vcpus: 1, memory_gib: 1, storage_gib: 10, gpus: 0 }, regions: ['us-east-1'] }]);
  const apiKey = emu.addAccount('bench');
  await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'lambda-bench' }, stringData: { apiKey } } });
  await offer('bench-lambda', { lambda: { apiKeySecretRef: { name: 'lambda-bench', namespace: ns }, endpoint: emu.url, login: emu.sshUser, sshPort: emu.sshPort }, idleTimeout: '1h', maxLifetime: '12h' });
  const ctl = await startController(cp.info.kubeconfig, [
    '--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', String(LAMBDA_N), '--concurrency', String(LAMBDA_N),
    '--check-interval', '1m', '--acquire-timeout', '10m', '--lambda-list-interval', '3s', '--lambda-poll-interval', '250ms', '--orphans', 'report',
  ], { LEASEHOLD_LOG_LEVEL: 'info' });
  try {
    await waitUntil('Lambda Offer listed', async () => {
      const o = (await custom.getClusterCustomObject({ ...G, plural: 'offers', name: 'bench-lambda' })) as any;
      return o.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');
    }, 60_000, 500);
    const t0 = Date.now();
    await createLeases(ns, LAMBDA_N, () => ({ where: 'cpus>=1', offer: 'bench-lambda' }), LAMBDA_N);
    await waitUntil(`${LAMBDA_N} Lambda Leases Ready`, async () => (await listLeases(ns)).filter((l) => l.status?.phase === 'Ready' || l.status?.phase === 'Idle').length === LAMBDA_N, 20 * 60_000, 500);
    const total = Date.now() - t0;
    const launches = emu.launches.filter((l) => l.outcome === 'launched');
    const all = emu.launches;
    const span = launches[launches.length - 1]!.time - launches[0]!.time;
    const floor = (LAMBDA_N - 1) * 12_000;
    const gaps = launches.slice(1).map((l, i) => l.time - launches[i]!.time);
    results.lambda = {
      leases: LAMBDA_N,
      launchRequests: all.length,
      rateLimited: all.filter((l) => l.outcome !== 'launched').length,
      firstToLastLaunchSeconds: span / 1000,
      floorSeconds: floor / 1000,
      spanOverFloor: Number((span / floor).toFixed(3)),
      allReadySeconds: total / 1000,
      allReadyOverFloor: Number((total / floor).toFixed(3)),
      minGapSeconds: Math.min(...gaps) / 1000,
      maxGapSeconds: Math.max(...gaps) / 1000,
    };
    log(`lambda: ${JSON.stringify(results.lambda)}`);
  } finally {
    await custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns }).catch(() => undefined);
    await waitUntil('Lambda Leases gone', async () => (await listLeases(ns)).length === 0, 120_000).catch(() => undefined);
    await ctl.stop();
    await emu.stop();
    await custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: 'bench-lambda' }).catch(() => undefined);
  }
}

function quantiles(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))]!;
  return { min: s[0]!, p50: q(0.5), p90: q(0.9), max: s[s.length - 1]! };
}

async function idlePhase() {
  const ns = await namespace('bench-idle');
  const pub = await controllerKeySecret(ns);
  const machine = sharedMachine('idle', pub);
  await offer('bench-idle', { command: { acquire: machine.acquire, release: machine.release, shape: { os: 'linux', arch: process.arch === 'arm64' ? 'arm64' : 'amd64', cpus: 1 } }, pricePerHour: 0, idleTimeout: IDLE_TIMEOUT, maxLifetime: '12h' });
  const ctl = await startController(cp.info.kubeconfig, ['--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', String(IDLE_N), '--check-interval', IDLE_CHECK, '--acquire-timeout', '10m'], { LEASEHOLD_LOG_LEVEL: 'info' });
  try {
    await createLeases(ns, IDLE_N, () => ({ where: 'cpus>=1', offer: 'bench-idle' }));
    // Poll every 100 ms; the first time a Lease is seen Releasing (or later) is its release time.
    const released = new Map<string, number>();
    const lastActivity = new Map<string, number>();
    const idleMs = Number(/^(\d+)s$/.exec(IDLE_TIMEOUT)?.[1] ?? NaN) * 1000;
    const deadline = Date.now() + 20 * 60_000;
    while (released.size < IDLE_N && Date.now() < deadline) {
      const now = Date.now();
      for (const l of await listLeases(ns)) {
        const st = l.status ?? {};
        if ((st.phase === 'Releasing' || st.phase === 'Released') && !released.has(l.metadata.name)) {
          released.set(l.metadata.name, now);
          // What the controller counts from: readyAt or lastActivityAt, as stored (whole seconds).
          lastActivity.set(l.metadata.name, Math.max(Date.parse(st.readyAt ?? '') || 0, Date.parse(st.lastActivityAt ?? '') || 0));
        }
      }
      await sleep(100);
    }
    const lateness = [...released.entries()].map(([name, t]) => (t - lastActivity.get(name)! - idleMs) / 1000);
    results.idle = {
      leases: IDLE_N,
      released: released.size,
      idleTimeout: IDLE_TIMEOUT,
      checkInterval: IDLE_CHECK,
      latenessSeconds: Object.fromEntries(Object.entries(quantiles(lateness)).map(([k, v]) => [k, Number(v.toFixed(2))])),
      note: 'release time = first poll (every 100 ms) that shows Releasing; last activity = max(readyAt, lastActivityAt) as stored (whole seconds, as the controller reads it)',
    };
    log(`idle: ${JSON.stringify(results.idle)}`);
  } finally {
    await custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns }).catch(() => undefined);
    await waitUntil('idle Leases gone', async () => (await listLeases(ns)).length === 0, 120_000).catch(() => undefined);
    await ctl.stop();
    stopSharedMachine(machine.dir, 'idle');
    await custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: 'bench-idle' }).catch(() => undefined);
  }
}

async function main() {
  const t0 = Date.now();
  cp = await ControlPlane.start();
  try {
    const applied = await cp.kubectl(['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
    if (applied.code !== 0) throw new Error(applied.stderr);
    await cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '-l', 'app.kubernetes.io/part-of=leasehold']);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(cp.info.kubeconfig);
    kubeConfig = kc;
    // The controller's own client (one kept-alive connection), so that the bare client is its floor.
    custom = makeCountingClient(kc, k8s.CustomObjectsApi, new Metrics({ defaultMetrics: false }), 'bench');
    core = kc.makeApiClient(k8s.CoreV1Api);
    log(`control plane up at ${cp.info.server}; phases ${[...PHASES].join(',')}`);
    if (PHASES.has('loop')) await loopPhase();
    if (PHASES.has('memory')) await memoryPhase();
    if (PHASES.has('lambda')) await lambdaPhase();
    if (PHASES.has('idle')) await idlePhase();
  } finally {
    await stopTrackers().catch(() => undefined);
    await cp.stop();
  }
  results.totalSeconds = (Date.now() - t0) / 1000;
  process.stdout.write(`\n${JSON.stringify(results, null, 2)}\n`);
  if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, `${JSON.stringify(results, null, 2)}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
