// The peer phase: PeerFleet lending between two real control planes, ours
// (controllers, scheduler, KWOK fake GPU nodes) and a peer (controllers)
// whose queue is managedBy Jobs, as in e2e/peerfleet-lending.test.ts. One
// run measures claim latency, drain reaction, throughput with its writes
// against their floor, and the quiet cost on both API servers. Every object
// is followed through informers (one list, then a watch), never polled.
import * as k8s from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ControlPlane } from '../e2e/cluster/controlplane.js';
import { createFakeNodes, KWOK_RUN_FOR_ENV } from '../e2e/cluster/kwok.js';
import { createPeerCredential } from '../e2e/cluster/peer.js';
import { startController, type ControllerProcess } from '../e2e/support/controller.js';
import { defaultDenyEgress, optedIn } from '../e2e/support/lending.js';
import { NODE_LABEL, PEER_JOB_UID_LABEL } from '../controllers/peerfleet/labels.js';
import { env, log, ms, quantiles, results, sleep, waitUntil } from './support.js';
import { busyShare, nodeTimeline, type PeerJobSeen } from './peer-timeline.js';

const NODES = env('BENCH_PEER_NODES', 100);
const GPUS = env('BENCH_PEER_GPUS', 1);
const JOBS = env('BENCH_PEER_JOBS', 3 * NODES * GPUS);
const DRAINS = env('BENCH_PEER_DRAINS', Math.max(1, Math.round(NODES / 10)));
const QUIET_S = env('BENCH_PEER_QUIET_S', 60);
const RUN_FOR = process.env.BENCH_PEER_RUN_FOR ?? '10s';
const POLL = process.env.BENCH_PEER_POLL ?? '5s';
const WINDOW = process.env.BENCH_PEER_IDLE_WINDOW ?? '10s';
/**
 * The client QPS of our cluster's kube-controller-manager and kube-scheduler
 * (their default is 20 and 50): at 20 the Job controller, which makes each
 * mirror's pod and writes its status, takes about 20 s to start a wave of
 * 100 mirrors and is what the phase would measure. 0 leaves the defaults.
 */
const KCM_QPS = env('BENCH_PEER_KCM_QPS', 400);
/** Node flags of the controller (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` for a profile written when it stops). */
const NODE_FLAGS = (process.env.BENCH_PEER_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const NS = 'lend';
const QUEUE = 'queue';
const WORK = 'work';
const POOL = { 'leasehold.dev/pool': 'lendable' };
const CLAIMED_BY = 'leasehold.dev/claimed-by';
const seconds = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1] ?? NaN);

async function must(cp: ControlPlane, args: string[], input?: string): Promise<string> {
  const res = await cp.kubectl(args, input);
  if (res.code !== 0) throw new Error(`kubectl ${args.join(' ')} on ${cp.info.clusterName}: ${res.stderr}${res.stdout}`);
  return res.stdout;
}
const apply = (cp: ControlPlane, obj: unknown) => must(cp, ['apply', '-f', '-'], JSON.stringify(obj));
const list = (items: unknown[]) => ({ apiVersion: 'v1', kind: 'List', items });

function job(name: string, namespace: string, runFor: string, spec: Record<string, unknown>, pod: Record<string, unknown> = {}) {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, ...(namespace === QUEUE ? { labels: { 'leasehold.dev/lendable': 'true' } } : {}) },
    spec: {
      backoffLimit: 0,
      ...spec,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image: 'registry.invalid/bench:1', env: [{ name: KWOK_RUN_FOR_ENV, value: runFor }], resources: { limits: { 'nvidia.com/gpu': '1' } } }],
          ...pod,
        },
      },
    },
  };
}

/** Starts an informer on `path` and calls `seen(obj, now)` for every add and update it delivers. */
async function follow<T extends k8s.KubernetesObject>(kc: k8s.KubeConfig, path: string, lister: () => Promise<k8s.KubernetesListObject<T>>, seen: (o: T, now: number) => void) {
  const inf = k8s.makeInformer<T>(kc, path, lister);
  const on = (o: T) => seen(o, Date.now());
  inf.on('add', on);
  inf.on('update', on);
  inf.on('error', () => setTimeout(() => void inf.start().catch(() => undefined), 1000));
  await inf.start();
  return inf;
}

