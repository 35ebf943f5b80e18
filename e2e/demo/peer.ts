// `make demo-peer`: PeerFleet lending between two clusters on this one machine, with no network.
//
// Ours: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK
// playing the kubelet of three fake GPU nodes (2 GPUs each), with the real
// controller. The peer: etcd, kube-apiserver, kube-controller-manager, and a
// queue of Jobs left to us by spec.managedBy, reached with a token that may
// only read and patch them. The PeerFleet turns Ready, its nodes wait out the
// idle window, five peer Jobs run on them, then our own Job arrives: the node
// it wants drains, the peer Job there finishes, ours runs after it. Last, the
// accounting beside the sum of the peer's own records.
//
// SIGINT or SIGTERM at any point stops the controller and both control planes
// and removes the demo directory.
//
//   node --import tsx e2e/demo/peer.ts [--log-level debug] [--keep-dir]
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { ControlPlane } from '../cluster/controlplane.js';
import { createFakeNodes } from '../cluster/kwok.js';
import { createPeerCredential } from '../cluster/peer.js';
import { fleetManifest, lendingNamespace, optedIn, ourJob as ourGPUJob, peerJob as lendableJob, QUEUE } from '../support/lending.js';
import { PEER_JOB_UID_LABEL, PEERFLEET_LABEL } from '../../controllers/peerfleet/labels.js';
import { CLAIMED_BY_ANNOTATION } from '../../src/providers/peerqueue/types.js';
import { ObjectWatch, type Obj } from './objects.js';
import { block, say, seconds, started } from './output.js';
import { alive, DemoSession, stopChild, type Attempt, type KubectlTarget } from './session.js';

const NS = 'lend';
const FLEET = 'gpu-lending';
const WORK = 'work';
const POOL = { 'leasehold.dev/pool': 'lendable' };
const NODES = ['gpu-1', 'gpu-2', 'gpu-3'];
const PRICE = 2.5;
/** The peer's queue: name, GPUs, run time. 6 GPUs in all, the room of our three nodes. */
const PEER_JOBS: Array<[string, number, number]> = [
  ['peer-1', 2, 40],
  ['peer-2', 1, 20],
  ['peer-3', 1, 30],
  ['peer-4', 1, 25],
  ['peer-5', 1, 35],
];
const OUR_JOB = 'train';

const { values: flags } = parseArgs({
  options: {
    'log-level': { type: 'string', default: process.env.DEMO_LOG_LEVEL || 'info' },
    'keep-dir': { type: 'boolean', default: process.env.DEMO_KEEP_DIR === '1' },
  },
  strict: true,
});

// ---- what has to be undone --------------------------------------------------

const demo = new DemoSession({ keepDir: flags['keep-dir']!, keptFiles: 'controller.log, ours/*.log, peer/*.log' });
let planesStarting: Promise<PromiseSettledResult<ControlPlane>[]> | undefined;
const watches: ObjectWatch[] = [];

async function teardown(attempt: Attempt): Promise<void> {
  await attempt('stopping the watches', async () => {
    for (const w of watches) await stopChild(w.process, 2_000);
    await demo.stopRunning();
  });
  if (alive(demo.controller)) say('stopping the controller');
  await attempt('stopping the controller', () => stopChild(demo.controller, 10_000));
  // A control plane still starting is stopped once it is up (one that failed stopped itself).
  const planes = ((await planesStarting) ?? []).flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  if (planes.length) say('stopping both control planes');
  await attempt('stopping the control planes', () => Promise.all(planes.map((cp) => cp.stop(true))));
}

// ---- what the demo shows ----------------------------------------------------

const nodeOf = (job: Obj): string | undefined => job.metadata?.annotations?.[CLAIMED_BY_ANNOTATION]?.split('/').pop();
const isTrue = (obj: Obj, type: string) => (obj.status?.conditions ?? []).some((c: Obj) => c.type === type && c.status === 'True');
const gpusOf = (job: Obj) => Number(job.spec?.template?.spec?.containers?.[0]?.resources?.limits?.['nvidia.com/gpu'] ?? 0);
const ranFor = (job: Obj) => (Date.parse(job.status.completionTime) - Date.parse(job.status.startTime)) / 1000;

