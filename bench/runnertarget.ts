// The runner phase: one RunnerTarget against the Compute Engine and GitHub
// emulators with a real sshd per VM (e2e/support/runnerhosts-bench.ts), and
// the real controller process. It measures, in one run:
//  - time from a queued job to its registered runner, against the
//    emulator's boot time (insert → RUNNING), for jobs queued one at a time
//    and for a burst that fills the pool to BENCH_RUNNER_HOSTS;
//  - per check at that size: duration, and Compute Engine, GitHub and SSH
//    calls by route, against the floor the policy strictly needs, for
//    steady checks (nothing to change) and for a scale-down; of the GitHub
//    calls, the share answered 304 (conditional listings, not counted by
//    GitHub's primary rate limit);
//  - hosts per job: BENCH_RUNNER_REUSE_JOBS short jobs queued at once on a
//    pool of BENCH_RUNNER_REUSE_MAX_HOSTS, with spec.github.hostReuse
//    ephemeral and then reuse: VM inserts per job, and queued → running.
// A check is the span its coordination Lease is held: from acquireTime to
// the renewTime of the release (holderIdentity ""), both written by the
// controller, seen through an informer. Provider calls are the emulators'
// request logs in that span.
import * as k8s from '@kubernetes/client-node';
import { join } from 'node:path';
import { userInfo } from 'node:os';
import { startController, type ControllerProcess } from '../e2e/support/controller.js';
import { emulatorEndpointArgs } from '../e2e/support/runnertarget.js';
import { startRunnerHosts, type RunnerHosts } from '../e2e/support/runnerhosts-bench.js';
import { freePort } from '../e2e/fakes/lambda/machine.js';
import type { FakeRunner } from '../e2e/fakes/github/server.js';
import { api, env, log, namespace, quantiles, results, sleep, waitUntil, work } from './support.js';

const HOSTS = env('BENCH_RUNNER_HOSTS', 50);
const SINGLES = Math.max(0, Math.min(env('BENCH_RUNNER_SINGLES', 5), HOSTS - 1));
const REUSE_JOBS = env('BENCH_RUNNER_REUSE_JOBS', 20);
const REUSE_MAX_HOSTS = env('BENCH_RUNNER_REUSE_MAX_HOSTS', 3);
const REUSE_JOB_MS = env('BENCH_RUNNER_REUSE_JOB_MS', 3000);
/** When a runner takes its job: `settled`, once a check has seen it online (its receipt settled); `start`, the moment it starts. */
const REUSE_TAKE = process.env.BENCH_RUNNER_REUSE_TAKE === 'start' ? 'start' : 'settled';
const BOOT_MS = env('BENCH_RUNNER_BOOT_MS', 3000);
const CHECK = process.env.BENCH_RUNNER_CHECK ?? '10s';
/** 1: queued jobs also reach the controller as signed workflow_job webhooks from an org hook (--github-webhook-port). */
const WEBHOOK = env('BENCH_RUNNER_WEBHOOK', 0) === 1;
const HOOK_SECRET = 'bench-webhook-secret';
const STEADY = env('BENCH_RUNNER_STEADY', 3);
const DRAIN = env('BENCH_RUNNER_DRAIN', Math.max(1, Math.round(HOSTS / 5)));
const CHECK_MS = Number(/^(\d+)s$/.exec(CHECK)?.[1] ?? NaN) * 1000;
const ZONES = ['us-central1-a', 'us-central1-b'];
const REPO = 'bench';
const LABELS = ['self-hosted', 'linux'];
const TG = { group: 'leasehold.dev', version: 'v1alpha1', plural: 'runnertargets' };
const NAME = 'bench';
/** The busy-flag lag the controller waits out before an idle host may drain (scaledown.ts). */
const BUSY_LAG_MS = 60_000;

interface Check {
  start: number;
  end: number;
  ssh: number;
  kube: Map<string, number>;
}
type Counts = Record<string, number>;

