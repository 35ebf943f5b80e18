import { describe, expect, it } from '@jest/globals';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { idleClock, isOurWork, occupancy } from './idle.js';

const node: V1Node = { metadata: { name: 'gpu-1', labels: { pool: 'gpu' } }, spec: { taints: [{ key: 'gpu', effect: 'NoSchedule' }] } };
const toleratesGPU = [{ key: 'gpu', operator: 'Exists' }];
const pod = (name: string, spec: Partial<V1Pod['spec']>, meta: Partial<V1Pod['metadata']> = {}, phase = 'Pending'): V1Pod => ({
  metadata: { name, namespace: 'team', ...meta },
  spec: { containers: [], ...spec },
  status: { phase },
});

describe('isOurWork', () => {
  it.each<[string, V1Pod, boolean]>([
    ['a plain pod', pod('p', {}), true],
    ['a DaemonSet pod', pod('p', {}, { ownerReferences: [{ kind: 'DaemonSet', name: 'ds', apiVersion: 'apps/v1', uid: 'u', controller: true }] }), false],
    ['a static pod, seen through its mirror pod', pod('p', {}, { annotations: { 'kubernetes.io/config.mirror': 'abc' } }), true],
    ['a static pod owned by its node', pod('p', {}, { ownerReferences: [{ kind: 'Node', name: 'gpu-1', apiVersion: 'v1', uid: 'u', controller: true }] }), true],
    ['a lent Job mirror pod', pod('p', {}, { labels: { 'leasehold.dev/peerfleet': 'peer' } }), false],
    ['a finished pod', pod('p', {}, {}, 'Succeeded'), false],
    ['a failed pod', pod('p', {}, {}, 'Failed'), false],
  ])('%s: %s', (_name, p, want) => expect(isOurWork(p)).toBe(want));
});

describe('occupancy', () => {
  it.each<[string, V1Pod[], string, string]>([
    ['nothing at all', [], 'idle', ''],
    ['our pod runs there', [pod('train', { nodeName: 'gpu-1' }, {}, 'Running')], 'busy', 'our pod team/train runs on node gpu-1'],
    ['our pod is still terminating there', [pod('train', { nodeName: 'gpu-1' }, { deletionTimestamp: new Date() }, 'Running')], 'busy', ''],
    ['only a DaemonSet and a lent mirror run there', [
      pod('ds', { nodeName: 'gpu-1' }, { ownerReferences: [{ kind: 'DaemonSet', name: 'ds', apiVersion: 'apps/v1', uid: 'u', controller: true }] }, 'Running'),
      pod('lent', { nodeName: 'gpu-1' }, { labels: { 'leasehold.dev/peerfleet': 'peer' } }, 'Running'),
    ], 'idle', ''],
    ['our pod runs elsewhere', [pod('train', { nodeName: 'gpu-2' }, {}, 'Running')], 'idle', ''],
    ['a pending pod the node admits', [pod('wait', { tolerations: toleratesGPU, nodeSelector: { pool: 'gpu' } })], 'wanted', 'our pending pod team/wait could run on node gpu-1'],
    ['two pending pods', [pod('a', { tolerations: toleratesGPU }), pod('b', { tolerations: toleratesGPU })], 'wanted', 'our pending pod team/a (and 1 more) could run on node gpu-1'],
    ['a pending pod that does not tolerate the taint', [pod('cpu', {})], 'idle', ''],
    ['a pending pod selecting other nodes', [pod('cpu', { tolerations: toleratesGPU, nodeSelector: { pool: 'cpu' } })], 'idle', ''],
    ['a pending pod whose affinity excludes the node', [pod('x', { tolerations: toleratesGPU, affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['gpu-1'] }] }] } } } })], 'idle', ''],
  ])('%s: %s', (_name, pods, kind, message) => {
    const o = occupancy(node, pods);
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
