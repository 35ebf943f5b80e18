import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1JobStatus, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import type { PeerFleet } from '../../../src/api/index.js';
import { STARTS_PER_PASS, lendingPass, type FleetWorld, type PeerHost } from './lending.js';
import { LEDGER_KEPT } from './ledger.js';

const NOW = Date.parse('2026-12-03T10:00:00Z');
const LONG_AGO = '2026-12-03T09:00:00Z';
const UID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
/** The uid our API server gave the mirror Job of peer Job n. */
const MIRROR_UID = (n: number) => `10000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

const fleet = (spec: Partial<PeerFleet['spec']> = {}, hosts: PeerHost[] = [], extra: Partial<PeerFleet['metadata']> = {}): PeerFleet =>
  ({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'PeerFleet',
    metadata: { name: 'gpu', namespace: 'lend', uid: UID(99), ...extra },
    spec: {
      origin: 'https://peer.example:6443',
      namespace: 'queue',
      credentialSecretRef: { name: 'peer', key: 'token' },
      lendableNodes: { matchLabels: { pool: 'gpu' } },
      pricePerGPUHour: 2,
      idleWindow: '10m',
      pollInterval: '30s',
      maxSessionDuration: '0s',
      listed: true,
      dryRun: false,
      ...spec,
    },
    status: { hosts },
  }) as PeerFleet;

const node = (name: string, gpus = 2): V1Node => ({ metadata: { name, labels: { pool: 'gpu' } }, status: { allocatable: { cpu: '32', memory: '256Gi', pods: '110', 'nvidia.com/gpu': String(gpus) } } });

const peerJob = (n: number, opts: { gpus?: number; claimedBy?: string; status?: V1JobStatus; created?: string } = {}): V1Job => ({
  metadata: {
    name: `job-${n}`,
    namespace: 'queue',
    uid: UID(n),
    resourceVersion: String(100 + n),
    creationTimestamp: new Date(opts.created ?? `2026-12-03T08:0${n}:00Z`),
    labels: { 'leasehold.dev/lendable': 'true' },
    annotations: opts.claimedBy ? { 'leasehold.dev/claimed-by': opts.claimedBy } : {},
  },
  spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': String(opts.gpus ?? 1) } } }] } } },
  ...(opts.status ? { status: opts.status } : {}),
});

const START = new Date('2026-12-03T09:30:00Z');
const DONE = new Date('2026-12-03T09:31:40Z');
const COMPLETE: V1JobStatus = { startTime: START, completionTime: DONE, succeeded: 1, active: 0, ready: 0, terminating: 0, conditions: [{ type: 'SuccessCriteriaMet', status: 'True' }, { type: 'Complete', status: 'True' }] };

const mirror = (n: number, nodeName: string, status: V1JobStatus = { active: 1, startTime: START }, fleetName = 'gpu', ns = 'lend'): V1Job => ({
  metadata: { name: `lh-peer-${UID(n)}`, namespace: ns, uid: MIRROR_UID(n), labels: { 'leasehold.dev/peerfleet': fleetName, 'leasehold.dev/node': nodeName, 'leasehold.dev/peer-job-uid': UID(n) } },
  spec: { template: { spec: { containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '1' } } }] } } },
  status,
});

const mirrorPod = (n: number, nodeName: string, exitCode?: number): V1Pod => ({
  metadata: {
    name: `p-${n}`,
    namespace: 'lend',
    labels: { 'leasehold.dev/peerfleet': 'gpu', 'leasehold.dev/node': nodeName, 'leasehold.dev/peer-job-uid': UID(n) },
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: `lh-peer-${UID(n)}`, uid: MIRROR_UID(n), controller: true, blockOwnerDeletion: true }],
  },
  spec: { nodeName, containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '1' } } }] },
  status: exitCode === undefined ? { phase: 'Running' } : { phase: 'Succeeded', containerStatuses: [{ name: 'c', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode } } }] },
});

const ourPod = (name: string, nodeName?: string, annotations: Record<string, string> = {}): V1Pod => ({
  metadata: { name, namespace: 'team', annotations },
  spec: { ...(nodeName ? { nodeName } : {}), containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': '1' } } }] },
  status: { phase: nodeName ? 'Running' : 'Pending' },
});

const host = (nodeName: string, state: PeerHost['state'], more: Partial<PeerHost> = {}): PeerHost => ({ node: nodeName, state, since: LONG_AGO, idleSince: LONG_AGO, ...more });
const CLAIM = (n: number, nodeName: string) => `cluster1/lend.gpu/${nodeName}`;

function world(over: Partial<FleetWorld> = {}): FleetWorld {
  return {
    fleet: fleet(),
    clusterID: 'cluster1',
    nodes: [node('gpu-1')],
    pods: [],
    mirrors: [],
    peerFleets: new Set(['lend/gpu', 'elsewhere/other']),
    holders: new Map(),
    shared: new Set(),
    peerJobs: [peerJob(1)],
    verdict: { ready: true, code: 'Ready' },
    now: NOW,
    ...over,
  };
}

const effects = (w: FleetWorld) => lendingPass(w).effects.map((e) => `${e.kind}:${'job' in e ? e.job.metadata?.name : 'mirror' in e ? e.mirror.metadata?.name : e.node}`);
const states = (w: FleetWorld) => lendingPass(w).hosts.map((h) => `${h.node}=${h.state}`);

describe('lendingPass', () => {
  it.each<[string, Partial<FleetWorld>, string[], string[]]>([
    ['a new node starts Busy-less: idle, inside the window', { fleet: fleet({}, []) }, ['gpu-1=Waiting'], []],
    ['idle past the window: Available first', { fleet: fleet({}, [host('gpu-1', 'Waiting')]) }, ['gpu-1=Available'], []],
    ['Available, a Job fits: the session starts and the claim is planned', { fleet: fleet({}, [host('gpu-1', 'Available')]) }, ['gpu-1=Lending'], ['claim:job-1']],
    ['our pod runs there: Busy, no claim', { fleet: fleet({}, [host('gpu-1', 'Available')]), pods: [ourPod('x', 'gpu-1')] }, ['gpu-1=Busy'], []],
    ['the peer is not Ready: waits', { fleet: fleet({}, [host('gpu-1', 'Available')]), verdict: { ready: false, code: 'PeerRefused' } }, ['gpu-1=Waiting'], []],
    ['the peer queue not read yet: nothing to claim', { fleet: fleet({}, [host('gpu-1', 'Available')]), peerJobs: undefined }, ['gpu-1=Available'], []],
    ['a Job too large for the node: nothing to claim', { fleet: fleet({}, [host('gpu-1', 'Available')]), peerJobs: [peerJob(1, { gpus: 4 })] }, ['gpu-1=Available'], []],
    ['a Job whose name is not a Kubernetes name (an untrusted peer): never claimed', {
      fleet: fleet({}, [host('gpu-1', 'Available')]),
      peerJobs: [{ ...peerJob(1), metadata: { ...peerJob(1).metadata, name: `Bad Name ${'x'.repeat(300)}` } }],
    }, ['gpu-1=Available'], []],
    ['one Job, two Available nodes: one claim', { fleet: fleet({}, [host('gpu-1', 'Available'), host('gpu-2', 'Available')]), nodes: [node('gpu-1'), node('gpu-2')] }, ['gpu-1=Lending', 'gpu-2=Available'], ['claim:job-1']],
    ['held by another PeerFleet: waits', {
      fleet: fleet({}, [host('gpu-1', 'Available')]),
      mirrors: [mirror(7, 'gpu-1', { active: 1 }, 'other', 'elsewhere')],
    }, ['gpu-1=Waiting'], []],
    ['a room taken by a mirror with no pod yet is not given again', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      nodes: [node('gpu-1', 1)],
      mirrors: [mirror(2, 'gpu-1', {})],
      peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') })],
    }, ['gpu-1=Lending'], []],
    ['lending, our pod queued with no value: drains, no claim', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      mirrors: [mirror(2, 'gpu-1')],
      pods: [mirrorPod(2, 'gpu-1'), ourPod('wants')],
      peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { startTime: START, active: 1 } })],
    }, ['gpu-1=Draining'], ['writeBack:job-2']],
    ['lending, our queued pod worth the price (a tie): keeps lending and claims', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      mirrors: [mirror(2, 'gpu-1')],
      pods: [mirrorPod(2, 'gpu-1'), ourPod('wants', undefined, { 'leasehold.dev/value-per-gpu-hour': '2' })],
      peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { startTime: START, active: 1, ready: 0 } })],
    }, ['gpu-1=Lending'], ['writeBack:job-2', 'claim:job-1']],
    ['a finished mirror whose peer Job has it all: the mirror goes', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      mirrors: [mirror(2, 'gpu-1', COMPLETE)],
      pods: [mirrorPod(2, 'gpu-1', 0)],
      peerJobs: [{ ...peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: COMPLETE }), metadata: { ...peerJob(2).metadata, annotations: { 'leasehold.dev/claimed-by': CLAIM(2, 'gpu-1'), 'leasehold.dev/host': 'cluster1/gpu-1', 'leasehold.dev/exit-code': '0' } } }],
    }, ['gpu-1=Available'], ['deleteMirror:lh-peer-00000000-0000-4000-8000-000000000002']],
    ['a finished mirror, another Job queued: its write-back and the next claim in one pass, the session goes on', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      nodes: [node('gpu-1', 1)],
      mirrors: [mirror(2, 'gpu-1', COMPLETE)],
      pods: [mirrorPod(2, 'gpu-1', 0)],
      peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { startTime: START, active: 1 } })],
    }, ['gpu-1=Lending'], ['writeBack:job-2', 'claim:job-1']],
    ['finished mirrors on several nodes, as many Jobs queued: every node claims in the same pass, one Job each', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } }), host('gpu-2', 'Lending', { session: { job: 'job-3', startedAt: LONG_AGO } })]),
      nodes: [node('gpu-1', 1), node('gpu-2', 1)],
      mirrors: [mirror(2, 'gpu-1', COMPLETE), mirror(3, 'gpu-2', COMPLETE)],
      pods: [mirrorPod(2, 'gpu-1', 0), mirrorPod(3, 'gpu-2', 0)],
      peerJobs: [peerJob(1), peerJob(4), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: COMPLETE }), peerJob(3, { claimedBy: CLAIM(3, 'gpu-2'), status: COMPLETE })],
    }, ['gpu-1=Lending', 'gpu-2=Lending'], ['writeBack:job-2', 'writeBack:job-3', 'claim:job-1', 'claim:job-4']],
    ['a finished mirror the peer lacks the exit code of: written back first', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      mirrors: [mirror(2, 'gpu-1', COMPLETE)],
      pods: [mirrorPod(2, 'gpu-1', 0)],
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: COMPLETE })],
    }, ['gpu-1=Available'], ['writeBack:job-2']],
    ['claimed before a restart, no mirror, still lending: started', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO, claims: [UID(2)] } })]),
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') })],
    }, ['gpu-1=Lending'], ['start:job-2']],
    ['a claim by us our record never made: not started', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO, claims: [UID(2)] } })]),
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') }), peerJob(3, { claimedBy: CLAIM(3, 'gpu-1') })],
    }, ['gpu-1=Lending'], ['start:job-2']],
    ['a claim recorded for another node: not started', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO, claims: [UID(2)] } }), host('gpu-2', 'Lending', { session: { job: 'job-3', startedAt: LONG_AGO } })]),
      nodes: [node('gpu-1'), node('gpu-2')],
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-2') })],
    }, ['gpu-1=Available', 'gpu-2=Available'], []],
    ['claimed before a restart, no mirror, our work came: released', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO, claims: [UID(2)] } })]),
      pods: [ourPod('x', 'gpu-1')],
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') })],
    }, ['gpu-1=Draining'], ['release:job-2']],
    ['started here, mirror gone: reported lost, never run again', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { startTime: START, active: 1 } })],
    }, ['gpu-1=Available'], ['writeBack:job-2']],
    ['the peer not Ready: no record is judged', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO, claims: [UID(2)] } })]),
      verdict: { ready: false, code: 'PeerUnreachable' },
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') })],
    }, ['gpu-1=Lending'], []],
    ['being deleted with a mirror running: drains', {
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })], { deletionTimestamp: new Date(NOW) }),
      mirrors: [mirror(2, 'gpu-1')],
      pods: [mirrorPod(2, 'gpu-1')],
      peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { startTime: START, active: 1, ready: 0 } })],
    }, ['gpu-1=Draining'], ['writeBack:job-2']],
  ])('%s', (_name, over, wantStates, wantEffects) => {
    const w = world(over);
    expect(states(w)).toEqual(wantStates);
    expect(effects(w)).toEqual(wantEffects);
  });

  describe('a pod carrying a mirror\'s labels without being its pod', () => {
    // What any team can make: our labels (and an owner reference it wrote itself) on a pod of its own.
    const lookalike = (n: number, nodeName: string, meta: Partial<V1Pod['metadata']> = {}, exitCode?: number): V1Pod => {
      const p = mirrorPod(n, nodeName, exitCode);
      return { ...p, metadata: { ...p.metadata, namespace: 'team', ownerReferences: [], ...meta } };
    };
    it.each<[string, Partial<FleetWorld>, string[], string[]]>([
      ['runs on an idle node: the node is busy, not lent', {
        fleet: fleet({}, [host('gpu-1', 'Available')]),
        pods: [lookalike(2, 'gpu-1')],
      }, ['gpu-1=Busy'], []],
      ['owned by a Job of the mirror\'s name in a namespace with no PeerFleet: still ours', {
        fleet: fleet({}, [host('gpu-1', 'Available')]),
        mirrors: [mirror(2, 'gpu-1', { active: 1 }, 'gpu', 'team')],
        pods: [lookalike(2, 'gpu-1', { ownerReferences: mirrorPod(2, 'gpu-1').metadata!.ownerReferences! })],
      }, ['gpu-1=Busy'], []],
      ['in the lending namespace, owned by no mirror, while lending: the node drains', {
        fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
        mirrors: [mirror(2, 'gpu-1')],
        pods: [mirrorPod(2, 'gpu-1'), lookalike(3, 'gpu-1', { namespace: 'lend' })],
        peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { startTime: START, active: 1 } })],
      }, ['gpu-1=Draining'], ['writeBack:job-2']],
      ['elsewhere, named after a mirror with no pod yet: that mirror still holds its room', {
        fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
        nodes: [node('gpu-1', 1)],
        mirrors: [mirror(2, 'gpu-1', {})],
        pods: [lookalike(2, 'gpu-9')],
        peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') })],
      }, ['gpu-1=Lending'], []],
    ])('%s', (_name, over, wantStates, wantEffects) => {
      const w = world(over);
      expect(states(w)).toEqual(wantStates);
      expect(effects(w)).toEqual(wantEffects);
    });

    it('does not choose the exit code the peer is told', () => {
      const pass = lendingPass(world({
        fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
        mirrors: [mirror(2, 'gpu-1', COMPLETE)],
        pods: [mirrorPod(2, 'gpu-1', 0), lookalike(2, 'gpu-1', { namespace: 'lend' }, 7)],
        peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: COMPLETE })],
      }));
      const back = pass.effects.find((e) => e.kind === 'writeBack');
      expect(back?.kind === 'writeBack' && back.write.annotations['leasehold.dev/exit-code']).toBe('0');
    });
  });

  it('records the session and the claimed Job uid before its claim, and the claim event', () => {
    const pass = lendingPass(world({ fleet: fleet({}, [host('gpu-1', 'Available')]) }));
    expect(pass.hosts[0]!.session).toEqual({ job: 'job-1', startedAt: '2026-12-03T10:00:00Z', claims: [UID(1)] });
    expect(pass.sessionsStarted).toBe(1);
    expect(pass.notes).toContainEqual(expect.objectContaining({ reason: 'Claimed', message: 'node gpu-1 claims peer Job job-1' }));
    expect(pass.unfinished).toBe(0);
  });

  it('reports claims in our name that no record of ours made, and runs none of them', () => {
    const forged = [2, 3, 4, 5, 6].map((n) => peerJob(n, { claimedBy: CLAIM(n, 'gpu-1') }));
    const pass = lendingPass(world({ fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-9', startedAt: LONG_AGO } })]), peerJobs: forged }));
    expect(pass.effects.filter((e) => e.kind === 'start' || e.kind === 'claim')).toEqual([]);
    expect(pass.forged).toBe(5);
    expect(pass.unfinished).toBe(0);
    expect(pass.notes.filter((n) => n.reason === 'ForgedClaim').map((n) => n.message)).toContainEqual(expect.stringMatching(/peer Job queue\/job-2 carries a claim by us on node gpu-1 that we never recorded; it is not run/));
  });

  it('starts at most STARTS_PER_PASS recorded claims in one pass, and comes back for the rest', () => {
    const claimed = [2, 3, 4, 5, 6, 7].map((n) => peerJob(n, { claimedBy: CLAIM(n, 'gpu-1') }));
    const session = { job: 'job-7', startedAt: LONG_AGO, claims: [2, 3, 4, 5, 6, 7].map(UID) };
    const pass = lendingPass(world({ fleet: fleet({}, [host('gpu-1', 'Lending', { session })]), nodes: [node('gpu-1', 8)], peerJobs: claimed }));
    expect(pass.effects.filter((e) => e.kind === 'start')).toHaveLength(STARTS_PER_PASS);
    expect(pass.again).toBe(true);
  });

  it('forgets a recorded claim once its mirror is seen, or the peer gave the Job to someone else', () => {
    const session = { job: 'job-3', startedAt: LONG_AGO, claims: [UID(2), UID(3), UID(4)] };
    const pass = lendingPass(world({
      fleet: fleet({}, [host('gpu-1', 'Lending', { session })]),
      nodes: [node('gpu-1', 8)],
      mirrors: [mirror(2, 'gpu-1')],
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') }), peerJob(3, { claimedBy: 'other/x.y/n' }), peerJob(4, { claimedBy: CLAIM(4, 'gpu-1') })],
    }));
    expect(pass.hosts[0]!.session!.claims).toEqual([UID(4)]);
  });

  it('a dry run plans per node and plans no effect', () => {
    const pass = lendingPass(world({ fleet: fleet({ dryRun: true }, [host('gpu-1', 'Available'), host('gpu-2', 'Waiting', { idleSince: '2026-12-03T09:59:00Z' })]), nodes: [node('gpu-1'), node('gpu-2')] }));
    expect(pass.effects).toEqual([]);
    expect(pass.plan).toEqual([
      { node: 'gpu-1', action: 'Claim', job: 'job-1', message: 'would claim peer Job job-1 (1 GPU)' },
      { node: 'gpu-2', action: 'Wait', message: expect.stringMatching(/idle window until 2026-12-03T10:09:00.000Z/) },
    ]);
    expect(pass.hosts.map((h) => h.state)).toEqual(['Available', 'Waiting']);
  });

  it('drains with the reason, counts it once, and wakes for the window end', () => {
    const lending = world({
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } }), host('gpu-2', 'Waiting', { idleSince: '2026-12-03T09:55:00Z' })]),
      nodes: [node('gpu-1'), node('gpu-2')],
      mirrors: [mirror(2, 'gpu-1')],
      pods: [mirrorPod(2, 'gpu-1'), ourPod('x', 'gpu-1')],
      peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { startTime: START, active: 1, ready: 0 } })],
    });
    const pass = lendingPass(lending);
    expect(pass.drains).toEqual(['OurWorkRunning']);
    expect(pass.hosts[0]!.session!.drainReason).toBe('OurWorkRunning');
    expect(pass.notes).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'Drain' }));
    expect(pass.wakeAt).toBe(Date.parse('2026-12-03T10:05:00Z'));
    expect(pass.unfinished).toBe(1);
    expect(pass.summary).toBe('1 Draining, 1 Waiting');
  });

  it('counts a running mirror on a node it no longer lends as unfinished, so a deleted PeerFleet keeps its finalizer until the mirror ends', () => {
    const gone = world({ fleet: fleet({}, [], { deletionTimestamp: LONG_AGO } as Partial<PeerFleet['metadata']>), nodes: [node('gpu-1')], mirrors: [mirror(2, 'gpu-cordoned'), mirror(3, 'gpu-cordoned', COMPLETE)], pods: [mirrorPod(2, 'gpu-cordoned')] });
    expect(lendingPass(gone).unfinished).toBe(1);
    expect(lendingPass({ ...gone, mirrors: [mirror(2, 'gpu-cordoned', COMPLETE)] }).unfinished).toBe(0);
    // Another PeerFleet's mirror there is not ours to wait for.
    expect(lendingPass({ ...gone, mirrors: [mirror(2, 'gpu-cordoned', undefined, 'other', 'elsewhere')] }).unfinished).toBe(0);
  });

  it('accounts from the peer records, per node and in total', () => {
    const done = (n: number, nodeName: string) => peerJob(n, { gpus: 2, claimedBy: CLAIM(n, nodeName), status: COMPLETE });
    const pass = lendingPass(world({ peerJobs: [done(1, 'gpu-1'), done(2, 'gpu-1'), peerJob(3, { claimedBy: 'other/lend.gpu/gpu-1', status: COMPLETE })] }));
    expect(pass.accounting).toMatchObject({ jobs: 2, gpuSeconds: 400, amountUSD: 0.222222 });
    expect(pass.hosts[0]!.lent).toMatchObject({ jobs: 2, gpuSeconds: 400 });
  });

  it('records a completed mirror in our ledger in the pass that first sees it, and flags a peer record that differs from it', () => {
    const done = mirror(1, 'gpu-1', COMPLETE);
    // The peer shortened its record by a minute.
    const edited = peerJob(1, { claimedBy: CLAIM(1, 'gpu-1'), status: { ...COMPLETE, completionTime: new Date('2026-12-03T09:30:40Z') } });
    const pass = lendingPass(world({ mirrors: [done], peerJobs: [edited] }));
    expect(pass.ledger?.entries).toEqual([{ uid: UID(1), job: UID(1), node: 'gpu-1', gpus: 1, startedAt: '2026-12-03T09:30:00Z', completedAt: '2026-12-03T09:31:40Z' }]);
    expect(pass.accounting).toMatchObject({ gpuSeconds: 40, ledger: { gpuSeconds: 100, jobs: 1 }, mismatched: 1, mismatchedJobs: [{ uid: UID(1), ledgerGPUSeconds: 100, peerGPUSeconds: 40 }] });
    expect(pass.hosts[0]!.lent).toMatchObject({ gpuSeconds: 40, ledger: { gpuSeconds: 100 }, mismatched: 1 });
    expect(pass.hosts[0]!.lent!.mismatchedJobs).toBeUndefined();
    expect(pass.notes).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'LedgerMismatch', standing: true, message: expect.stringContaining('status.accounting.ledger') }));
    // The mirror is gone and the peer deleted its Job: the ledger keeps the session, and the difference stands.
    const later = lendingPass(world({ fleet: { ...fleet(), status: { hosts: pass.hosts, ledger: pass.ledger! } }, peerJobs: [] }));
    expect(later.ledger).toBe(pass.ledger);
    expect(later.accounting).toMatchObject({ gpuSeconds: 0, ledger: { gpuSeconds: 100 }, mismatchedJobs: [{ reason: 'the peer Job is gone from the peer namespace' }] });
    expect(later.hosts[0]!.lent).toMatchObject({ gpuSeconds: 0, ledger: { gpuSeconds: 100 }, mismatched: 1 });
  });

  it('a session that goes on keeps its start, records the next claim before it is made, and keeps the holder Lease', () => {
    const lease: V1Lease = { metadata: { name: 'leasehold-peer-gpu-1' }, spec: { holderIdentity: 'lend/gpu', renewTime: new Date(NOW) as never, leaseDurationSeconds: 120 } };
    const pass = lendingPass(world({
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
      mirrors: [mirror(2, 'gpu-1', COMPLETE)],
      pods: [mirrorPod(2, 'gpu-1', 0)],
      holders: new Map([['gpu-1', lease]]),
      peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: COMPLETE })],
    }));
    expect(pass.hosts[0]).toMatchObject({ state: 'Lending', session: { job: 'job-1', startedAt: LONG_AGO, claims: [UID(1)] } });
    expect(pass.sessionsStarted).toBe(0);
    expect(pass.effects.map((e) => e.kind)).not.toContain('freeNode');
    expect(pass.notes.map((n) => n.reason)).toEqual(['Claimed']);
  });

  it('ends the session where the node is once its last mirror is gone, and gives the holder Lease up where another PeerFleet selects the node', () => {
    const lease: V1Lease = { metadata: { name: 'leasehold-peer-gpu-1' }, spec: { holderIdentity: 'lend/gpu', renewTime: new Date(NOW) as never, leaseDurationSeconds: 120 } };
    const ended = (shared: string[]) => lendingPass(world({ fleet: fleet({}, [host('gpu-1', 'Draining', { session: { job: 'job-2', startedAt: LONG_AGO, drainReason: 'OurWorkRunning' } })]), pods: [ourPod('x', 'gpu-1')], holders: new Map([['gpu-1', lease]]), shared: new Set(shared), peerJobs: [] }));
    const pass = ended(['gpu-1']);
    expect(pass.hosts[0]).toMatchObject({ state: 'Busy' });
    expect(pass.hosts[0]!.session).toBeUndefined();
    expect(pass.effects).toEqual([{ kind: 'freeNode', node: 'gpu-1' }]);
    expect(pass.notes.map((n) => n.reason)).toContain('SessionEnded');
    // No other PeerFleet could lend the node: the Lease is kept, and the next session writes none.
    const alone = ended([]);
    expect(alone.hosts[0]!.session).toBeUndefined();
    expect(alone.notes.map((n) => n.reason)).toContain('SessionEnded');
    expect(alone.effects).toEqual([]);
  });

  it('keeps its ledger within the bound when more mirrors completed than it holds, and keeps the mirrors it could not record yet', () => {
    const n = LEDGER_KEPT + 30;
    const ids = Array.from({ length: n }, (_, i) => i + 1);
    const done = (i: number) => ({ ...peerJob(i, { claimedBy: CLAIM(i, 'gpu-1'), status: COMPLETE }), metadata: { ...peerJob(i).metadata, annotations: { 'leasehold.dev/claimed-by': CLAIM(i, 'gpu-1'), 'leasehold.dev/host': 'cluster1/gpu-1', 'leasehold.dev/exit-code': '0' } } });
    const pass = lendingPass(world({
      fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-1', startedAt: LONG_AGO } })]),
      nodes: [node('gpu-1', 400)],
      mirrors: ids.map((i) => mirror(i, 'gpu-1', COMPLETE)),
      pods: ids.map((i) => mirrorPod(i, 'gpu-1', 0)),
      peerJobs: ids.map(done),
    }));
    expect(pass.ledger!.entries).toHaveLength(LEDGER_KEPT);
    const recorded = new Set(pass.ledger!.entries.map((e) => e.uid));
    const deleted = pass.effects.flatMap((e) => (e.kind === 'deleteMirror' ? [e.mirror.metadata!.labels!['leasehold.dev/peer-job-uid']!] : []));
    expect(deleted).toHaveLength(LEDGER_KEPT);
    expect(deleted.every((uid) => recorded.has(uid))).toBe(true);
  });

  describe('a Job set aside for when the node frees', () => {
    const lendingOn = (nodeName: string, claims?: string[]) => host(nodeName, 'Lending', { session: { job: 'job-9', startedAt: LONG_AGO, ...(claims ? { claims } : {}) } });
    const claimsOf = (pass: ReturnType<typeof lendingPass>) => pass.effects.filter((e) => e.kind === 'claim').map((e) => `${(e as { node: string }).node}:${(e as { job: V1Job }).job.metadata?.name}`);

    it('a lending node whose room is taken records the oldest queued Job in its session, and claims nothing yet', () => {
      const pass = lendingPass(world({
        fleet: fleet({}, [lendingOn('gpu-1')]),
        nodes: [node('gpu-1', 1)],
        mirrors: [mirror(2, 'gpu-1')],
        pods: [mirrorPod(2, 'gpu-1')],
        peerJobs: [peerJob(1), peerJob(3), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { active: 1, startTime: START } })],
      }));
      expect(pass.hosts[0]).toMatchObject({ state: 'Lending', session: { claims: [UID(1)] } });
      expect(claimsOf(pass)).toEqual([]);
    });

    it('a freed node claims the Job it set aside, though an older one is set aside by a busy node, and sets the next aside', () => {
      const pass = lendingPass(world({
        fleet: fleet({}, [lendingOn('gpu-1', [UID(4)]), lendingOn('gpu-2', [UID(1)])]),
        nodes: [node('gpu-1', 1), node('gpu-2', 1)],
        mirrors: [mirror(2, 'gpu-1', COMPLETE), mirror(3, 'gpu-2')],
        pods: [mirrorPod(2, 'gpu-1', 0), mirrorPod(3, 'gpu-2')],
        peerJobs: [peerJob(1), peerJob(4), peerJob(5), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: COMPLETE }), peerJob(3, { claimedBy: CLAIM(3, 'gpu-2'), status: { active: 1, startTime: START } })],
      }));
      expect(claimsOf(pass)).toEqual(['gpu-1:job-4']);
      expect(pass.hosts.map((h) => [h.node, h.session?.claims])).toEqual([['gpu-1', [UID(4), UID(5)]], ['gpu-2', [UID(1)]]]);
    });

    it('a free node takes an unreserved Job before one a busy node set aside, and that one when nothing else is queued', () => {
      const free = (queued: number[]) => lendingPass(world({
        fleet: fleet({}, [lendingOn('gpu-1'), lendingOn('gpu-2', [UID(1)])]),
        nodes: [node('gpu-1', 1), node('gpu-2', 1)],
        mirrors: [mirror(2, 'gpu-1', COMPLETE), mirror(3, 'gpu-2')],
        pods: [mirrorPod(2, 'gpu-1', 0), mirrorPod(3, 'gpu-2')],
        peerJobs: [...queued.map((n) => peerJob(n)), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: COMPLETE }), peerJob(3, { claimedBy: CLAIM(3, 'gpu-2'), status: { active: 1, startTime: START } })],
      }));
      expect(claimsOf(free([1, 4]))).toEqual(['gpu-1:job-4']);
      expect(claimsOf(free([1]))).toEqual(['gpu-1:job-1']);
    });

    it('a node that begins to drain lets its Job set aside go', () => {
      const pass = lendingPass(world({
        fleet: fleet({}, [lendingOn('gpu-1', [UID(1)])]),
        nodes: [node('gpu-1', 1)],
        mirrors: [mirror(2, 'gpu-1')],
        pods: [mirrorPod(2, 'gpu-1'), ourPod('x')],
        peerJobs: [peerJob(1), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { active: 1, startTime: START } })],
      }));
      expect(pass.hosts[0]!.state).toBe('Draining');
      expect(pass.hosts[0]!.session?.claims).toBeUndefined();
    });

    it('a claim in our name on a Job set aside, made while the node has no room: given back, never started behind the running one', () => {
      const pass = lendingPass(world({
        fleet: fleet({}, [lendingOn('gpu-1', [UID(1)])]),
        nodes: [node('gpu-1', 1)],
        mirrors: [mirror(2, 'gpu-1')],
        pods: [mirrorPod(2, 'gpu-1')],
        peerJobs: [peerJob(1, { claimedBy: CLAIM(1, 'gpu-1') }), peerJob(2, { claimedBy: CLAIM(2, 'gpu-1'), status: { active: 1, startTime: START } })],
      }));
      const effects = pass.effects.map((e) => `${e.kind}:${'job' in e ? e.job.metadata?.name : ''}`);
      expect(effects).toContain('release:job-1');
      expect(effects).not.toContain('start:job-1');
    });
  });

  describe('a holder Lease kept after its session', () => {
    const kept: V1Lease = { metadata: { name: 'leasehold-peer-gpu-1' }, spec: { holderIdentity: 'lend/gpu', renewTime: new Date(NOW - 300_000) as never, leaseDurationSeconds: 120 } };
    const between = (over: Partial<FleetWorld> = {}) =>
      lendingPass(world({ fleet: fleet({}, [host('gpu-1', 'Busy')]), pods: [ourPod('x', 'gpu-1')], holders: new Map([['gpu-1', kept]]), peerJobs: [], ...over }));

    it.each([
      ['no other PeerFleet selects the node', {}, []],
      ['another PeerFleet selects it', { shared: new Set(['gpu-1']) }, [{ kind: 'freeNode', node: 'gpu-1' }]],
      ['this PeerFleet is deleted', { fleet: { ...fleet({}, [host('gpu-1', 'Busy')]), metadata: { ...fleet().metadata, deletionTimestamp: new Date(NOW) } } }, [{ kind: 'freeNode', node: 'gpu-1' }]],
    ] as [string, Partial<FleetWorld>, unknown[]][])('with no session on the node, %s', (_what, over, effects) => {
      expect(between(over).effects).toEqual(effects);
    });

    it('is never given up while a mirror of the session runs, shared or not', () => {
      const pass = lendingPass(world({
        fleet: fleet({}, [host('gpu-1', 'Lending', { session: { job: 'job-2', startedAt: LONG_AGO } })]),
        mirrors: [mirror(2, 'gpu-1')],
        pods: [mirrorPod(2, 'gpu-1')],
        holders: new Map([['gpu-1', kept]]),
        shared: new Set(['gpu-1']),
        peerJobs: [peerJob(2, { claimedBy: CLAIM(2, 'gpu-1') })],
      }));
      expect(pass.hosts[0]).toMatchObject({ state: 'Lending' });
      expect(pass.effects.map((e) => e.kind)).not.toContain('freeNode');
    });

    it('starts the next session without a Lease write in the pass (the claim renews it only past half its term)', () => {
      const pass = lendingPass(world({ fleet: fleet({}, [host('gpu-1', 'Available')]), holders: new Map([['gpu-1', kept]]) }));
      expect(pass.hosts[0]).toMatchObject({ state: 'Lending', session: { job: 'job-1' } });
      expect(pass.effects).toEqual([{ kind: 'claim', node: 'gpu-1', job: expect.objectContaining({ metadata: expect.objectContaining({ name: 'job-1' }) }) }]);
    });
  });
});

describe('a PeerFleet selecting more nodes than its status holds', () => {
  const many = Array.from({ length: 1030 }, (_, i) => node(`gpu-${String(i).padStart(4, '0')}`));

  it('reports on 1,024 of them, keeps the ones it already reported on, leaves the rest alone and says so', () => {
    // gpu-1029 lends already (named last): a node added later must not push its session out.
    const lending = host('gpu-1029', 'Lending', { session: { job: 'job-1', startedAt: LONG_AGO } });
    const pass = lendingPass(world({
      fleet: fleet({}, [lending, ...many.slice(0, 1023).map((n) => host(n.metadata!.name!, 'Available'))]),
      nodes: many,
      peerJobs: Array.from({ length: 9 }, (_, i) => peerJob(i + 1)),
    }));
    expect(pass.hosts).toHaveLength(1024);
    expect(pass.hosts.map((h) => h.node)).toContain('gpu-1029');
    expect(pass.hosts.map((h) => h.node)).not.toContain('gpu-1023');
    const touched = pass.effects.flatMap((e) => ('node' in e ? [e.node] : []));
    expect(touched.filter((n) => n >= 'gpu-1023' && n !== 'gpu-1029')).toEqual([]);
    expect(pass.summary).toMatch(/; 6 more selected node\(s\) left alone: one PeerFleet lends at most 1024 \(narrow spec.lendableNodes/);
    expect(pass.summary.length).toBeLessThanOrEqual(256);
  });

  it('at or under the bound: every selected node, and the summary the states only', () => {
    const pass = lendingPass(world({ fleet: fleet({}, []), nodes: many.slice(0, 1024) }));
    expect(pass.hosts).toHaveLength(1024);
    expect(pass.summary).toBe('1024 Waiting');
  });
});

describe('selected nodes not opted in for the PeerFleet\'s namespace', () => {
  const WHY = 'node gpu-9 is not opted in for lending to PeerFleets of namespace lend: …';
  const notOptedIn = new Map([['gpu-9', WHY]]);

  it('are reported Unlisted with why, after the lent nodes, and nothing is claimed, held or freed there', () => {
    const pass = lendingPass(world({ fleet: fleet({}, [host('gpu-1', 'Available')]), notOptedIn, peerJobs: [peerJob(1), peerJob(2)] }));
    expect(pass.hosts.map((h) => [h.node, h.state, h.reason])).toEqual([['gpu-1', 'Lending', 'Claimed'], ['gpu-9', 'Unlisted', 'NotOptedIn']]);
    expect(pass.hosts[1]).toEqual({ node: 'gpu-9', state: 'Unlisted', since: new Date(NOW).toISOString().replace('.000Z', 'Z'), reason: 'NotOptedIn', message: WHY });
    expect(pass.effects.filter((e) => 'node' in e && e.node === 'gpu-9')).toEqual([]);
    expect(pass.effects.filter((e) => e.kind === 'claim')).toHaveLength(1);
    expect(pass.summary).toBe('1 Lending, 1 Unlisted');
  });

  it('keep their since from pass to pass, so an unchanged fleet writes nothing new', () => {
    const before = host('gpu-9', 'Unlisted', { reason: 'NotOptedIn', message: WHY, idleSince: undefined });
    delete before.idleSince;
    const pass = lendingPass(world({ fleet: fleet({}, [before]), notOptedIn }));
    expect(pass.hosts.find((h) => h.node === 'gpu-9')).toEqual(before);
  });

  it('a node that lent to this PeerFleet and is no longer opted in for its namespace claims nothing more', () => {
    const lending = host('gpu-9', 'Lending', { session: { job: 'job-1', startedAt: LONG_AGO } });
    const pass = lendingPass(world({ fleet: fleet({}, [lending]), nodes: [], notOptedIn, mirrors: [mirror(1, 'gpu-9')], peerJobs: [peerJob(1, { claimedBy: CLAIM(1, 'gpu-9') }), peerJob(2)] }));
    expect(pass.hosts).toEqual([expect.objectContaining({ node: 'gpu-9', state: 'Unlisted', reason: 'NotOptedIn' })]);
    expect(pass.effects.filter((e) => e.kind === 'claim' || e.kind === 'start')).toEqual([]);
  });

  it('a dry run plans None for them, with why', () => {
    const pass = lendingPass(world({ fleet: fleet({ dryRun: true }), notOptedIn }));
    expect(pass.plan?.find((p) => p.node === 'gpu-9')).toEqual({ node: 'gpu-9', action: 'None', message: WHY });
  });

  it('take only the room the status has left after the lent nodes', () => {
    const lent = Array.from({ length: 1023 }, (_, i) => node(`gpu-${String(i).padStart(4, '0')}`));
    const pass = lendingPass(world({ fleet: fleet({}, []), nodes: lent, notOptedIn: new Map([['x-1', WHY], ['x-2', WHY]]) }));
    expect(pass.hosts).toHaveLength(1024);
    expect(pass.hosts[1023]).toMatchObject({ node: 'x-1', state: 'Unlisted' });
  });
});
