import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1Node, V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { idleClock, isOurWork, lentJobs, occupancy } from './idle.js';

const node: V1Node = { metadata: { name: 'gpu-1', labels: { pool: 'gpu' } }, spec: { taints: [{ key: 'gpu', effect: 'NoSchedule' }] } };
const toleratesGPU = [{ key: 'gpu', operator: 'Exists' }];
const pod = (name: string, spec: Partial<V1Pod['spec']>, meta: Partial<V1Pod['metadata']> = {}, phase = 'Pending'): V1Pod => ({
  metadata: { name, namespace: 'team', ...meta },
  spec: { containers: [], ...spec },
  status: { phase },
});

// A mirror Job as the controller makes it: in the PeerFleet's namespace, named from the peer Job uid.
const PEER_UID = '3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8';
const MIRROR = `lh-peer-${PEER_UID}`;
const MIRROR_UID = '0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9';
const mirrorJob = (over: { name?: string; namespace?: string; uid?: string; fleet?: string; peerUID?: string } = {}): V1Job => ({
  metadata: {
    name: over.name ?? MIRROR,
    namespace: over.namespace ?? 'lend',
    uid: over.uid ?? MIRROR_UID,
    labels: { 'leasehold.dev/peerfleet': over.fleet ?? 'peer', 'leasehold.dev/node': 'gpu-1', 'leasehold.dev/peer-job-uid': over.peerUID ?? PEER_UID },
  },
});
const FLEETS = new Set(['lend/peer']);
const LENT = lentJobs([mirrorJob()], FLEETS);
const MIRROR_LABELS = { 'leasehold.dev/peerfleet': 'peer', 'leasehold.dev/node': 'gpu-1', 'leasehold.dev/peer-job-uid': PEER_UID };
const ownedBy = (over: Partial<V1OwnerReference> = {}): V1OwnerReference[] => [{ apiVersion: 'batch/v1', kind: 'Job', name: MIRROR, uid: MIRROR_UID, controller: true, ...over }];
const mirrorPod = (meta: Partial<V1Pod['metadata']> = {}, spec: Partial<V1Pod['spec']> = {}) =>
  pod('m', { nodeName: 'gpu-1', ...spec }, { namespace: 'lend', labels: MIRROR_LABELS, ownerReferences: ownedBy(), ...meta }, 'Running');

describe('isOurWork', () => {
  it.each<[string, V1Pod, boolean]>([
    ['a plain pod', pod('p', {}), true],
    ['a DaemonSet pod', pod('p', {}, { ownerReferences: [{ kind: 'DaemonSet', name: 'ds', apiVersion: 'apps/v1', uid: 'u', controller: true }] }), false],
    ['a static pod, seen through its mirror pod', pod('p', {}, { annotations: { 'kubernetes.io/config.mirror': 'abc' } }), true],
    ['a static pod owned by its node', pod('p', {}, { ownerReferences: [{ kind: 'Node', name: 'gpu-1', apiVersion: 'v1', uid: 'u', controller: true }] }), true],
    ['a pod of a lent Job\'s mirror', mirrorPod(), false],
    ['a pod of a lent Job\'s mirror, not scheduled yet', mirrorPod({}, { nodeName: undefined }), false],
    ['a finished pod', pod('p', {}, {}, 'Succeeded'), false],
    ['a failed pod', pod('p', {}, {}, 'Failed'), false],
  ])('%s: %s', (_name, p, want) => expect(isOurWork(p, LENT)).toBe(want));
});

describe('a pod passes for lent work only through a mirror Job the controller lends', () => {
  it.each<[string, boolean, V1Pod, V1Job[]]>([
    ['our mirror\'s pod', true, mirrorPod(), [mirrorJob()]],
    ['the mirror labels on a team\'s own pod', false, pod('p', { nodeName: 'gpu-1' }, { labels: MIRROR_LABELS }, 'Running'), [mirrorJob()]],
    ['the mirror labels and owner in a namespace with no PeerFleet', false, mirrorPod({ namespace: 'team' }), [mirrorJob({ namespace: 'team' })]],
    ['a mirror Job naming a PeerFleet its namespace lacks', false, mirrorPod(), [mirrorJob({ fleet: 'other' })]],
    ['an owner named like a mirror that is not among the mirrors', false, mirrorPod(), []],
    ['an owner with the mirror\'s name and another uid (a Job made again by someone else)', false, mirrorPod({ ownerReferences: ownedBy({ uid: 'b0b0b0b0-0000-4000-8000-000000000000' }) }), [mirrorJob()]],
    ['a Job in the lending namespace not named from its peer Job uid', false, mirrorPod({ ownerReferences: ownedBy({ name: 'train' }) }), [mirrorJob({ name: 'train' })]],
    ['a mirror named from another uid than its label says', false, mirrorPod(), [mirrorJob({ peerUID: '99999999-5d6e-4f70-8192-a3b4c5d6e7f8' })]],
    ['an owner that does not control the pod', false, mirrorPod({ ownerReferences: ownedBy({ controller: false }) }), [mirrorJob()]],
    ['an owner of another kind with the mirror\'s name', false, mirrorPod({ ownerReferences: ownedBy({ kind: 'CronJob' }) }), [mirrorJob()]],
    ['a pod of our mirror bound to another node than the mirror\'s', false, mirrorPod({}, { nodeName: 'gpu-2' }), [mirrorJob()]],
  ])('%s: lent work: %s', (_name, lent, p, mirrors) => {
    expect(isOurWork(p, lentJobs(mirrors, FLEETS))).toBe(!lent);
  });
});

