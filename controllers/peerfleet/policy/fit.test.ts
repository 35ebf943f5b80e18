import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1Node, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { chooseJob, freeAllocatable, GPU, jobRequests, OrderedQueue, podRequests, shortfall } from './fit.js';

const node: V1Node = {
  metadata: { name: 'gpu-1', labels: { 'gpu.product': 'H100' } },
  spec: { taints: [{ key: 'nvidia.com/gpu', effect: 'NoSchedule' }] },
  status: { allocatable: { cpu: '32', memory: '256Gi', [GPU]: '8', pods: '110' } },
};
const c = (requests: Record<string, string>, limits?: Record<string, string>) => ({ name: 'c', image: 'i', resources: { requests, ...(limits ? { limits } : {}) } });
const job = (name: string, second: number, spec: Partial<V1PodSpec>, extra: Partial<V1Job['spec']> = {}, meta: Partial<V1Job['metadata']> = {}): V1Job => ({
  metadata: { name, creationTimestamp: new Date(Date.UTC(2026, 11, 3, 9, 0, second)), ...meta },
  spec: { template: { spec: { containers: [], ...spec } }, ...extra },
});
const pod = (nodeName: string | undefined, requests: Record<string, string>, phase = 'Running'): V1Pod => ({
  metadata: { name: 'p' },
  spec: { ...(nodeName ? { nodeName } : {}), containers: [c(requests)] },
  status: { phase },
});

describe('podRequests', () => {
  it.each<[string, V1PodSpec, Record<string, bigint>]>([
    ['containers add up', { containers: [c({ cpu: '1' }), c({ cpu: '500m', memory: '1Gi' })] }, { pods: 1000n, cpu: 1500n, memory: 1073741824000n }],
    ['limits stand in for missing requests', { containers: [c({}, { [GPU]: '2' })] }, { pods: 1000n, [GPU]: 2000n }],
    ['a large init container wins', { containers: [c({ cpu: '1' })], initContainers: [c({ cpu: '4' })] }, { pods: 1000n, cpu: 4000n }],
    ['a sidecar runs beside the containers', { containers: [c({ cpu: '1' })], initContainers: [{ ...c({ cpu: '1' }), restartPolicy: 'Always' }] }, { pods: 1000n, cpu: 2000n }],
    ['overhead is added', { containers: [c({ cpu: '1' })], overhead: { cpu: '250m' } }, { pods: 1000n, cpu: 1250n }],
  ])('%s', (_name, spec, want) => {
    expect(podRequests(spec)).toEqual({ ok: true, requests: want });
  });

  it('names the field of a quantity it cannot read', () => {
    expect(podRequests({ containers: [c({ cpu: 'lots' })] })).toEqual({ ok: false, message: 'containers[0].resources.requests[cpu] is "lots", not a quantity' });
  });
});

describe('jobRequests', () => {
  it('counts every pod the Job runs at once', () => {
    const j = job('j', 0, { containers: [c({ [GPU]: '2' })] }, { parallelism: 3, completions: 2 });
    expect(jobRequests(j)).toEqual({ ok: true, requests: { pods: 2000n, [GPU]: 4000n } });
  });
});

describe('freeAllocatable', () => {
  it('counts a mirror pinned to the node before the scheduler binds it', () => {
    const mirror: V1Pod = { ...pod(undefined, { [GPU]: '4' }, 'Pending'), metadata: { name: 'm', labels: { 'leasehold.dev/node': 'gpu-1' } } };
    const elsewhere: V1Pod = { ...mirror, metadata: { name: 'n', labels: { 'leasehold.dev/node': 'gpu-2' } } };
    expect(freeAllocatable(node, [mirror, elsewhere])[GPU]).toBe(4000n);
  });

  it('subtracts the pods bound to the node that still run, and withheld GPUs', () => {
    const pods = [pod('gpu-1', { cpu: '4', [GPU]: '2' }), pod('gpu-1', { cpu: '8' }, 'Succeeded'), pod('other', { cpu: '8' }), pod(undefined, { cpu: '8' }, 'Pending')];
    const free = freeAllocatable(node, pods, 1);
    expect(free).toMatchObject({ cpu: 28000n, [GPU]: 5000n, pods: 109000n });
  });
});

