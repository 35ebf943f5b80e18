// The pass phase: one PeerFleet lending pass (controllers/peerfleet/policy/
// lending.ts, a pure function) timed in this process at growing node
// counts, no cluster. Every node lends one GPU, runs a peer Job and has the
// next one set aside; four times as many Jobs as nodes are in the queue.
// This is the steady state of a large fleet, where each pass asks every
// busy node what it would claim: the cost per node must stay flat.
import type { V1Job, V1Node, V1Pod } from '@kubernetes/client-node';
import type { PeerFleet } from '../src/api/index.js';
import { lendingPass, type FleetWorld, type PeerHost } from '../controllers/peerfleet/policy/lending.js';
import { log, results } from './support.js';

const SIZES = (process.env.BENCH_PASS_NODES ?? '250,500,1000,2000,4000').split(',').map(Number);
const REPEATS = 5;
const uid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const STARTED = '2026-12-03T09:00:00Z';
const GPU = { limits: { 'nvidia.com/gpu': '1' } };

function steadyWorld(nodes: number): FleetWorld {
  const labels = (i: number) => ({ 'leasehold.dev/peerfleet': 'fleet', 'leasehold.dev/node': `gpu-${i}`, 'leasehold.dev/peer-job-uid': uid(i) });
  const world = { nodes: [] as V1Node[], pods: [] as V1Pod[], mirrors: [] as V1Job[], hosts: [] as PeerHost[], jobs: [] as V1Job[] };
  for (let i = 0; i < nodes; i++) {
    world.nodes.push({ metadata: { name: `gpu-${i}`, labels: { pool: 'gpu' } }, status: { allocatable: { cpu: '32', memory: '256Gi', pods: '110', 'nvidia.com/gpu': '1' } } });
    const owner = { apiVersion: 'batch/v1', kind: 'Job', name: `lh-peer-${uid(i)}`, uid: uid(20_000_000 + i), controller: true };
    world.mirrors.push({ metadata: { name: owner.name, namespace: 'lend', uid: owner.uid, labels: labels(i) }, spec: { template: { spec: { containers: [{ name: 'c', image: 'i', resources: GPU }] } } }, status: { active: 1 } });
    world.pods.push({ metadata: { name: `p-${i}`, namespace: 'lend', labels: labels(i), ownerReferences: [owner] }, spec: { nodeName: `gpu-${i}`, containers: [{ name: 'c', image: 'i', resources: GPU }] }, status: { phase: 'Running' } });
    world.hosts.push({ node: `gpu-${i}`, state: 'Lending', since: STARTED, session: { job: `job-${i}`, startedAt: STARTED, claims: [uid(i), uid(nodes + i)] } });
  }
  for (let j = 0; j < 4 * nodes; j++) {
    const running = j < nodes;
    world.jobs.push({
      metadata: {
        name: `job-${j}`, namespace: 'queue', uid: uid(j), resourceVersion: String(j + 1), creationTimestamp: new Date(Date.parse('2026-12-03T08:00:00Z') + j * 1000),
        labels: { 'leasehold.dev/lendable': 'true' }, annotations: running ? { 'leasehold.dev/claimed-by': `cluster1/lend.fleet/gpu-${j}` } : {},
      },
      spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'i', resources: GPU }] } } },
      ...(running ? { status: { active: 1 } } : {}),
    });
  }
  const fleet = {
    apiVersion: 'leasehold.dev/v1alpha1', kind: 'PeerFleet', metadata: { name: 'fleet', namespace: 'lend', uid: uid(10_000_000) },
    spec: { origin: 'https://peer.example:6443', namespace: 'queue', credentialSecretRef: { name: 'peer', key: 'token' }, lendableNodes: { matchLabels: { pool: 'gpu' } }, pricePerGPUHour: 2, idleWindow: '10m', pollInterval: '30s', maxSessionDuration: '0s', listed: true, dryRun: false },
    status: { hosts: world.hosts },
  } as unknown as PeerFleet;
  return { fleet, clusterID: 'cluster1', nodes: world.nodes, pods: world.pods, mirrors: world.mirrors, peerFleets: new Set(['lend/fleet']), holders: new Map(), shared: new Set(), peerJobs: world.jobs, verdict: { ready: true, code: 'Ready' }, now: Date.parse('2026-12-03T10:00:00Z') } as FleetWorld;
}

export function passPhase() {
  const rows: { nodes: number; msPerPass: number; usPerNode: number }[] = [];
  for (const nodes of SIZES) {
    const world = steadyWorld(nodes);
    lendingPass(world); // warm: the parsed requests are kept with the objects, as the informer's are
    const t0 = performance.now();
    for (let i = 0; i < REPEATS; i++) lendingPass(world);
    const msPerPass = (performance.now() - t0) / REPEATS;
    rows.push({ nodes, msPerPass: Math.round(msPerPass * 10) / 10, usPerNode: Math.round((msPerPass * 1000) / nodes) });
    log(`pass: ${nodes} lending nodes, ${4 * nodes} peer Jobs: ${msPerPass.toFixed(1)} ms a pass, ${((msPerPass * 1000) / nodes).toFixed(0)} µs a node`);
  }
  const first = rows[0]!;
  const last = rows[rows.length - 1]!;
  results.pass = { rows, perNodeGrowth: Math.round((last.usPerNode / first.usPerNode) * 100) / 100, nodesGrowth: last.nodes / first.nodes };
}