/** The PeerFleet's verdict and each host's state, as they change. */
function narrateFleet(fleet: Obj, previous: Obj | undefined): void {
  const verdict = fleet.status?.verdict;
  if (verdict?.code && verdict.code !== previous?.status?.verdict?.code) {
    say(`PeerFleet ${NS}/${FLEET}: verdict ${verdict.code}${verdict.reasons?.length ? ` (${verdict.reasons.join('; ')})` : ''}`);
  }
  const before = new Map<string, Obj>((previous?.status?.hosts ?? []).map((h: Obj) => [h.node, h]));
  for (const host of fleet.status?.hosts ?? []) {
    const was = before.get(host.node);
    if (was?.state === host.state && was?.session?.job === host.session?.job) continue;
    const why = host.session?.drainReason ?? host.message ?? host.reason ?? '';
    say(`host ${host.node}: ${was?.state && was.state !== host.state ? `${was.state} -> ` : ''}${host.state}${why ? ` (${why})` : ''}`);
  }
}

const seenEvents = new Set<string>();
/** The controller's events on the PeerFleet: claims, drains, sessions. */
function narrateEvent(event: Obj): void {
  if (seenEvents.has(event.metadata.uid)) return;
  seenEvents.add(event.metadata.uid);
  say(`  event ${event.type} ${event.reason}: ${event.message}`);
}

/** Each peer Job as the peer sees it: queued, claimed, running, complete. */
function narratePeerJob(job: Obj, previous: Obj | undefined): void {
  const name = job.metadata.name;
  if (!previous) say(`peer: Job ${name} queued (${gpusOf(job)} GPU)`);
  const claim = job.metadata.annotations?.[CLAIMED_BY_ANNOTATION];
  if (claim && claim !== previous?.metadata?.annotations?.[CLAIMED_BY_ANNOTATION]) say(`peer: Job ${name} claimed by ${claim}`);
  if (job.status?.startTime && !previous?.status?.startTime) say(`peer: Job ${name} running on our node ${nodeOf(job)}`);
  if (isTrue(job, 'Complete') && !(previous && isTrue(previous, 'Complete'))) say(`peer: Job ${name} Complete after ${ranFor(job)}s on ${nodeOf(job)}`);
  if (isTrue(job, 'Failed') && !(previous && isTrue(previous, 'Failed'))) say(`peer: Job ${name} FAILED`);
}

/** Our own Job's pod: scheduled, running, done. */
function narrateOurPod(pod: Obj, previous: Obj | undefined): void {
  const phase = pod.status?.phase;
  const node = pod.spec?.nodeName;
  if (phase === previous?.status?.phase && node === previous?.spec?.nodeName) return;
  say(`ours: pod ${pod.metadata.name} ${phase}${node ? ` on ${node}` : ' (not scheduled yet: the node has no free GPU)'}`);
}

// ---- the manifests ----------------------------------------------------------

const peerJob = (name: string, gpus: number, runFor: number) => lendableJob(name, { runFor: `${runFor}s`, gpus, container: { name: 'train', image: 'registry.invalid/peer-train:1' } });

/** Our own 2-GPU work, on one node of the pool. */
const ourJob = (node: string) => ourGPUJob(OUR_JOB, WORK, { ...POOL, 'kubernetes.io/hostname': node }, {
  runFor: '10s',
  gpus: 2,
  container: { name: 'train', image: 'registry.invalid/our-train:1' },
});

// ---- the demo ----------------------------------------------------------------

