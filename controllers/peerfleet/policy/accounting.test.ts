import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1JobStatus } from '@kubernetes/client-node';
import { account, amountUSD, measure } from './accounting.js';

const NOW = Date.parse('2026-12-03T12:00:00Z');
const START = '2026-12-03T09:00:00Z';
const T = (type: string) => ({ type, status: 'True' });
const done = (start: string | undefined, end: string | undefined): V1JobStatus => ({
  ...(start ? { startTime: new Date(start) } : {}),
  ...(end ? { completionTime: new Date(end) } : {}),
  conditions: [T('SuccessCriteriaMet'), T('Complete')],
});
const job = (name: string, node: string, status: V1JobStatus, gpus = '2', parallelism?: number): V1Job => ({
  metadata: { name, annotations: { 'leasehold.dev/claimed-by': `ours/peer/${node}` } },
  spec: { ...(parallelism ? { parallelism } : {}), template: { spec: { containers: [{ name: 'm', resources: { limits: { 'nvidia.com/gpu': gpus } } }] } } },
  status,
});

describe('measure', () => {
  it.each<[string, V1Job, object]>([
    ['a complete Job: seconds × GPUs', job('a', 'gpu-1', done(START, '2026-12-03T09:10:00Z')), { kind: 'measured', gpus: 2, seconds: 600, gpuSeconds: 1200, node: 'gpu-1' }],
    ['every pod that ran at once', job('a', 'gpu-1', done(START, '2026-12-03T09:00:10Z'), '1', 3), { kind: 'measured', gpus: 3, gpuSeconds: 30 }],
    ['a CPU-only Job measures zero GPU-seconds', job('a', 'gpu-1', done(START, '2026-12-03T09:00:10Z'), '0'), { kind: 'measured', gpuSeconds: 0 }],
    ['still running: not counted yet', job('a', 'gpu-1', { startTime: new Date(START), active: 1 }), { kind: 'unfinished' }],
    ['no completionTime', job('a', 'gpu-1', done(START, undefined)), { kind: 'unmeasured', reason: 'no completionTime' }],
    ['no startTime', job('a', 'gpu-1', done(undefined, '2026-12-03T09:10:00Z')), { kind: 'unmeasured', reason: 'no startTime' }],
    ['clock skew', job('a', 'gpu-1', done('2026-12-03T09:10:00Z', START)), { kind: 'unmeasured', reason: 'clock skew: completionTime before startTime' }],
    ['failed', job('a', 'gpu-1', { startTime: new Date(START), conditions: [T('FailureTarget'), T('Failed')] }), { kind: 'unmeasured', reason: expect.stringContaining('failed') }],
    ['unreadable requests', job('a', 'gpu-1', done(START, '2026-12-03T09:10:00Z'), 'two'), { kind: 'unmeasured', reason: expect.stringContaining('requests cannot be read') }],
  ])('%s', (_name, j, want) => {
    expect(measure(j)).toMatchObject(want);
  });

  it('falls back to the host annotation for the node', () => {
    const j: V1Job = { metadata: { name: 'a', annotations: { 'leasehold.dev/host': 'ours/gpu-7' } }, spec: { template: {} }, status: done(START, '2026-12-03T09:00:01Z') };
    expect(measure(j)).toMatchObject({ node: 'gpu-7' });
  });
});

describe('account', () => {
  it('sums per host and per PeerFleet, to the second, with the unmeasured apart', () => {
    const jobs = [
      job('a', 'gpu-1', done(START, '2026-12-03T09:10:00Z')),
      job('b', 'gpu-1', done(START, '2026-12-03T09:00:01Z')),
      job('c', 'gpu-2', done(START, '2026-12-03T10:00:00Z'), '1'),
      job('d', 'gpu-2', done('2026-12-03T09:10:00Z', START)),
      job('e', 'gpu-2', { startTime: new Date(START), active: 1 }),
    ];
    const { total, hosts } = account(jobs, 2, NOW);
    expect(total).toEqual({
      gpuSeconds: 1200 + 2 + 3600,
      amountUSD: amountUSD(4802, 2),
      jobs: 3,
      unmeasured: 1,
      unmeasuredJobs: [{ job: 'd', reason: 'clock skew: completionTime before startTime' }],
      lastComputedAt: '2026-12-03T12:00:00Z',
    });
    expect(hosts.get('gpu-1')).toMatchObject({ gpuSeconds: 1202, jobs: 2, unmeasured: 0 });
    expect(hosts.get('gpu-1')).not.toHaveProperty('unmeasuredJobs');
    expect(hosts.get('gpu-2')).toMatchObject({ gpuSeconds: 3600, amountUSD: 2, jobs: 1, unmeasured: 1 });
  });

  it('lists at most 32 unmeasured Jobs but counts them all', () => {
    const jobs = Array.from({ length: 40 }, (_, i) => job(`j${String(i).padStart(2, '0')}`, 'gpu-1', done(START, undefined)));
    const { total } = account(jobs, 1, NOW);
    expect(total.unmeasured).toBe(40);
    expect(total.unmeasuredJobs).toHaveLength(32);
  });

  it('nothing lent is zero', () => {
    expect(account([], 3, NOW).total).toMatchObject({ gpuSeconds: 0, amountUSD: 0, jobs: 0, unmeasured: 0 });
  });
});

describe('amountUSD', () => {
  it.each([
    [3600, 2, 2],
    [1, 3.6, 0.001],
    [7, 2.5, 0.004861],
  ])('%s GPU-seconds at %s/h is %s', (s, price, want) => expect(amountUSD(s, price)).toBe(want));
});
