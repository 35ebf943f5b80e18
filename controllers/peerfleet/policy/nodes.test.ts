import { describe, expect, it } from '@jest/globals';
import type { V1Node } from '@kubernetes/client-node';
import { admits } from './placement.js';
import { lendableNodes, nodeChangeMatters, nodeRefusal, parseTaintRules, tolerationsFor, type TaintRule } from './nodes.js';

const node = (name: string, labels: Record<string, string> = {}, spec: V1Node['spec'] = {}): V1Node => ({ metadata: { name, labels }, spec });
const opted = { 'leasehold.dev/lendable': 'true', pool: 'gpu' };
const gpuTaint: TaintRule = { key: 'nvidia.com/gpu', effect: 'NoSchedule' };

describe('nodeRefusal', () => {
  it.each<[string, V1Node, readonly TaintRule[], RegExp | undefined]>([
    ['an opted-in node', node('a', opted), [], undefined],
    ['a node without the admin label', node('a', { pool: 'gpu' }), [], /has no leasehold.dev\/lendable=true label.*kubectl label node a leasehold.dev\/lendable=true/],
    ['a node whose label is not true', node('a', { ...opted, 'leasehold.dev/lendable': 'yes' }), [], /has no leasehold.dev\/lendable=true/],
    ['a control-plane node, even opted in', node('cp', { ...opted, 'node-role.kubernetes.io/control-plane': '' }), [], /control-plane node/],
    ['a legacy master node', node('m', { ...opted, 'node-role.kubernetes.io/master': '' }), [], /control-plane node/],
    ['a cordoned node', node('c', opted, { unschedulable: true }), [], /is cordoned/],
    ['another team\'s tainted node', node('t', opted, { taints: [{ key: 'team-b/dedicated', value: 'true', effect: 'NoSchedule' }] }), [gpuTaint], /taint team-b\/dedicated:NoSchedule.*peerFleet.tolerateTaints/],
    ['a NoExecute taint not listed', node('t', opted, { taints: [{ key: 'gpu', effect: 'NoExecute' }] }), [{ key: 'gpu', effect: 'NoSchedule' }], /taint gpu:NoExecute/],
    ['a listed taint', node('g', opted, { taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] }), [gpuTaint], undefined],
    ['a PreferNoSchedule taint', node('p', opted, { taints: [{ key: 'soft', effect: 'PreferNoSchedule' }] }), [], undefined],
  ])('%s', (_what, n, tolerate, why) => {
    const r = nodeRefusal(n, tolerate);
    if (why) expect(r).toMatch(why);
    else expect(r).toBeUndefined();
  });
});

describe('lendableNodes', () => {
  it('needs both the selector and the admin opt-in', () => {
    const nodes = [node('a', opted), node('b', { pool: 'gpu' }), node('c', { ...opted, pool: 'cpu' })];
    expect(lendableNodes(nodes, { matchLabels: { pool: 'gpu' } }, []).map((n) => n.metadata!.name)).toEqual(['a']);
  });
});

describe('tolerationsFor', () => {
  it('tolerates the listed taints only, NoExecute with the listed tolerationSeconds', () => {
    const tainted = node('n', opted, {
      taints: [
        { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' },
        { key: 'maintenance', effect: 'NoExecute' },
        { key: 'team-b/dedicated', effect: 'NoSchedule' },
        { key: 'soft', effect: 'PreferNoSchedule' },
      ],
    });
    const tolerations = tolerationsFor(tainted, [gpuTaint, { key: 'maintenance', effect: 'NoExecute', tolerationSeconds: 300 }]);
    expect(tolerations).toEqual([
      { key: 'nvidia.com/gpu', operator: 'Equal', value: 'present', effect: 'NoSchedule' },
      { key: 'maintenance', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
    ]);
    expect(admits({ containers: [], tolerations }, tainted)).toBe(false);
    expect(tolerationsFor(tainted, [])).toEqual([]);
  });
});

describe('parseTaintRules', () => {
  it('reads key:NoSchedule and key:NoExecute:seconds', () => {
    expect(parseTaintRules(' nvidia.com/gpu:NoSchedule, maint:NoExecute:60 ', '--f')).toEqual([gpuTaint, { key: 'maint', effect: 'NoExecute', tolerationSeconds: 60 }]);
    expect(parseTaintRules('', '--f')).toEqual([]);
  });
  it.each(['gpu', 'gpu:NoExecute', 'gpu:PreferNoSchedule', 'gpu:NoSchedule:5', 'gpu:NoExecute:x', 'bad key:NoSchedule'])('refuses %s', (entry) => {
    expect(() => parseTaintRules(entry, '--peer-tolerate-taints')).toThrow(/--peer-tolerate-taints: .* must be key:NoSchedule or key:NoExecute:<seconds>/);
  });
});

describe('nodeChangeMatters', () => {
  const base: V1Node = {
    metadata: { name: 'a', resourceVersion: '1', labels: opted, annotations: { x: '1' } },
    spec: { taints: [] },
    status: { allocatable: { 'nvidia.com/gpu': '1' }, conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: new Date('2026-12-07T10:00:00Z') }] },
  };
  const heartbeat: V1Node = { ...base, metadata: { ...base.metadata, resourceVersion: '2' }, status: { ...base.status, conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: new Date('2026-12-07T10:00:10Z') }] } };

  it.each<[string, V1Node, boolean]>([
    ['a heartbeat: only the conditions and resourceVersion moved', heartbeat, false],
    ['a label', { ...heartbeat, metadata: { ...heartbeat.metadata, labels: { ...opted, pool: 'cpu' } } }, true],
    ['an annotation (reserved GPUs, our lending mark)', { ...heartbeat, metadata: { ...heartbeat.metadata, annotations: { x: '2' } } }, true],
    ['cordoned', { ...heartbeat, spec: { taints: [], unschedulable: true } }, true],
    ['a taint', { ...heartbeat, spec: { taints: [{ key: 'k', effect: 'NoSchedule' }] } }, true],
    ['allocatable', { ...heartbeat, status: { ...heartbeat.status, allocatable: { 'nvidia.com/gpu': '0' } } }, true],
    ['being deleted', { ...heartbeat, metadata: { ...heartbeat.metadata, deletionTimestamp: new Date('2026-12-07T10:00:10Z') } }, true],
  ])('%s: %s', (_name, updated, want) => {
    expect(nodeChangeMatters(updated, base)).toBe(want);
  });
});