async function main(): Promise<void> {
  const root = await demo.makeRoot('leasehold-demo-peer-');

  // 1. Two clusters.
  say('starting our cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and the peer (etcd, kube-apiserver, kube-controller-manager)');
  planesStarting = Promise.allSettled([
    ControlPlane.start({ dir: join(root, 'ours'), name: 'ours', controllers: true, scheduler: true, kwok: true }),
    ControlPlane.start({ dir: join(root, 'peer'), name: 'peer', controllers: true }),
  ]);
  const settled = await planesStarting;
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  demo.check();
  const [ours, peer] = settled.map((s) => (s as PromiseFulfilledResult<ControlPlane>).value) as [ControlPlane, ControlPlane];
  const o: KubectlTarget = ours.info;
  const p: KubectlTarget = peer.info;
  const oursK = (args: string[], input?: string) => demo.mustKubectl(o, args, input);
  const peerK = (args: string[], input?: string) => demo.mustKubectl(p, args, input);
  const apply = (k: typeof oursK, obj: Obj) => k(['apply', '-f', '-'], JSON.stringify(obj));
  say(`both ready in ${seconds(Date.now() - started)}; to look around from another terminal:`);
  block(`export PATH=${ours.info.binDir}:$PATH\nkubectl --kubeconfig ${ours.info.kubeconfig} -n ${NS} get peerfleets\nkubectl --kubeconfig ${peer.info.kubeconfig} -n ${QUEUE} get jobs`);

  // 2. CRDs, the peer's credential, our namespaces.
  await demo.installCRDs(o);
  const lender = await createPeerCredential(peer, { namespace: QUEUE });
  say(`peer: ServiceAccount ${QUEUE}/${lender.serviceAccount} may only get/list/watch/patch Jobs in ${QUEUE}; its token goes into Secret ${NS}/peer-token`);
  // The mirror Jobs of peer work run in this namespace, under the restricted Pod Security Standard.
  await lendingNamespace({ ours, peer, lender }, NS);
  for (const name of [WORK, 'leasehold-system']) await apply(oursK, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });

  // 3. Three fake GPU nodes, played by KWOK.
  demo.check();
  const opted = optedIn(NS, POOL);
  await createFakeNodes((args, input) => demo.kubectl(o, args, input), NODES.map((name) => ({ name, gpus: 2, ...opted })));
  const pairs = (m: Record<string, string>) => Object.entries(m).map(([k, v]) => `${k}=${v}`).join(',');
  say(`nodes ${NODES.join(', ')} Ready (KWOK), 2 nvidia.com/gpu each, labelled ${pairs(opted.labels)}, annotated ${pairs(opted.annotations)}`);

  // 4. The controller.
  const leaderNS = 'leasehold-system';
  await demo.startController(ours.info.kubeconfig, ['--namespace', leaderNS, '--leader-election-namespace', leaderNS, '--watch-namespace', NS, '--log-level', flags['log-level']!, '--allowed-peer-origins', peer.info.server]);

  // 5. Watch everything the demo tells of, then the PeerFleet.
  const watch = (target: KubectlTarget, args: string[], onChange: (obj: Obj, previous: Obj | undefined) => void) => {
    const w = new ObjectWatch(target, args, onChange, () => demo.isStopping());
    watches.push(w);
    w.start();
    return w;
  };
  const fleetWatch = watch(o, ['-n', NS, 'peerfleets.leasehold.dev', '--field-selector', `metadata.name=${FLEET}`], narrateFleet);
  watch(o, ['-n', NS, 'events', '--field-selector', `involvedObject.name=${FLEET}`], narrateEvent);
  const peerJobs = watch(p, ['-n', QUEUE, 'jobs'], narratePeerJob);
  const ourPods = watch(o, ['-n', WORK, 'pods'], narrateOurPod);
  // The mirror pods of peer work: a pod deleted while it still ran would be a peer Job cut off.
  const cutOff = new Set<string>();
  const mirrorPods = watch(o, ['-n', NS, 'pods', '-l', PEERFLEET_LABEL], (pod) => {
    if (pod.metadata.deletionTimestamp && pod.status?.phase === 'Running') cutOff.add(pod.metadata.name);
  });
  const mirrorPod = (peerJobUID: string) => [...mirrorPods.objects.values()].find((pod) => pod.metadata.labels?.[PEER_JOB_UID_LABEL] === peerJobUID);
  const fleet = fleetManifest(peer, FLEET, NS, { lendableNodes: { matchLabels: POOL }, pricePerGPUHour: PRICE, idleWindow: '5s', pollInterval: '5s' });
  say('applying the PeerFleet:');
  block(stringify(fleet, { lineWidth: 0 }));
  await apply(oursK, fleet);
  const hosts = () => (fleetWatch.objects.get(`${NS}/${FLEET}`)?.status?.hosts ?? []) as Obj[];
  const everyHost = (state: string) => hosts().length === NODES.length && hosts().every((h) => h.state === state);
  await fleetWatch.until('verdict Ready', () => fleetWatch.objects.get(`${NS}/${FLEET}`)?.status?.verdict?.ready === true, 60_000);
  await fleetWatch.until('every node Available', () => everyHost('Available'), 60_000);
  say('every node is idle past the idle window and the peer queue is empty: Available');

  // 6. The peer queues five Jobs; they run on our idle nodes.
  const tQueued = Date.now();
  await apply(peerK, { apiVersion: 'v1', kind: 'List', items: PEER_JOBS.map(([name, gpus, runFor]) => peerJob(name, gpus, runFor)) });
  const peerJob$ = (name: string) => peerJobs.objects.get(`${QUEUE}/${name}`);
  await peerJobs.until('every peer Job running', () => PEER_JOBS.every(([name]) => peerJob$(name)?.status?.startTime), 120_000);
  say(`all ${PEER_JOBS.length} peer Jobs run on our nodes, ${seconds(Date.now() - tQueued)} after they were queued; the peer's own view:`);
  const peerView = () => peerK(['-n', QUEUE, 'get', 'jobs', '-o',
    'custom-columns=NAME:.metadata.name,CLAIMED-BY:.metadata.annotations.leasehold\\.dev/claimed-by,HOST:.metadata.annotations.leasehold\\.dev/host,START:.status.startTime,COMPLETION:.status.completionTime,SUCCEEDED:.status.succeeded']);
  block(await peerView());

  // 7. Our own Job arrives and wants the node whose peer work ends first.
  const endsAt = (name: string) => Date.parse(peerJob$(name)!.status.startTime) + PEER_JOBS.find(([n]) => n === name)![2] * 1000;
  const target = NODES.map((node) => {
    const there = PEER_JOBS.map(([name]) => name).filter((name) => nodeOf(peerJob$(name)!) === node);
    return { node, there, end: Math.max(...there.map(endsAt)) };
  }).filter((n) => n.there.length).sort((a, b) => a.end - b.end)[0]!;
  say(`our own 2-GPU Job ${WORK}/${OUR_JOB} arrives, pinned to ${target.node} (where peer ${target.there.join(', ')} run${target.there.length === 1 ? 's' : ''})`);
  await apply(oursK, ourJob(target.node));
  const draining = await fleetWatch.until(`${target.node} Draining`, () => hosts().find((h) => h.node === target.node && h.state === 'Draining'), 60_000);
  say(`${target.node} drains (status.hosts[].session.drainReason: ${draining.session?.drainReason ?? draining.message}): it claims nothing more, and the peer Jobs there run to their end`);
  const ourPod = await ourPods.until('our pod Running', () => [...ourPods.objects.values()].find((pod) => pod.status?.phase === 'Running'), 120_000);
  // The mirror ends in our cluster before its record reaches the peer: wait for the peer's own word.
  await peerJobs.until(`peer ${target.there.join(', ')} Complete`, () => target.there.every((name) => isTrue(peerJob$(name) ?? {}, 'Complete')), 60_000);
  for (const name of target.there) {
    if (peerJob$(name)!.status.succeeded !== 1) throw new Error(`peer Job ${name} on ${target.node} did not succeed`);
  }
  // The peer's completionTime is its Job controller's mark, a moment after the pod ended: the mirror pods tell when the work ended here.
  const ended = target.there.map((name) => {
    const pod = mirrorPod(peerJob$(name)!.metadata.uid);
    const finishedAt = pod?.status?.containerStatuses?.[0]?.state?.terminated?.finishedAt;
    if (pod?.status?.phase !== 'Succeeded' || !finishedAt) throw new Error(`the mirror pod of peer Job ${name} did not succeed on ${target.node}`);
    return { name, finishedAt, ran: (Date.parse(finishedAt) - Date.parse(pod.status.startTime)) / 1000 };
  });
  const lastEnd = Math.max(...ended.map((e) => Date.parse(e.finishedAt)));
  if (Date.parse(ourPod.status.startTime) < lastEnd) throw new Error(`our pod started at ${ourPod.status.startTime}, before the peer work on ${target.node} ended`);
  say(`the peer Jobs on ${target.node} ran to their end, never cut off: ${ended.map((e) => `${e.name} ran ${e.ran}s, ended ${e.finishedAt}`).join('; ')}`);
  say(`our pod started on ${target.node} at ${ourPod.status.startTime}, after them (the peer's records say Complete a moment later: ${target.there.map((n) => `${n} ${peerJob$(n)!.status.completionTime}`).join(', ')})`);
  await ourPods.until('our pod Succeeded', () => [...ourPods.objects.values()].find((pod) => pod.status?.phase === 'Succeeded'), 120_000);

  // 8. Every peer Job done; the accounting beside the peer's own records.
  await peerJobs.until('every peer Job Complete', () => PEER_JOBS.every(([name]) => isTrue(peerJob$(name) ?? {}, 'Complete')), 180_000);
  const records = PEER_JOBS.map(([name]) => peerJob$(name)!);
  const failedJobs = records.filter((j) => j.status.succeeded !== 1 || j.status.failed);
  if (failedJobs.length) throw new Error(`peer Jobs not succeeded once: ${failedJobs.map((j) => j.metadata.name).join(', ')}`);
  if (cutOff.size) throw new Error(`mirror pods deleted while they ran: ${[...cutOff].join(', ')}`);
  // The buying side's sum: (completionTime - startTime) x GPUs, over the peer's own records.
  const gpuSecondsOn = (node?: string) => records.filter((j) => !node || nodeOf(j) === node).reduce((s, j) => s + ranFor(j) * gpusOf(j), 0);
  const sum = gpuSecondsOn();
  const settledFleet = await fleetWatch.until('the accounting of every peer Job', () => {
    const f = fleetWatch.objects.get(`${NS}/${FLEET}`);
    return f?.status?.accounting?.jobs === PEER_JOBS.length ? f : undefined;
  }, 60_000);
  say("every peer Job Complete; the peer's own view:");
  block(await peerView());
  const acc = settledFleet.status.accounting;
  const usd = (gpuSeconds: number) => `$${(Math.round((gpuSeconds * PRICE * 1e6) / 3600) / 1e6).toFixed(6)}`;
  const rows = [
    { what: 'status.accounting', ours: acc as Obj | undefined, fromPeer: sum },
    ...settledFleet.status.hosts.map((h: Obj) => ({ what: `  ${h.node} lent`, ours: h.lent as Obj | undefined, fromPeer: gpuSecondsOn(h.node) })),
  ];
  const line = ({ what, ours: a, fromPeer }: (typeof rows)[number]) =>
    `${what.padEnd(20)} ${String(a?.jobs ?? 0).padStart(4)} ${String(a?.gpuSeconds ?? 0).padStart(11)} ${`$${(a?.amountUSD ?? 0).toFixed(6)}`.padStart(11)}   ${String(fromPeer).padStart(11)} ${usd(fromPeer).padStart(11)}`;
  say(`accounting at $${PRICE.toFixed(2)}/GPU-hour: the PeerFleet's status beside the sum over the peer's Job records`);
  block([
    `${''.padEnd(20)} ${'jobs'.padStart(4)} ${'GPU-seconds'.padStart(11)} ${'amount'.padStart(11)}   ${'peer: GPU-s'.padStart(11)} ${'amount'.padStart(11)}`,
    ...rows.map(line),
    `unmeasured: ${acc.unmeasured ?? 0}`,
  ].join('\n'));
  const off = rows.filter((r) => (r.ours?.gpuSeconds ?? 0) !== r.fromPeer).map((r) => r.what.trim());
  if (off.length) throw new Error(`the accounting differs from the peer records: ${off.join(', ')}`);
  say('the accounting equals the sum of the peer records, to the second, in all and per host');
  await fleetWatch.until('every node Available again', () => everyHost('Available'), 60_000);
  say('our Job is done and the peer queue is empty: every node is Available again');
  block(await oursK(['-n', NS, 'get', 'peerfleets']));
  say(`whole demo: ${seconds(Date.now() - started)}`);
}

demo.run(main, teardown);