describe('occupancy', () => {
  it.each<[string, V1Pod[], string, string]>([
    ['nothing at all', [], 'idle', ''],
    ['our pod runs there', [pod('train', { nodeName: 'gpu-1' }, {}, 'Running')], 'busy', 'our pod team/train runs on node gpu-1'],
    ['our pod is still terminating there', [pod('train', { nodeName: 'gpu-1' }, { deletionTimestamp: new Date() }, 'Running')], 'busy', ''],
    ['only a DaemonSet and a lent mirror run there', [
      pod('ds', { nodeName: 'gpu-1' }, { ownerReferences: [{ kind: 'DaemonSet', name: 'ds', apiVersion: 'apps/v1', uid: 'u', controller: true }] }, 'Running'),
      mirrorPod(),
    ], 'idle', ''],
    ['a team\'s pod wearing the mirror labels runs there', [pod('train', { nodeName: 'gpu-1' }, { labels: MIRROR_LABELS }, 'Running')], 'busy', 'our pod team/train runs on node gpu-1'],
    ['our pod runs elsewhere', [pod('train', { nodeName: 'gpu-2' }, {}, 'Running')], 'idle', ''],
    ['a pending pod the node admits', [pod('wait', { tolerations: toleratesGPU, nodeSelector: { pool: 'gpu' } })], 'wanted', 'our pending pod team/wait could run on node gpu-1'],
    ['two pending pods', [pod('a', { tolerations: toleratesGPU }), pod('b', { tolerations: toleratesGPU })], 'wanted', 'our pending pod team/a (and 1 more) could run on node gpu-1'],
    ['a pending pod that does not tolerate the taint', [pod('cpu', {})], 'idle', ''],
    ['a pending pod selecting other nodes', [pod('cpu', { tolerations: toleratesGPU, nodeSelector: { pool: 'cpu' } })], 'idle', ''],
    ['a pending pod whose affinity excludes the node', [pod('x', { tolerations: toleratesGPU, affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['gpu-1'] }] }] } } } })], 'idle', ''],
  ])('%s: %s', (_name, pods, kind, message) => {
    const o = occupancy(node, pods, LENT);
    expect(o.kind).toBe(kind);
    if (message) expect(o).toMatchObject({ message });
  });
});

describe('idleClock', () => {
  const NOW = Date.parse('2026-12-03T10:00:00Z');
  const WINDOW = 600_000;
  it.each<[string, boolean, string | undefined, object]>([
    ['not idle: no clock', false, '2026-12-03T09:00:00Z', { elapsed: false }],
    ['first idle pass starts the window now', true, undefined, { idleSince: '2026-12-03T10:00:00Z', windowEndsAt: NOW + WINDOW, elapsed: false }],
    ['within the window', true, '2026-12-03T09:55:00Z', { idleSince: '2026-12-03T09:55:00Z', windowEndsAt: NOW + 300_000, elapsed: false }],
    ['the window just ended', true, '2026-12-03T09:50:00Z', { elapsed: true }],
    ['a clock that moved back restarts the window', true, '2026-12-03T11:00:00Z', { idleSince: '2026-12-03T10:00:00Z', elapsed: false }],
    ['an unreadable time restarts the window', true, 'yesterday', { idleSince: '2026-12-03T10:00:00Z', elapsed: false }],
  ])('%s', (_name, idle, since, want) => {
    expect(idleClock(idle, since, NOW, WINDOW)).toMatchObject(want);
  });

  it('a zero window lends at once', () => {
    expect(idleClock(true, undefined, NOW, 0).elapsed).toBe(true);
  });
});
