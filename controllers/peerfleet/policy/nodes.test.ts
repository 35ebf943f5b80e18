import { describe, expect, it } from '@jest/globals';
import type { V1Node } from '@kubernetes/client-node';
import { admits } from './placement.js';
import { lendableNodes, nodeChangeMatters, nodeRefusal, notOptedInNodes, parseTaintRules, sharedNodes, tolerationsFor, type TaintRule } from './nodes.js';

const NS = 'team-a';
const FOR_NS = { 'leasehold.dev/lendable-namespaces': NS };
const node = (name: string, labels: Record<string, string> = {}, spec: V1Node['spec'] = {}, annotations: Record<string, string> = FOR_NS): V1Node => ({ metadata: { name, labels, annotations }, spec });
const opted = { 'leasehold.dev/lendable': 'true', pool: 'gpu' };
const gpuTaint: TaintRule = { key: 'nvidia.com/gpu', effect: 'NoSchedule' };
const forNamespaces = (value: string | undefined) => node('n', opted, {}, value === undefined ? {} : { 'leasehold.dev/lendable-namespaces': value });

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
    const r = nodeRefusal(n, NS, tolerate);
    if (why) expect(r).toMatch(why);
    else expect(r).toBeUndefined();
  });
});

describe('nodeRefusal: the namespaces a node is opted in for', () => {
  const annotate = (ns: string, value = ns) => `kubectl annotate node n leasehold.dev/lendable-namespaces=${value}`;
  it.each<[string, string | undefined, string, string | RegExp | undefined]>([
    ['the namespace listed', 'team-a', 'team-a', undefined],
    ['one of several listed', 'ml,team-a,batch', 'team-a', undefined],
    ['*: every namespace', '*', 'team-b', undefined],
    ['* among names', 'ml, *', 'team-b', undefined],
    ['a list with spaces and empty entries', ' ml ,  team-a ,, ', 'team-a', undefined],
    ['no annotation', undefined, 'team-a', `node n is opted in for lending (leasehold.dev/lendable=true) but for no namespace: it has no leasehold.dev/lendable-namespaces annotation, so PeerFleets of namespace team-a do not lend it; an admin opts it in for team-a with ${annotate('team-a')} (or * for every namespace)`],
    ['another namespace only', 'team-b', 'team-a', `node n is not opted in for lending to PeerFleets of namespace team-a: its leasehold.dev/lendable-namespaces annotation does not list namespace team-a; an admin appends team-a to that comma-separated list: ${annotate('team-a', '<the list>,team-a')} --overwrite`],
    ['a namespace that only starts with ours', 'team-ab,team', 'team-a', /does not list namespace team-a/],
    ['an empty annotation', '', 'team-a', `node n is not opted in for lending to PeerFleets of namespace team-a: its leasehold.dev/lendable-namespaces annotation names no namespace; an admin opts it in for team-a with ${annotate('team-a')} --overwrite`],
    ['a malformed entry, ignored', 'Team-A', 'team-a', /annotation names no namespace; its entry "Team-A" is not a namespace name \(DNS-1123 labels\) and is ignored; .*=team-a --overwrite$/],
    ['malformed entries beside a valid one', 'ml, team_a, team-a.x, -x, y-, ab/c', 'team-a', /does not list namespace team-a; its entries "team_a", "team-a.x", "-x", and 2 more are not namespace names \(DNS-1123 labels\) and are ignored; an admin appends team-a/],
    ['a name longer than a namespace name', `${'a'.repeat(64)}`, 'a'.repeat(64), /is not a namespace name/],
    ['a valid entry beside malformed ones still counts', 'Team-B, team-a', 'team-a', undefined],
  ])('%s', (_what, value, ns, why) => {
    const r = nodeRefusal(forNamespaces(value), ns, []);
    if (typeof why === 'string') expect(r).toBe(why);
    else if (why) expect(r).toMatch(why);
    else expect(r).toBeUndefined();
  });

  it('never names the other namespaces the node is opted in for (a tenant reads the message)', () => {
    expect(nodeRefusal(forNamespaces('secret-team, other-team'), 'team-a', [])).not.toMatch(/secret-team|other-team/);
  });

  it('the admin label, the control-plane, cordon and taint rules still come first', () => {
    expect(nodeRefusal(node('n', { pool: 'gpu' }, {}, { 'leasehold.dev/lendable-namespaces': '*' }), NS, [])).toMatch(/has no leasehold.dev\/lendable=true label/);
    expect(nodeRefusal(node('n', opted, { unschedulable: true }, {}), NS, [])).toMatch(/is cordoned/);
    expect(nodeRefusal(node('n', opted, { taints: [{ key: 'team-b/dedicated', effect: 'NoSchedule' }] }, {}), NS, [])).toMatch(/taint team-b\/dedicated/);
  });
});

