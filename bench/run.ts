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
//            BENCH_MEM_OFFERS (100) Offers in cache (spread over BENCH_MEM_NAMESPACES
//            (1) namespaces; above 1 the controller watches all), compiled and with the chart's
//            nodeOptions (BENCH_MEM_NODE_FLAGS overrides); cold start to first full
//            reconcile; a restart over the reconciled Leases: its time and writes.
//   lambda   BENCH_LAMBDA_N (10) Leases launched together against the Lambda
//            emulator with the real 12 s launch rule, vs the floor (N-1) x 12 s.
//   idle     BENCH_IDLE_N (50) Leases with idleTimeout BENCH_IDLE_TIMEOUT (10s) and
//            --check-interval BENCH_IDLE_CHECK (5s): release lateness distribution.
//   peer     PeerFleet lending (peer.ts) on BENCH_PEER_NODES (100) KWOK nodes to a second
//            control plane's queue of BENCH_PEER_JOBS peer Jobs: claim latency and drain
//            reaction vs pollInterval, throughput and its writes vs their floor, quiet cost.
//   runner   RunnerTarget (runnertarget.ts) against the Compute Engine and GitHub emulators with
//            BENCH_RUNNER_HOSTS (50) sshd hosts: queued job to registered runner vs boot time;
//            per check duration and provider calls by route vs their floor, steady and scale-down.
//   pass     one PeerFleet lending pass (peer-pass.ts, no cluster) timed at BENCH_PASS_NODES
//            (250 to 4,000) busy lending nodes: its cost per node as the fleet grows.
//   cli      `leasehold run` on a Ready Lease (cli.ts; the builds BENCH_CLI names) vs plain ssh to the
//            same sshd machine, BENCH_CLI_RUNS (20) each: command start to remote process start.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ControlPlane } from '../e2e/cluster/controlplane.js';
import { startController } from '../e2e/support/controller.js';
import { startLambdaEmulator } from '../e2e/fakes/lambda/server.js';
import { cliPhase } from './cli.js';
import { memoryPhase } from './memory.js';
import { peerPhase } from './peer.js';
import { passPhase } from './peer-pass.js';
import { runnerPhase } from './runnertarget.js';
import {
  G, api, apiserverCounts, apiserverMetrics, bareClient, connect, controllerKeySecret, controllerReads, createLeases, env, listLeases, log, mib, ms,
  namespace, offer, quantiles, results, sharedMachine, sleep, stopSharedMachine, stopTrackers, waitUntil,
} from './support.js';

const N = env('BENCH_N', 1000);
const QUIET_S = env('BENCH_QUIET_S', 60);
const LAMBDA_N = env('BENCH_LAMBDA_N', 10);
const IDLE_N = env('BENCH_IDLE_N', 50);
const IDLE_TIMEOUT = process.env.BENCH_IDLE_TIMEOUT ?? '10s';
const IDLE_CHECK = process.env.BENCH_IDLE_CHECK ?? '5s';
const PHASES = new Set((process.env.BENCH_PHASES ?? 'loop,memory,lambda,idle,peer,pass,runner,cli').split(','));

async function loopPhase() {
  const ns = await namespace('bench-loop');
  const pub = await controllerKeySecret(ns);
  const machine = sharedMachine('loop', pub);
  // One sshd machine for every Lease (see bench-idle): sessions to the others are the controller's, not work.
  await offer('bench-shared', { command: { acquire: machine.acquire, release: machine.release, shape: { os: 'linux', arch: process.arch === 'arm64' ? 'arm64' : 'amd64', cpus: 1 } }, pricePerHour: 0, idleTimeout: '1h', maxLifetime: '12h', busyWhen: ['jobs', 'gpuProcesses'] });
  const ctl = await startController(api.cp.info.kubeconfig, ['--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', String(N), '--check-interval', '1m', '--acquire-timeout', '30m'], { LEASEHOLD_LOG_LEVEL: 'info' });
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
    await api.custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns });
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
    await api.custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: 'bench-shared' }).catch(() => undefined);
  }
}