const round = (x: number, d = 2) => Number(x.toFixed(d));
const secs = (xs: number[]) => (xs.length ? Object.fromEntries(Object.entries(quantiles(xs)).map(([k, v]) => [k, round(v / 1000)])) : {});

/** leasehold_kube_requests_total{client="controller"} by verb. */
async function kubeRequests(ctl: ControllerProcess): Promise<Map<string, number>> {
  const text = await (await fetch(ctl.metricsURL)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^leasehold_kube_requests_total\{client="controller",verb="([^"]*)"\} (\S+)$/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

/** Every check of the target, from its check lease: each release closes one. */
async function followChecks(ns: string, ctl: ControllerProcess, hosts: RunnerHosts, checks: Check[]) {
  const coord = api.kubeConfig.makeApiClient(k8s.CoordinationV1Api);
  const inf = k8s.makeInformer<k8s.V1Lease>(api.kubeConfig, `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, () => coord.listNamespacedLease({ namespace: ns }));
  inf.on('update', (l) => {
    if (!l.metadata?.name?.startsWith('runnertarget-') || l.spec?.holderIdentity) return;
    const start = new Date(l.spec?.acquireTime as unknown as string).getTime();
    const end = new Date(l.spec?.renewTime as unknown as string).getTime();
    // In the order the releases come; the counter is read a moment later, long before the next check.
    const check: Check = { start, end, ssh: hosts.sshLogins(), kube: new Map() };
    checks.push(check);
    void kubeRequests(ctl).then((kube) => (check.kube = kube)).catch(() => undefined);
  });
  inf.on('error', () => setTimeout(() => void inf.start().catch(() => undefined), 1000));
  await inf.start();
  return inf;
}

/** Requests in [from, to] by "METHOD op". */
function byRoute(reqs: readonly { time: number; method: string; op: string }[], from: number, to: number): Counts {
  const out: Counts = {};
  for (const r of reqs) if (r.time >= from && r.time <= to) out[`${r.method} ${r.op}`] = (out[`${r.method} ${r.op}`] ?? 0) + 1;
  return Object.fromEntries(Object.entries(out).sort());
}
const total = (c: Counts) => Object.values(c).reduce((s, v) => s + v, 0);
const add = (a: Counts, b: Counts) => {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = (out[k] ?? 0) + v;
  return out;
};

/** What one check cost, from the emulators' logs and the counters sampled at its end. */
function costOf(c: Check, prev: Check | undefined, hosts: RunnerHosts) {
  const kube: Counts = {};
  for (const [verb, v] of c.kube) if (v - (prev?.kube.get(verb) ?? 0)) kube[verb] = v - (prev?.kube.get(verb) ?? 0);
  return {
    seconds: round((c.end - c.start) / 1000, 3),
    gce: byRoute(hosts.gce.requests, c.start, c.end),
    github: byRoute(hosts.gh.requests, c.start, c.end),
    github304: hosts.gh.requests.filter((r) => r.time >= c.start && r.time <= c.end && r.status === 304).length,
    ssh: c.ssh - (prev?.ssh ?? 0),
    kube,
  };
}
type Cost = ReturnType<typeof costOf>;

/**
 * The calls a check strictly needs, whatever it decides: one
 * instances.aggregatedList for every zone (a page per 500 VMs), one page of the org's
 * runners per 100, per followed repository one runs listing for queued and
 * one for in_progress plus one jobs listing per such run, and one SSH
 * session per host to read its job process and pressure. The address and
 * host keys come with the list and the pin taken at delivery: no per-host
 * Compute Engine call. A change adds its mutation only (runner DELETE,
 * instance DELETE), and an SSH session per drained host to confirm no job.
 */
function floorOf(hostsProbed: number, runners: number, activeRuns: number, drained = 0) {
  return {
    gce: 1 + drained,
    github: Math.max(1, Math.ceil(runners / 100)) + 2 + activeRuns + drained,
    ssh: hostsProbed + drained,
  };
}

function ratios(cost: { gce: Counts; github: Counts; github304?: number; ssh: number }, floor: ReturnType<typeof floorOf>) {
  const gh = total(cost.github);
  return {
    gce: `${total(cost.gce)} / ${floor.gce} = ${round(total(cost.gce) / floor.gce)}`,
    github: `${gh} / ${floor.github} = ${round(gh / floor.github)}`,
    github304: `${cost.github304 ?? 0} / ${gh} = ${round((cost.github304 ?? 0) / Math.max(1, gh))}`,
    ssh: `${cost.ssh} / ${floor.ssh} = ${round(cost.ssh / floor.ssh)}`,
  };
}

async function targetNow(ns: string): Promise<any> {
  return api.custom.getNamespacedCustomObject({ ...TG, namespace: ns, name: NAME });
}
const openReceipts = (t: any) => (t?.status?.receipts ?? []).filter((r: any) => r.phase === 'Intended').length;
const patchSpec = (ns: string, spec: Record<string, unknown>) =>
  api.custom.patchNamespacedCustomObject({ ...TG, namespace: ns, name: NAME, body: { spec } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));

/** The insert Operation's insertTime of a host, ms since the epoch. */
function insertedAt(hosts: RunnerHosts, name: string): number {
  const op = hosts.gce.operations().find((o) => o.operationType === 'insert' && o.targetLink.endsWith(`/${name}`));
  return op ? Date.parse(op.insertTime) : NaN;
}

/** Latency components of one host, from its job's queue time. */
function latency(hosts: RunnerHosts, name: string, queuedAt: number) {
  const inserted = insertedAt(hosts, name);
  const running = hosts.running.get(name)!;
  const registered = hosts.registered.get(name)!;
  return { queuedToInsert: inserted - queuedAt, boot: running - inserted, runningToRegistered: registered - running, total: registered - queuedAt };
}

function summary(lat: ReturnType<typeof latency>[]) {
  const boot = quantiles(lat.map((l) => l.boot));
  const tot = quantiles(lat.map((l) => l.total));
  return {
    jobs: lat.length,
    queuedToRegisteredSeconds: secs(lat.map((l) => l.total)),
    bootSeconds: secs(lat.map((l) => l.boot)),
    queuedToInsertSeconds: secs(lat.map((l) => l.queuedToInsert)),
    runningToRegisteredSeconds: secs(lat.map((l) => l.runningToRegistered)),
    ratioToBoot: { p50: round(tot.p50 / boot.p50), p90: round(tot.p90 / boot.p50) },
  };
}

/** A RunnerTarget on the emulators: floor 0, one tier at 0.05 USD/h, the shortest check interval the schema takes (scaled to CHECK by --runner-check-interval-scale). */
function createTarget(ns: string, hosts: RunnerHosts, name: string, github: Record<string, unknown>, maxHosts: number) {
  const { gce, gh } = hosts;
  return api.custom.createNamespacedCustomObject({
    ...TG,
    namespace: ns,
    body: {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'RunnerTarget',
      metadata: { name },
      spec: {
        github: { org: gh.org, tokenSecretRef: { name: 'gh-token' }, apiURL: gh.url, ...github },
        gce: { project: gce.project, zones: ZONES, machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }], serviceAccount: 'runner-host@leasehold-test.iam.gserviceaccount.com', credentialsSecretRef: { name: 'gce-key' }, endpoint: gce.url },
        floor: 0,
        maxHosts,
        dailyBudgetUSD: 10_000,
        checkInterval: '30s',
      },
    },
  });
}

/**
 * REUSE_JOBS jobs queued at once on a target of its own (maxHosts
 * REUSE_MAX_HOSTS, hostReuse `mode`); each runner takes a job (REUSE_TAKE:
 * once a check saw it online, or the moment it starts), and the job ends
 * REUSE_JOB_MS later. The target is deleted after, and its VMs waited out.
 */
async function hostsPerJob(ns: string, hosts: RunnerHosts, mode: 'ephemeral' | 'reuse') {
  const { gce, gh } = hosts;
  const name = `jobs-${mode}`;
  const labels = [...LABELS, name];
  await createTarget(ns, hosts, name, { repositories: [`${gh.org}/${name}`], labels: [name], hostReuse: mode }, REUSE_MAX_HOSTS);
  const started = new Map<number, number>();
  const perHost = new Map<string, number>();
  const take = (host: string, runner: FakeRunner) => {
    const job = runner.takeJob();
    if (!job) return;
    started.set(job.id, Date.now());
    perHost.set(host, (perHost.get(host) ?? 0) + 1);
    setTimeout(() => runner.finishJob('success'), REUSE_JOB_MS);
  };
  hosts.onRunner = (host, runner) => {
    if (!host.startsWith(`${name}-`)) return;
    if (REUSE_TAKE === 'start') return take(host, runner);
    void waitUntil(`a check saw the runner of ${host}`, async () => {
      const t: any = await api.custom.getNamespacedCustomObject({ ...TG, namespace: ns, name });
      return !(t?.status?.receipts ?? []).some((r: any) => r.phase === 'Intended' && r.hosts.includes(host));
    }, 10 * 60_000, 200).then(() => take(host, runner), () => undefined);
  };
  const queuedAt = Date.now();
  const { jobIds } = gh.queueRun(name, Array.from({ length: REUSE_JOBS }, () => ({ labels })));
  const ids = new Set(jobIds);
  await waitUntil(`${REUSE_JOBS} jobs of ${name} completed`, async () => gh.jobs().filter((j) => ids.has(j.id) && j.status === 'completed').length === REUSE_JOBS, 30 * 60_000, 200);
  const doneAt = Date.now();
  hosts.onRunner = undefined;
  const inserts = gce.inserts().filter((r) => r.name.startsWith(`${name}-`));
  const made = inserts.filter((r) => !r.refused).length;
  const result = {
    take: REUSE_TAKE,
    jobs: REUSE_JOBS,
    jobSeconds: REUSE_JOB_MS / 1000,
    maxHosts: REUSE_MAX_HOSTS,
    inserts: made,
    insertsPerJob: round(made / REUSE_JOBS),
    refusedInserts: inserts.length - made,
    jobsPerVM: Object.fromEntries(Object.entries(quantiles([...perHost.values()])).map(([k, v]) => [k, v])),
    queuedToRunningSeconds: secs([...started.values()].map((t) => t - queuedAt)),
    queuedToAllDoneSeconds: round((doneAt - queuedAt) / 1000),
  };
  await api.custom.deleteNamespacedCustomObject({ ...TG, namespace: ns, name });
  await waitUntil(`${name} torn down`, async () => {
    const left = gce.instances().filter((i) => i.labels['leasehold-runnertarget'] === name).length;
    const gone = await api.custom.getNamespacedCustomObject({ ...TG, namespace: ns, name }).then(() => false, () => true);
    return left === 0 && gone;
  }, 10 * 60_000, 500);
  return result;
}

export async function runnerPhase(): Promise<void> {
  const ns = await namespace('bench-runner');
  const hosts = await startRunnerHosts(join(work, 'runner-hosts'), { bootMs: BOOT_MS });
  const { gce, gh } = hosts;
  await api.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'gh-token' }, stringData: { token: gh.token } } });
  await api.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'gce-key' }, stringData: { 'key.json': JSON.stringify(gce.serviceAccountKey) } } });
  const hookPort = WEBHOOK ? await freePort() : 0;
  if (WEBHOOK) await api.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'gh-hook' }, stringData: { secret: HOOK_SECRET } } });
  const ctl = await startController(api.cp.info.kubeconfig, ['--no-leader-elect', '--namespace', ns, '--watch-namespace', ns,
    '--runner-ssh-user', userInfo().username, '--runner-ssh-port', String(hosts.sshPort), '--runner-sample-window-scale', String(CHECK_MS / 300_000),
    '--runner-check-interval-scale', String(CHECK_MS / 30_000), ...emulatorEndpointArgs(gce, gh), ...(WEBHOOK ? ['--github-webhook-port', String(hookPort)] : [])], { LEASEHOLD_LOG_LEVEL: 'info' });
  const checks: Check[] = [];
  const inf = await followChecks(ns, ctl, hosts, checks);
  const out: Record<string, unknown> = { hosts: HOSTS, zones: ZONES.length, checkInterval: CHECK, emulatorBootMs: BOOT_MS, webhook: WEBHOOK };
  results.runner = out;
  try {
    if (REUSE_JOBS > 0) {
      const ephemeral = await hostsPerJob(ns, hosts, 'ephemeral');
      log(`runner: hosts per job, ephemeral ${JSON.stringify(ephemeral)}`);
      const reuse = await hostsPerJob(ns, hosts, 'reuse');
      log(`runner: hosts per job, reuse ${JSON.stringify(reuse)}`);
      out.hostsPerJob = { ephemeral, reuse };
    }
    if (HOSTS === 0) return;
    await createTarget(ns, hosts, NAME, { repositories: [`${gh.org}/${REPO}`], ...(WEBHOOK ? { webhookSecretRef: { name: 'gh-hook' } } : {}) }, HOSTS);

    if (WEBHOOK) {
      const made = await fetch(`${gh.url}/orgs/${gh.org}/hooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gh.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'web', events: ['workflow_job'], config: { url: `http://127.0.0.1:${hookPort}/`, content_type: 'json', secret: HOOK_SECRET } }),
      });
      if (made.status !== 201) throw new Error(`creating the org hook: HTTP ${made.status}`);
      const hookId = ((await made.json()) as { id: number }).id;
      // The controller answers once its cache has the target: ping again until it does.
      await waitUntil('a ping answered 200', async () => {
        if (gh.hookDeliveries().some((d) => d.event === 'ping' && d.status_code === 200)) return true;
        await fetch(`${gh.url}/orgs/${gh.org}/hooks/${hookId}/pings`, { method: 'POST', headers: { authorization: `Bearer ${gh.token}` } });
        return false;
      }, 60_000, 1000);
    }

    // 1. Jobs queued one at a time, each at another point of the check cycle.
    const jobIds: number[] = [];
    const singles = [];
    for (let j = 1; j <= SINGLES; j++) {
      await sleep(((j * 0.37) % 1) * CHECK_MS);
      const before = new Set(hosts.registered.keys());
      const queuedAt = Date.now();
      jobIds.push(...gh.queueRun(REPO, [{ labels: LABELS }]).jobIds);
      await waitUntil(`runner ${j} registered`, async () => hosts.registered.size > before.size, 10 * 60_000, 50);
      const name = [...hosts.registered.keys()].find((n) => !before.has(n))!;
      singles.push(latency(hosts, name, queuedAt));
    }
    out.single = summary(singles);
    log(`runner: one job at a time ${JSON.stringify(out.single)}`);

    // 2. The rest of the pool in one burst.
    const before = new Set(hosts.registered.keys());
    const burstAt = Date.now();
    jobIds.push(...gh.queueRun(REPO, Array.from({ length: HOSTS - SINGLES }, () => ({ labels: LABELS }))).jobIds);
    // The hosts-per-job targets registered runners too: only the burst's new hosts count.
    await waitUntil(`${HOSTS} runners registered`, async () => [...hosts.registered.keys()].filter((n) => !before.has(n)).length >= HOSTS - SINGLES, 30 * 60_000, 100);
    const burstHosts = [...hosts.registered.keys()].filter((n) => !before.has(n));
    const burst = burstHosts.map((n) => latency(hosts, n, burstAt));
    const inserts = gce.requests.filter((r) => r.op === 'insert' && r.time >= burstAt).map((r) => r.time);
    out.burst = { ...summary(burst), allRegisteredSeconds: round((Math.max(...burstHosts.map((n) => hosts.registered.get(n)!)) - burstAt) / 1000), firstToLastInsertSeconds: round((Math.max(...inserts) - Math.min(...inserts)) / 1000) };
    log(`runner: burst of ${HOSTS - SINGLES} ${JSON.stringify(out.burst)}`);

    // 3. Steady: the jobs end and the floor holds the pool; every host Idle, no receipt open.
    for (const id of jobIds) gh.completeJob(id, 'success');
    await patchSpec(ns, { floor: HOSTS });
    await waitUntil('the pool steady', async () => {
      const t = await targetNow(ns);
      return (t.status?.hosts ?? []).filter((h: any) => h.state === 'Idle').length === HOSTS && openReceipts(t) === 0;
    }, 10 * 60_000, 500);
    const from = checks.length;
    await waitUntil(`${STEADY + 1} more checks`, async () => checks.length >= from + STEADY + 1, (STEADY + 2) * (CHECK_MS + 120_000), 200);
    const steady = checks.slice(from + 1, from + 1 + STEADY).map((c, i) => costOf(c, checks[from + i], hosts));
    const steadyFloor = floorOf(HOSTS, HOSTS, 0);
    out.steady = { floor: steadyFloor, checks: steady, ratios: steady.map((s) => ratios(s, steadyFloor)), durationSeconds: steady.map((s) => s.seconds) };
    log(`runner: steady ${JSON.stringify(out.steady)}`);

    // 4. Scale-down by DRAIN hosts, once every host has been idle longer than the busy-flag lag.
    const t = await targetNow(ns);
    const idleSince = Math.max(...t.status.hosts.map((h: any) => Date.parse(h.idleSince)));
    await sleep(Math.max(0, idleSince + BUSY_LAG_MS + 2000 - Date.now()));
    const down = checks.length;
    const downAt = Date.now();
    await patchSpec(ns, { floor: HOSTS - DRAIN });
    await waitUntil('the scale-down done', async () => {
      const now = await targetNow(ns);
      const vms = gce.instances().filter((i) => i.labels['leasehold-runnertarget'] === NAME).length;
      return (now.status?.hosts ?? []).length === HOSTS - DRAIN && vms === HOSTS - DRAIN && gh.runners().length === HOSTS - DRAIN && openReceipts(now) === 0;
    }, 15 * 60_000, 500);
    const doneAt = Date.now();
    await waitUntil('the last check of the scale-down to end', async () => checks.length > down && checks[checks.length - 1]!.end >= doneAt - 1000, 5 * 60_000, 200).catch(() => undefined);
    const downChecks = checks.slice(down).filter((c) => c.end >= downAt && c.start <= doneAt).map((c) => costOf(c, checks[checks.indexOf(c) - 1], hosts));
    const sum = downChecks.reduce((a, c) => ({ gce: add(a.gce, c.gce), github: add(a.github, c.github), github304: a.github304 + c.github304, ssh: a.ssh + c.ssh }), { gce: {} as Counts, github: {} as Counts, github304: 0, ssh: 0 });
    const downFloor = floorOf(HOSTS, HOSTS, 0, DRAIN);
    out.scaleDown = {
      drained: DRAIN,
      checks: downChecks.length,
      patchToDoneSeconds: round((doneAt - downAt) / 1000),
      perCheck: downChecks,
      total: sum,
      floor: downFloor,
      ratios: ratios(sum, downFloor),
    };
    log(`runner: scale-down ${JSON.stringify(out.scaleDown)}`);
  } finally {
    await inf.stop();
    await ctl.stop();
    await hosts.stop();
  }
}