/** leasehold_kube_requests_total by `client/verb`. */
async function requests(ctl: ControllerProcess): Promise<Map<string, number>> {
  const text = await (await fetch(ctl.metricsURL)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^leasehold_kube_requests_total\{client="([^"]*)",verb="([^"]*)"\} (\S+)$/gm)) out.set(`${m[1]}/${m[2]}`, Number(m[3]));
  return out;
}
const diff = (a: Map<string, number>, b: Map<string, number>) =>
  Object.fromEntries([...b].map(([k, v]) => [k, v - (a.get(k) ?? 0)]).filter(([, v]) => v !== 0).sort()) as Record<string, number>;
const sumWhere = (d: Record<string, number>, client: string, verbs: string[]) =>
  Object.entries(d).filter(([k]) => verbs.some((v) => k === `${client}/${v}`)).reduce((s, [, v]) => s + v, 0);
const WRITES = ['POST', 'PUT', 'PATCH', 'DELETE'];

/** apiserver_request_total on one API server, summed by read and write, for one group and resource. */
async function served(cp: ControlPlane, group: string, resource?: string) {
  const text = await must(cp, ['get', '--raw', '/metrics']);
  let reads = 0;
  let writes = 0;
  for (const m of text.matchAll(/^apiserver_request_total\{([^}]*)\} (\S+)$/gm)) {
    const l = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (l.group !== group || (resource && l.resource !== resource)) continue;
    if (['GET', 'LIST', 'WATCH'].includes(l.verb!)) reads += Number(m[2]);
    if (['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY'].includes(l.verb!)) writes += Number(m[2]);
  }
  return { reads, writes };
}

const dist = (xs: number[]) => (xs.length ? Object.fromEntries(Object.entries(quantiles(xs)).map(([k, v]) => [k, Number((v / 1000).toFixed(2))])) : {});
const ratio = (xs: number[], per: number) => (xs.length ? Object.fromEntries(Object.entries(quantiles(xs)).map(([k, v]) => [k, Number((v / per).toFixed(2))])) : {});

/** The PeerFleet's Events by reason, repeats included (a repeat is a PATCH of the Event's count). */
async function eventsByReason(cp: ControlPlane): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const e of JSON.parse(await must(cp, ['-n', NS, 'get', 'events', '-o', 'json'])).items) {
    if (e.involvedObject?.kind === 'PeerFleet') out[e.reason] = (out[e.reason] ?? 0) + (e.count ?? 1);
  }
  return out;
}

/** The paths (array indexes as `[i]`) where two JSON values differ. */
function changedPaths(a: unknown, b: unknown, at = ''): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].flatMap((k) => changedPaths((a as any)[k], (b as any)[k], Array.isArray(a) ? `${at}[${k}]` : at ? `${at}.${k}` : k));
  }
  return [at || '.'];
}

interface HostSeen { idleSince?: number; drainingAt?: number; lastState?: string }