describe('shortfall', () => {
  it('says what is short and what is free', () => {
    expect(shortfall({ [GPU]: 4000n, memory: 0n, cpu: 1000n }, { [GPU]: 2000n, cpu: 8000n })).toEqual(['nvidia.com/gpu 4 (free 2)']);
    expect(shortfall({ 'example.com/fpga': 1000n }, {})).toEqual(['example.com/fpga 1 (free 0)']);
  });
});

describe('chooseJob', () => {
  const free = freeAllocatable(node, [], 0);
  it.each<[string, V1Job[], string | RegExp]>([
    ['the oldest that fits', [job('newer', 5, { containers: [c({ [GPU]: '1' })] }), job('older', 1, { containers: [c({ [GPU]: '1' })] })], 'older'],
    ['skips an older Job that does not fit', [job('big', 0, { containers: [c({ [GPU]: '16' })] }), job('small', 1, { containers: [c({ [GPU]: '4' })] })], 'small'],
    ['same second: by name', [job('b', 0, {}), job('a', 0, {})], 'a'],
    ['skips a claimed, refused, suspended or finished Job', [
      job('claimed', 0, {}, {}, { annotations: { 'leasehold.dev/claimed-by': 'x/y/z' } }),
      job('refused', 1, {}, {}, { annotations: { 'leasehold.dev/refused': 'hostPath' } }),
      job('suspended', 2, {}, { suspend: true }),
      { ...job('done', 3, {}), status: { conditions: [{ type: 'Complete', status: 'True' }] } },
      job('free', 4, {}),
    ], 'free'],
    ['the peer Job selects our node by its labels', [job('elsewhere', 0, { nodeSelector: { 'gpu.product': 'A100' } }), job('here', 1, { nodeSelector: { 'gpu.product': 'H100' } })], 'here'],
    ['our node taints do not stop a Job: its mirror tolerates them', [job('plain', 0, {})], 'plain'],
    ['nothing queued', [], /^the peer queue has no Job to run$/],
    ['none fits: says the nearest', [job('big', 0, { containers: [c({ [GPU]: '16' })] })], /^1 queued Job\(s\), none fits: big needs nvidia.com\/gpu 16 \(free 8\)$/],
  ])('%s', (_name, queue, want) => {
    const choice = chooseJob(queue, node, free);
    if (typeof want === 'string') expect(choice).toMatchObject({ kind: 'claim', job: { metadata: { name: want } } });
    else expect(choice).toMatchObject({ kind: 'none', message: expect.stringMatching(want) });
  });

  it.each<[string, V1Job[], Record<string, string>]>([
    ['a node with no GPU free, every Job asking one', [job('a', 0, { containers: [c({ [GPU]: '1' })] }), job('b', 1, { containers: [c({ [GPU]: '2' })] })], { [GPU]: '0' }],
    ['a node with one GPU free, the Jobs asking 2 and 4', [job('a', 0, { containers: [c({ [GPU]: '2' })] }), job('b', 1, { containers: [c({ [GPU]: '4' })] })], { [GPU]: '1' }],
    ['room for one of them', [job('a', 0, { containers: [c({ [GPU]: '4' })] }), job('b', 1, { containers: [c({ [GPU]: '2' })] })], { [GPU]: '2' }],
  ])('the queue ordered once per pass chooses as the plain list does: %s', (_name, queue, allocatable) => {
    const room = freeAllocatable({ ...node, status: { allocatable: { ...node.status!.allocatable, ...allocatable } } }, [], 0);
    const ordered = new OrderedQueue(queue);
    expect(chooseJob(ordered, node, room)).toEqual(chooseJob(queue, node, room));
    const first = chooseJob(ordered, node, freeAllocatable(node, [], 0));
    if (first.kind === 'claim') {
      ordered.remove(first.job);
      expect(ordered.entries.map((e) => e.job)).not.toContain(first.job);
    }
  });
});