async function lambdaPhase() {
  const ns = await namespace('bench-lambda');
  const emu = await startLambdaEmulator({ bootMs: 300, terminateMs: 300, catalog: [] });
  emu.setCatalog([{ name: 'cpu_1x_bench', description: 'cpu 1x bench', gpu_description: '', price_cents_per_hour: 40, specs: { vcpus: 1, memory_gib: 1, storage_gib: 10, gpus: 0 }, regions: ['us-east-1'] }]);
  const apiKey = emu.addAccount('bench');
  await api.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'lambda-bench' }, stringData: { apiKey } } });
  await offer('bench-lambda', { lambda: { apiKeySecretRef: { name: 'lambda-bench', namespace: ns }, endpoint: emu.url, login: emu.sshUser, sshPort: emu.sshPort }, idleTimeout: '1h', maxLifetime: '12h' });
  const ctl = await startController(api.cp.info.kubeconfig, [
    '--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', String(LAMBDA_N), '--concurrency', String(LAMBDA_N),
    '--check-interval', '1m', '--acquire-timeout', '10m', '--lambda-list-interval', '3s', '--lambda-poll-interval', '250ms', '--orphans', 'report',
  ], { LEASEHOLD_LOG_LEVEL: 'info' });
  try {
    await waitUntil('Lambda Offer listed', async () => {
      const o = (await api.custom.getClusterCustomObject({ ...G, plural: 'offers', name: 'bench-lambda' })) as any;
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
    await api.custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns }).catch(() => undefined);
    await waitUntil('Lambda Leases gone', async () => (await listLeases(ns)).length === 0, 120_000).catch(() => undefined);
    await ctl.stop();
    await emu.stop();
    await api.custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: 'bench-lambda' }).catch(() => undefined);
  }
}

async function idlePhase() {
  const ns = await namespace('bench-idle');
  const pub = await controllerKeySecret(ns);
  const machine = sharedMachine('idle', pub);
  // Every Lease of the phase is on this one sshd machine, so each probe would see the controller's
  // sessions to the others as open sessions and keep every Lease busy: only jobs and GPU processes count here.
  await offer('bench-idle', { command: { acquire: machine.acquire, release: machine.release, shape: { os: 'linux', arch: process.arch === 'arm64' ? 'arm64' : 'amd64', cpus: 1 } }, pricePerHour: 0, idleTimeout: IDLE_TIMEOUT, maxLifetime: '12h', busyWhen: ['jobs', 'gpuProcesses'] });
  const ctl = await startController(api.cp.info.kubeconfig, ['--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', String(IDLE_N), '--check-interval', IDLE_CHECK, '--acquire-timeout', '10m'], { LEASEHOLD_LOG_LEVEL: 'info' });
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
    await api.custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns }).catch(() => undefined);
    await waitUntil('idle Leases gone', async () => (await listLeases(ns)).length === 0, 120_000).catch(() => undefined);
    await ctl.stop();
    stopSharedMachine(machine.dir, 'idle');
    await api.custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: 'bench-idle' }).catch(() => undefined);
  }
}

async function main() {
  const t0 = Date.now();
  log(`phases ${[...PHASES].join(',')}`);
  // The shared control plane; the peer phase starts its own two (it needs a scheduler, KWOK and a peer).
  if (['loop', 'memory', 'lambda', 'idle', 'runner', 'cli'].some((p) => PHASES.has(p))) {
    const cp = await ControlPlane.start();
    try {
      connect(cp);
      const applied = await cp.kubectl(['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
      if (applied.code !== 0) throw new Error(applied.stderr);
      await cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '-l', 'app.kubernetes.io/part-of=leasehold']);
      log(`control plane up at ${cp.info.server}`);
      if (PHASES.has('loop')) await loopPhase();
      if (PHASES.has('memory')) await memoryPhase();
      if (PHASES.has('lambda')) await lambdaPhase();
      if (PHASES.has('idle')) await idlePhase();
      if (PHASES.has('runner')) await runnerPhase();
      if (PHASES.has('cli')) await cliPhase();
    } finally {
      await stopTrackers().catch(() => undefined);
      await cp.stop();
    }
  }
  if (PHASES.has('peer')) await peerPhase();
  if (PHASES.has('pass')) passPhase();
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