export async function peerPhase(): Promise<void> {
  const pollMs = seconds(POLL) * 1000;
  const windowMs = seconds(WINDOW) * 1000;
  log(`peer: ${NODES} nodes x ${GPUS} GPU, ${JOBS} peer Jobs of ${RUN_FOR}, ${DRAINS} drains, pollInterval ${POLL}, idleWindow ${WINDOW}, our kube-controller-manager and scheduler at ${KCM_QPS || 'default'} QPS`);
  const [ours, peer] = await Promise.all([
    ControlPlane.start({
      name: 'bench-ours', controllers: true, scheduler: true, kwok: true,
      ...(KCM_QPS > 0 ? { componentArgs: {
        'kube-controller-manager': [`--kube-api-qps=${KCM_QPS}`, `--kube-api-burst=${2 * KCM_QPS}`, '--concurrent-job-syncs=20'],
        'kube-scheduler': [`--kube-api-qps=${KCM_QPS}`, `--kube-api-burst=${2 * KCM_QPS}`],
      } } : {}),
    }),
    ControlPlane.start({ name: 'bench-peer', controllers: true }),
  ]);
  const informers: Array<{ stop(): Promise<void> | void }> = [];
  let ctl: ControllerProcess | undefined;
  // A run stopped from outside (a timeout) takes its control planes and controller with it.
  const stopped = () => void Promise.allSettled([ctl?.stop(), ours.stop(), peer.stop()]).finally(() => process.exit(143));
  process.once('SIGTERM', stopped);
  try {
    await must(ours, ['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
    await must(ours, ['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
    const lender = await createPeerCredential(peer, { namespace: QUEUE });
    await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } });
    await apply(ours, defaultDenyEgress(NS));
    await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: WORK } });
    await apply(ours, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-token', namespace: NS }, stringData: { token: lender.token } });
    await apply(ours, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-ca', namespace: NS }, stringData: { 'ca.crt': await readFile(join(peer.info.dir, 'pki', 'ca.crt'), 'utf8') } });
    const nodeNames = Array.from({ length: NODES }, (_, i) => `gpu-${String(i).padStart(3, '0')}`);
    await createFakeNodes(ours.kubectl.bind(ours), nodeNames.map((name) => ({ name, gpus: GPUS, ...optedIn(NS, POOL) })), '300s');
    log(`peer: control planes up, ${NODES} KWOK nodes Ready`);
    await must(peer, ['create', '-f', '-'], JSON.stringify(list(Array.from({ length: JOBS }, (_, i) =>
      job(`p-${String(i).padStart(4, '0')}`, QUEUE, RUN_FOR, { managedBy: 'leasehold.dev/peer-lending', activeDeadlineSeconds: 3600 })))));

    // What the bench sees, each at the moment its watch delivers it.
    const jobs = new Map<string, PeerJobSeen>();
    const uidToName = new Map<string, string>();
    const hosts = new Map<string, HostSeen>();
    const ourPods = new Map<string, { node: string; created: number; running?: number; done?: number }>();
    let mirrorsLeft = 0;
    const [kcOurs, kcPeer] = [ours, peer].map((cp) => {
      const kc = new k8s.KubeConfig();
      kc.loadFromFile(cp.info.kubeconfig);
      return kc;
    }) as [k8s.KubeConfig, k8s.KubeConfig];
    const batchOurs = kcOurs.makeApiClient(k8s.BatchV1Api);
    const batchPeer = kcPeer.makeApiClient(k8s.BatchV1Api);
    const coreOurs = kcOurs.makeApiClient(k8s.CoreV1Api);
    informers.push(await follow<k8s.V1Job>(kcPeer, `/apis/batch/v1/namespaces/${QUEUE}/jobs`, () => batchPeer.listNamespacedJob({ namespace: QUEUE }), (j, now) => {
      const s = jobs.get(j.metadata!.name!) ?? {};
      uidToName.set(j.metadata!.uid!, j.metadata!.name!);
      const by = j.metadata?.annotations?.[CLAIMED_BY];
      if (by && s.claimed === undefined) Object.assign(s, { claimed: now, node: by.split('/').pop() });
      if ((j.status?.startTime || (j.status?.active ?? 0) > 0) && s.running === undefined) s.running = now;
      if (j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') && s.complete === undefined) s.complete = now;
      if (j.status?.startTime) s.startTime = new Date(j.status.startTime).getTime();
      if (j.status?.completionTime) s.completionTime = new Date(j.status.completionTime).getTime();
      jobs.set(j.metadata!.name!, s);
    }));
    const mirrorInf = await follow<k8s.V1Job>(kcOurs, `/apis/batch/v1/namespaces/${NS}/jobs`, () => batchOurs.listNamespacedJob({ namespace: NS }), (m, now) => {
      const name = uidToName.get(m.metadata?.labels?.[PEER_JOB_UID_LABEL] ?? '');
      const s = name === undefined ? undefined : jobs.get(name);
      if (!s) return;
      s.mirrorCreated ??= now;
      if ((m.status?.active ?? 0) > 0) s.mirrorActive ??= now;
      if (m.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True')) s.mirrorDone ??= now;
    });
    informers.push(mirrorInf);
    // The mirrors' pods: when each was made, ran and ended, for the node's cycle in parts.
    informers.push(await follow<k8s.V1Pod>(kcOurs, `/api/v1/namespaces/${NS}/pods`, () => coreOurs.listNamespacedPod({ namespace: NS }), (p, now) => {
      const name = uidToName.get(p.metadata?.labels?.[PEER_JOB_UID_LABEL] ?? '');
      const s = name === undefined ? undefined : jobs.get(name);
      if (!s) return;
      s.podCreated ??= now;
      if (p.status?.phase === 'Running') s.podRunning ??= now;
      if (p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') s.podDone ??= now;
    }));
    const custom = kcOurs.makeApiClient(k8s.CustomObjectsApi);
    let fleetStatus: any;
    // In the quiet window: how often the PeerFleet's status and our Nodes changed, and which status fields did.
    const quiet = { on: false, statusUpdates: 0, nodeUpdates: 0, changed: new Set<string>() };
    informers.push(await follow<any>(kcOurs, `/apis/leasehold.dev/v1alpha1/namespaces/${NS}/peerfleets`,
      () => custom.listNamespacedCustomObject({ group: 'leasehold.dev', version: 'v1alpha1', namespace: NS, plural: 'peerfleets' }) as any, (f, now) => {
        if (quiet.on) {
          quiet.statusUpdates++;
          for (const path of changedPaths(fleetStatus, f.status)) quiet.changed.add(path);
        }
        fleetStatus = f.status;
        for (const h of f.status?.hosts ?? []) {
          const s = hosts.get(h.node) ?? {};
          // The idle start of the node's first session: the value the controller counts its window from.
          if (s.idleSince === undefined && h.idleSince && (h.state === 'Waiting' || h.state === 'Available')) s.idleSince = Date.parse(h.idleSince);
          if (h.state === 'Draining' && s.drainingAt === undefined && ourPods.size > 0) s.drainingAt = now;
          s.lastState = h.state;
          hosts.set(h.node, s);
        }
      }));
    const core = kcOurs.makeApiClient(k8s.CoreV1Api);
    informers.push(await follow<k8s.V1Pod>(kcOurs, `/api/v1/namespaces/${WORK}/pods`, () => core.listNamespacedPod({ namespace: WORK }), (p, now) => {
      const node = p.spec?.nodeSelector?.['kubernetes.io/hostname'] ?? '';
      const s = ourPods.get(p.metadata!.name!) ?? { node, created: now };
      if (p.status?.phase === 'Running' && s.running === undefined) s.running = now;
      if ((p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') && s.done === undefined) s.done = now;
      ourPods.set(p.metadata!.name!, s);
    }));

    informers.push(await follow<k8s.V1Node>(kcOurs, '/api/v1/nodes', () => core.listNode(), () => {
      if (quiet.on) quiet.nodeUpdates++;
    }));

    ctl = await startController(ours.info.kubeconfig, ['--no-leader-elect', '--namespace', 'default', '--allowed-peer-origins', peer.info.server], { LEASEHOLD_LOG_LEVEL: 'info' }, { nodeFlags: NODE_FLAGS });
    await sleep(2000);
    // Only the controller writes PeerFleets: our API server's count of them is its status writes.
    const [w0, s0] = await Promise.all([requests(ctl), served(ours, 'leasehold.dev', 'peerfleets')]);
    const t0 = Date.now();
    await apply(ours, {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'PeerFleet',
      metadata: { name: 'bench', namespace: NS },
      spec: {
        origin: peer.info.server, namespace: QUEUE, credentialSecretRef: { name: 'peer-token' }, caSecretRef: { name: 'peer-ca' },
        lendableNodes: { matchLabels: POOL }, pricePerGPUHour: 2, idleWindow: WINDOW, pollInterval: POLL,
      },
    });
    const done = () => [...jobs.values()].filter((j) => j.complete !== undefined).length;

    // Drains: once a third of the queue is done, our own work arrives for nodes that lend.
    await waitUntil(`${Math.ceil(JOBS / 3)} peer Jobs complete`, async () => done() >= Math.ceil(JOBS / 3), 60 * 60_000, 200);
    // The nodes whose mirror started last, by our side's record: the PeerFleet status and the peer
    // lag behind the controller's effects, and a node whose Job has ended would take our pod at once.
    const drained = mirrorInf.list()
      .filter((m) => (m.status?.active ?? 0) > 0 && !m.status?.succeeded && m.status?.startTime)
      .sort((a, b) => new Date(b.status!.startTime!).getTime() - new Date(a.status!.startTime!).getTime())
      .map((m) => m.metadata?.labels?.[NODE_LABEL] ?? '')
      .filter((n, i, all) => n && all.indexOf(n) === i)
      .slice(0, DRAINS);
    if (drained.length > 0) {
      await must(ours, ['create', '-f', '-'], JSON.stringify(list(drained.map((node) =>
        job(`ours-${node}`, WORK, '2s', {}, { nodeSelector: { ...POOL, 'kubernetes.io/hostname': node } })))));
    }
    log(`peer: our Jobs created for ${drained.length} lending nodes at ${done()} peer Jobs complete`);

    await waitUntil(`${JOBS} peer Jobs complete`, async () => done() === JOBS, 60 * 60_000, 500);
    const tDone = Date.now();
    await waitUntil('every mirror deleted and our work done', async () => {
      mirrorsLeft = mirrorInf.list().length;
      return mirrorsLeft === 0 && [...ourPods.values()].filter((p) => p.done).length >= drained.length;
    }, 10 * 60_000, 500);
    const [w1, s1] = await Promise.all([requests(ctl), served(ours, 'leasehold.dev', 'peerfleets')]);
    const busy = diff(w0, w1);
    const all = [...jobs.values()];
    const firstClaim = Math.min(...all.map((j) => j.claimed ?? Infinity));
    const lastComplete = Math.max(...all.map((j) => j.complete ?? 0));
    const spanMs = lastComplete - firstClaim;
    const runS = seconds(RUN_FOR);

    // 1. Claim latency: a node's first claim, from the end of its idle window to its peer Job seen Running.
    const firstRun = new Map<string, number>();
    for (const j of all) if (j.node && j.running !== undefined && j.running < (firstRun.get(j.node) ?? Infinity)) firstRun.set(j.node, j.running);
    const claimLatency = [...firstRun].filter(([n]) => hosts.get(n)?.idleSince !== undefined).map(([n, t]) => t - hosts.get(n)!.idleSince! - windowMs);
    // Between two peer Jobs on one node, and each node's cycle while the queue had work.
    const { gaps, parts, cycles, cycleParts } = nodeTimeline(all, [...ourPods.values()]);
    // How late the peer learns: seen Running − startTime, seen Complete − completionTime (whole seconds, so up to 1 s more).
    const startLag = all.filter((j) => j.running !== undefined && j.startTime !== undefined).map((j) => j.running! - j.startTime!);
    const endLag = all.filter((j) => j.complete !== undefined && j.completionTime !== undefined).map((j) => j.complete! - j.completionTime!);
    // 2. Drain reaction: our pod seen → its node Draining in status; claims on that node after our pod came, before it ran.
    const drains = drained.map((node) => {
      const pod = [...ourPods.values()].find((p) => p.node === node);
      const h = hosts.get(node);
      const until = pod?.running ?? pod?.done ?? Infinity;
      const late = all.filter((j) => j.node === node && pod && j.claimed! > pod.created && j.claimed! < until).length;
      return { node, reaction: pod && h?.drainingAt ? h.drainingAt - pod.created : undefined, late, wait: pod?.running !== undefined ? pod.running - pod.created : undefined };
    });
    const reactions = drains.map((d) => d.reaction).filter((x): x is number => x !== undefined);
    // 3. Writes per peer Job against the floor: peer (claim, status Running, status finished, the host
    //    and exit-code annotations in those two status PATCHes) and ours (mirror create, mirror delete).
    const floor = { peer: 3 * JOBS, controller: 2 * JOBS };
    const actual = { peer: sumWhere(busy, 'peer', WRITES), controller: sumWhere(busy, 'controller', WRITES) };
    const metric = async (name: string, labels: Record<string, string> = {}) => ctl!.metric(name, labels);
    results.peer = {
      nodes: NODES, gpusPerNode: GPUS, peerJobs: JOBS, runFor: RUN_FOR, pollInterval: POLL, idleWindow: WINDOW, kubeControllerManagerQPS: KCM_QPS || 'default',
      claimLatency: { samples: claimLatency.length, seconds: dist(claimLatency), perPollInterval: ratio(claimLatency, pollMs) },
      gapBetweenPeerJobsOnANode: { samples: gaps.length, seconds: dist(gaps), perPollInterval: ratio(gaps, pollMs), partsSeconds: Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, dist(v)])) },
      writeBackLagSeconds: { running: dist(startLag), complete: dist(endLag) },
      drain: {
        nodes: drained.length,
        reacted: reactions.length,
        reactionSeconds: dist(reactions),
        perPollInterval: ratio(reactions, pollMs),
        claimsAfterOurPod: drains.reduce((s, d) => s + d.late, 0),
        ourPodWaitSeconds: dist(drains.map((d) => d.wait).filter((x): x is number => x !== undefined)),
      },
      throughput: {
        firstClaimToLastCompleteSeconds: spanMs / 1000,
        jobsPerMinute: Number(((JOBS * 60_000) / spanMs).toFixed(1)),
        capacityJobsPerMinute: Number(((NODES * GPUS * 60) / runS).toFixed(1)),
        overCapacity: Number(((JOBS * 60_000) / spanMs / ((NODES * GPUS * 60) / runS)).toFixed(3)),
        fleetCreateToAllDoneSeconds: (tDone - t0) / 1000,
        // A lent node's claim → its next claim while the queue had work, no pod of ours between.
        nodeCycleSeconds: { samples: cycles.length, ...dist(cycles), parts: Object.fromEntries(Object.entries(cycleParts).map(([k, v]) => [k, dist(v)])) },
        busyShare: busyShare(cycles, runS * 1000),
      },
      writes: {
        byClientAndVerb: busy,
        floor,
        actual,
        actualOverFloor: { peer: Number((actual.peer / floor.peer).toFixed(2)), controller: Number((actual.controller / floor.controller).toFixed(2)) },
        perPeerJob: { peer: Number((actual.peer / JOBS).toFixed(2)), controller: Number((actual.controller / JOBS).toFixed(2)) },
        peerFleetStatusWrites: s1.writes - s0.writes,
        writebacks: await metric('leasehold_peerfleet_writebacks_total'),
        claims: { claimed: await metric('leasehold_peerfleet_claims_total', { outcome: 'claimed' }), conflict: await metric('leasehold_peerfleet_claims_total', { outcome: 'conflict' }) },
        // One list at the end: what the Events among our side's writes were for.
        eventsByReason: await eventsByReason(ours),
        eventsAndStatusNote: 'controller writes also include PeerFleet status writes, Events and holder Leases, which the floor leaves out',
      },
    };
    log(`peer: ${JSON.stringify(results.peer)}`);

    // 4. Quiet: every node idle and the queue empty; reads of the peer and writes on both sides.
    await waitUntil('every node Available', async () => (fleetStatus?.hosts ?? []).every((h: any) => h.state === 'Available'), 10 * 60_000, 500);
    await sleep(5000 + pollMs);
    const q0 = { c: await requests(ctl), p: await served(peer, 'batch', 'jobs'), o: await served(ours, 'leasehold.dev'), oj: await served(ours, 'batch', 'jobs') };
    quiet.on = true;
    await sleep(QUIET_S * 1000);
    quiet.on = false;
    const q1 = { c: await requests(ctl), p: await served(peer, 'batch', 'jobs'), o: await served(ours, 'leasehold.dev'), oj: await served(ours, 'batch', 'jobs') };
    const q = diff(q0.c, q1.c);
    const perMin = (d: number) => Number(((d * 60) / QUIET_S).toFixed(1));
    const peerReads = perMin(sumWhere(q, 'peer', ['GET']));
    results.peerQuiet = {
      nodes: NODES,
      windowSeconds: QUIET_S,
      controllerRequests: q,
      peerReadsPerMin: peerReads,
      pollsPerMin: Number((60_000 / pollMs).toFixed(1)),
      peerReadsPerPoll: Number((peerReads / (60_000 / pollMs)).toFixed(2)),
      peerWritesPerMin: perMin(sumWhere(q, 'peer', WRITES)),
      ourWritesPerMin: perMin(sumWhere(q, 'controller', WRITES)),
      ourReadsPerMin: perMin(sumWhere(q, 'controller', ['GET'])),
      peerAPIServerJobsPerMin: { reads: perMin(q1.p.reads - q0.p.reads), writes: perMin(q1.p.writes - q0.p.writes) },
      ourAPIServerLeaseholdPerMin: { reads: perMin(q1.o.reads - q0.o.reads), writes: perMin(q1.o.writes - q0.o.writes) },
      ourAPIServerJobsPerMin: { reads: perMin(q1.oj.reads - q0.oj.reads), writes: perMin(q1.oj.writes - q0.oj.writes) },
      peerFleetStatusUpdatesPerMin: perMin(quiet.statusUpdates),
      statusFieldsChanged: [...quiet.changed].sort().slice(0, 20),
      ourNodeUpdatesPerMin: perMin(quiet.nodeUpdates),
    };
    log(`peer: quiet ${JSON.stringify(results.peerQuiet)}`);
    log(`peer: done in ${ms(Date.now() - t0)} after the PeerFleet was created`);
  } finally {
    process.off('SIGTERM', stopped);
    for (const i of informers) await i.stop();
    await ctl?.stop();
    await Promise.all([ours.stop(), peer.stop()]);
  }
}