describe('lendableNodes', () => {
  it('needs both the selector and the admin opt-in for the namespace', () => {
    const nodes = [
      node('a', opted),
      node('b', { pool: 'gpu' }),
      node('c', { ...opted, pool: 'cpu' }),
      node('d', opted, {}, { 'leasehold.dev/lendable-namespaces': 'team-b' }),
      node('e', opted, {}, {}),
      node('f', opted, {}, { 'leasehold.dev/lendable-namespaces': '*' }),
    ];
    const names = (ns: string) => lendableNodes(nodes, { matchLabels: { pool: 'gpu' } }, ns, []).map((n) => n.metadata!.name);
    expect(names('team-a')).toEqual(['a', 'f']);
    expect(names('team-b')).toEqual(['d', 'f']);
    expect(names('team-c')).toEqual(['f']);
  });
});

describe('notOptedInNodes', () => {
  it('names the selected nodes opted in for lending but not for the namespace, and no other refused node', () => {
    const nodes = [
      node('lent', opted),
      node('other-team', opted, {}, { 'leasehold.dev/lendable-namespaces': 'team-b' }),
      node('no-annotation', opted, {}, {}),
      node('not-selected', { ...opted, pool: 'cpu' }, {}, {}),
      node('no-label', { pool: 'gpu' }, {}, {}),
      node('cordoned', opted, { unschedulable: true }, {}),
      node('tainted', opted, { taints: [{ key: 'team-b/dedicated', effect: 'NoSchedule' }] }, {}),
    ];
    const got = notOptedInNodes(nodes, { matchLabels: { pool: 'gpu' } }, NS, []);
    expect([...got.keys()]).toEqual(['other-team', 'no-annotation']);
    expect(got.get('other-team')).toMatch(/node other-team is not opted in for lending to PeerFleets of namespace team-a/);
    expect(got.get('no-annotation')).toMatch(/kubectl annotate node no-annotation leasehold.dev\/lendable-namespaces=team-a/);
  });
});

describe('sharedNodes', () => {
  const gpu = { matchLabels: { pool: 'gpu' } };
  const lent = [node('a', opted, {}, { 'leasehold.dev/lendable-namespaces': 'team-a,team-b' }), node('b', opted), node('c', opted, {}, { 'leasehold.dev/lendable-namespaces': '*' })];
  it('counts another PeerFleet only where the node is opted in for its namespace too', () => {
    expect([...sharedNodes(lent, [{ selector: gpu, namespace: 'team-b' }], [])]).toEqual(['a', 'c']);
    expect([...sharedNodes(lent, [{ selector: gpu, namespace: 'team-c' }], [])]).toEqual(['c']);
    expect([...sharedNodes(lent, [{ selector: { matchLabels: { pool: 'cpu' } }, namespace: 'team-b' }], [])]).toEqual([]);
    expect([...sharedNodes(lent, [], [])]).toEqual([]);
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
    ['the namespaces it is opted in for', { ...heartbeat, metadata: { ...heartbeat.metadata, annotations: { x: '1', 'leasehold.dev/lendable-namespaces': 'team-a' } } }, true],
    ['cordoned', { ...heartbeat, spec: { taints: [], unschedulable: true } }, true],
    ['a taint', { ...heartbeat, spec: { taints: [{ key: 'k', effect: 'NoSchedule' }] } }, true],
    ['allocatable', { ...heartbeat, status: { ...heartbeat.status, allocatable: { 'nvidia.com/gpu': '0' } } }, true],
    ['being deleted', { ...heartbeat, metadata: { ...heartbeat.metadata, deletionTimestamp: new Date('2026-12-07T10:00:10Z') } }, true],
  ])('%s: %s', (_name, updated, want) => {
    expect(nodeChangeMatters(updated, base)).toBe(want);
  });
});
