import { describe, expect, it } from '@jest/globals';
import type { V1Node, V1PodSpec } from '@kubernetes/client-node';
import { admits, placementRefusal } from './placement.js';

const node: V1Node = {
  metadata: { name: 'gpu-1', labels: { pool: 'gpu', 'gpu.count': '8', zone: 'a' } },
  spec: { taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }, { key: 'soft', effect: 'PreferNoSchedule' }] },
};
const gpuToleration = { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' };
const affinity = (terms: object[]) => ({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } });
const spec = (s: Partial<V1PodSpec>): V1PodSpec => ({ containers: [], tolerations: [gpuToleration], ...s });

describe('placementRefusal', () => {
  it.each<[string, V1PodSpec | undefined, string | undefined]>([
    ['no rules but the taint tolerated', spec({}), undefined],
    ['the taint not tolerated', { containers: [] }, 'taint nvidia.com/gpu=present:NoSchedule is not tolerated'],
    ['tolerated by value', spec({ tolerations: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] }), undefined],
    ['wrong value', spec({ tolerations: [{ key: 'nvidia.com/gpu', value: 'absent', effect: 'NoSchedule' }] }), expect.stringContaining('not tolerated') as never],
    ['wrong effect', spec({ tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoExecute' }] }), expect.stringContaining('not tolerated') as never],
    ['tolerates everything', spec({ tolerations: [{ operator: 'Exists' }] }), undefined],
    ['nodeSelector matches', spec({ nodeSelector: { pool: 'gpu' } }), undefined],
    ['nodeSelector misses', spec({ nodeSelector: { pool: 'cpu' } }), 'nodeSelector pool=cpu does not match'],
    ['bound elsewhere', spec({ nodeName: 'other' }), 'bound to node other'],
    ['bound here', spec({ nodeName: 'gpu-1' }), undefined],
    ['affinity In', spec({ affinity: affinity([{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }]) }), undefined],
    ['affinity NotIn', spec({ affinity: affinity([{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }]) }), 'required node affinity does not match'],
    ['affinity Exists / DoesNotExist', spec({ affinity: affinity([{ matchExpressions: [{ key: 'pool', operator: 'Exists' }, { key: 'spot', operator: 'DoesNotExist' }] }]) }), undefined],
    ['affinity Gt', spec({ affinity: affinity([{ matchExpressions: [{ key: 'gpu.count', operator: 'Gt', values: ['4'] }] }]) }), undefined],
    ['affinity Lt', spec({ affinity: affinity([{ matchExpressions: [{ key: 'gpu.count', operator: 'Lt', values: ['4'] }] }]) }), expect.any(String) as never],
    ['affinity terms are ORed', spec({ affinity: affinity([{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['z'] }] }, { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['gpu-1'] }] }]) }), undefined],
    ['an empty term matches nothing', spec({ affinity: affinity([{}]) }), 'required node affinity does not match'],
    ['preferred affinity is not required', spec({ affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } } }), undefined],
  ])('%s', (_name, podSpec, want) => {
    expect(placementRefusal(podSpec, node)).toEqual(want);
  });

  it('a node without taints admits a pod without tolerations', () => {
    expect(admits({ containers: [] }, { metadata: { name: 'plain' } })).toBe(true);
  });
});
