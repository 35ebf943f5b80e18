import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1JobStatus } from '@kubernetes/client-node';
import type { LedgerEntry, PeerLedger } from '../../../src/api/index.js';
import { EARLIER_KEPT, LEDGER_KEPT, OTHER_NODES, ledgerEntry, ledgerMismatches, recordLedger, unrecorded, withinEarlierBound, withLedger } from './ledger.js';

const UID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const T = (type: string) => ({ type, status: 'True' });
const START = '2026-12-03T09:00:00Z';
const END = '2026-12-03T09:10:00Z';
const NOW = Date.parse('2026-12-03T10:00:00Z');
const GRACE = 120_000;
const complete = (start = START, end = END): V1JobStatus => ({ startTime: new Date(start), completionTime: new Date(end), conditions: [T('SuccessCriteriaMet'), T('Complete')] });

const mirror = (n: number, status: V1JobStatus, gpus = '2', node = 'gpu-1'): V1Job => ({
  metadata: {
    name: `lh-peer-${UID(n)}`,
    labels: { 'leasehold.dev/peerfleet': 'gpu', 'leasehold.dev/node': node, 'leasehold.dev/peer-job-uid': UID(n) },
    annotations: { 'leasehold.dev/peer-job': `queue/job-${n}` },
  },
  spec: { template: { spec: { containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': gpus } } }] } } },
  status,
});
const peer = (n: number, status: V1JobStatus, gpus = '2'): V1Job => ({
  metadata: { name: `job-${n}`, uid: UID(n), annotations: { 'leasehold.dev/claimed-by': 'cluster1/lend.gpu/gpu-1' } },
  spec: { template: { spec: { containers: [{ name: 'c', image: 'i', resources: { limits: { 'nvidia.com/gpu': gpus } } }] } } },
  status,
});
const entry = (n: number, more: Partial<LedgerEntry> = {}): LedgerEntry => ({ uid: UID(n), job: `job-${n}`, node: 'gpu-1', gpus: 2, startedAt: START, completedAt: END, ...more });

describe('ledgerEntry', () => {
  it.each<[string, V1Job, LedgerEntry | undefined]>([
    ['a complete mirror: our start and completion, node and GPUs', mirror(1, complete()), entry(1)],
    ['still running: nothing yet', mirror(1, { startTime: new Date(START), active: 1 }), undefined],
    ['failed: nothing (neither side bills a failed Job)', mirror(1, { startTime: new Date(START), conditions: [T('FailureTarget'), T('Failed')] }), undefined],
    ['complete without completionTime: nothing', mirror(1, { startTime: new Date(START), conditions: [T('Complete')] }), undefined],
    ['unreadable requests: nothing', mirror(1, complete(), 'two'), undefined],
  ])('%s', (_name, m, want) => {
    expect(ledgerEntry(m)).toEqual(want);
  });
});

describe('recordLedger', () => {
  it('records each completed mirror once, by peer Job UID, however often it is seen', () => {
    const once = recordLedger(undefined, [mirror(1, complete()), mirror(2, { active: 1, startTime: new Date(START) })]);
    expect(once).toEqual({ entries: [entry(1)] });
    // A pass after a restart sees the same mirror again (and a duplicate of it): the ledger is unchanged, the same object.
    expect(recordLedger(once, [mirror(1, complete()), mirror(1, complete())])).toBe(once);
    // The mirror deleted after the write-back: the entry stays.
    expect(recordLedger(once, [])).toBe(once);
  });

  it('folds the oldest entries into per-node totals past its bound, never one whose mirror still exists', () => {
    const start: PeerLedger = { entries: [entry(1, { completedAt: '2026-12-03T09:01:00Z' }), entry(2, { node: 'gpu-2', completedAt: '2026-12-03T09:02:00Z' })] };
    const next = recordLedger(start, [mirror(1, complete(START, '2026-12-03T09:01:00Z')), mirror(3, complete())], 2)!;
    expect(next.entries.map((e) => e.uid)).toEqual([UID(1), UID(3)]);
    expect(next.earlier).toEqual([{ node: 'gpu-2', gpuSeconds: 240, jobs: 1 }]);
    const after = recordLedger(next, [mirror(4, complete())], 2)!;
    expect(after.entries.map((e) => e.uid)).toEqual([UID(3), UID(4)]);
    expect(after.earlier).toEqual([{ node: 'gpu-1', gpuSeconds: 120, jobs: 1 }, { node: 'gpu-2', gpuSeconds: 240, jobs: 1 }]);
  });
});

describe('recordLedger past its bound', () => {
  it('never holds more entries than its bound: where more mirrors completed than it can hold, the newest wait for room', () => {
    const at = (m: number) => complete(START, `2026-12-03T09:0${m}:00Z`);
    const start: PeerLedger = { entries: [entry(1, { completedAt: '2026-12-03T09:01:00Z' }), entry(2, { completedAt: '2026-12-03T09:02:00Z' })] };
    // Every mirror still exists, so none of the two may be folded: of the three new ones, the oldest fits.
    const all = [mirror(1, at(1)), mirror(2, at(2)), mirror(3, at(3)), mirror(4, at(4)), mirror(5, at(5))];
    const next = recordLedger(start, all, 3)!;
    expect(next.entries.map((e) => e.uid)).toEqual([UID(1), UID(2), UID(3)]);
    expect([...unrecorded(next, all)]).toEqual([UID(4), UID(5)]);
    // Mirrors 1 and 2 deleted: their entries fold, and the two that waited are recorded.
    const later = recordLedger(next, all.slice(2), 3)!;
    expect(later.entries.map((e) => e.uid)).toEqual([UID(3), UID(4), UID(5)]);
    expect(later.earlier).toEqual([{ node: 'gpu-1', gpuSeconds: 2 * 60 + 2 * 120, jobs: 2 }]);
    expect(unrecorded(later, all.slice(2)).size).toBe(0);
  });
});

describe('ledgerMismatches', () => {
  it.each<[string, V1Job[], number, object[]]>([
    ['the peer record agrees', [peer(1, complete())], NOW, []],
    ['a second off agrees (both sides write whole seconds)', [peer(1, complete(START, '2026-12-03T09:10:01Z'))], NOW, []],
    ['the peer deleted the Job', [], NOW, [{ uid: UID(1), ledgerGPUSeconds: 1200, reason: 'the peer Job is gone from the peer namespace' }]],
    ['the peer moved completionTime earlier', [peer(1, complete(START, '2026-12-03T09:05:00Z'))], NOW,
      [{ ledgerGPUSeconds: 1200, peerGPUSeconds: 600, reason: 'the peer record says 2 GPU from 2026-12-03T09:00:00Z to 2026-12-03T09:05:00Z; our mirror ran 2 GPU from 2026-12-03T09:00:00Z to 2026-12-03T09:10:00Z' }]],
    ['the peer moved startTime later', [peer(1, complete('2026-12-03T09:09:00Z', END))], NOW, [{ peerGPUSeconds: 120 }]],
    ['the peer lowered the GPUs', [peer(1, complete(), '1')], NOW, [{ peerGPUSeconds: 600 }]],
    ['the peer marked it failed', [peer(1, { startTime: new Date(START), conditions: [T('Failed')] })], NOW, [{ reason: expect.stringContaining('cannot be measured: the Job failed') }]],
    ['the write-back has not reached the peer yet: no difference within the grace', [peer(1, { startTime: new Date(START), active: 1 })], Date.parse(END) + GRACE, []],
    ['still not Complete past the grace', [peer(1, { startTime: new Date(START), active: 1 })], Date.parse(END) + GRACE + 1, [{ reason: 'the peer Job is not Complete, though our mirror completed' }]],
  ])('%s', (_name, peerJobs, now, want) => {
    expect(ledgerMismatches([entry(1)], peerJobs, now, GRACE)).toEqual(want.map((w) => expect.objectContaining({ job: 'job-1', node: 'gpu-1', ...w })));
  });
});

describe('withLedger', () => {
  const acc = { gpuSeconds: 600, amountUSD: 0.333333, jobs: 1, unmeasured: 0 };
  it('shows our ledger beside the peer records, with the difference', () => {
    const mism = ledgerMismatches([entry(1)], [peer(1, complete(START, '2026-12-03T09:05:00Z'))], NOW, GRACE);
    expect(withLedger(acc, [entry(1)], { gpuSeconds: 100, jobs: 2 }, mism, 2)).toMatchObject({
      gpuSeconds: 600,
      ledger: { gpuSeconds: 1300, amountUSD: 0.722222, jobs: 3 },
      mismatched: 1,
      mismatchedJobs: [{ job: 'job-1', uid: UID(1), ledgerGPUSeconds: 1200, peerGPUSeconds: 600 }],
    });
  });
  it('no difference: no mismatch fields, and an old one is cleared', () => {
    const out = withLedger({ ...acc, mismatched: 1, mismatchedJobs: [] }, [], undefined, [], 2);
    expect(out).toEqual({ ...acc, ledger: { gpuSeconds: 0, amountUSD: 0, jobs: 0 } });
  });
});

describe('the per-node totals stay within their bound', () => {
  const total = (node: string, jobs: number) => ({ node, gpuSeconds: jobs * 100, jobs });

  it.each<[string, ReturnType<typeof total>[], number, string[]]>([
    ['within the bound: all kept, by name', [total('b', 1), total('a', 2)], 3, ['a', 'b']],
    ['past it: the nodes with the fewest jobs are summed under *', [total('a', 5), total('b', 1), total('c', 2), total('d', 9)], 3, ['*', 'a', 'd']],
    ['an earlier * takes the newly folded ones in', [total('*', 4), total('a', 5), total('b', 1), total('c', 2)], 3, ['*', 'a', 'c']],
  ])('%s', (_name, totals, kept, nodes) => {
    const sum = (ts: ReturnType<typeof total>[]) => ts.reduce((a, t) => [a[0]! + t.gpuSeconds, a[1]! + t.jobs], [0, 0]);
    const out = withinEarlierBound(totals.map((t) => ({ ...t })), kept);
    expect(out.map((t) => t.node)).toEqual(nodes);
    expect(sum(out)).toEqual(sum(totals));
  });

  it('a ledger whose nodes keep changing names never holds more node totals than the schema allows', () => {
    // Each round a mirror on a new node completes and its mirror is gone: its entry is folded into that node's totals.
    let ledger: PeerLedger | undefined;
    for (let n = 0; n < LEDGER_KEPT + EARLIER_KEPT + 40; n++) {
      ledger = recordLedger(ledger, [mirror(n, complete(), '1', `node-${n}`)]);
    }
    const earlier = ledger?.earlier ?? [];
    expect(earlier.length).toBeLessThanOrEqual(EARLIER_KEPT);
    expect(earlier.filter((t) => t.node === OTHER_NODES)).toHaveLength(1);
    expect(earlier.reduce((a, t) => a + t.jobs, 0) + (ledger?.entries.length ?? 0)).toBe(LEDGER_KEPT + EARLIER_KEPT + 40);
  });
});
