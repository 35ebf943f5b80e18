import { describe, expect, it } from '@jest/globals';
import { V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { holderLeaseName, holding, type HoldingInput } from './holder.js';

const NOW = Date.parse('2026-12-03T10:00:00Z');
const lease = (holderIdentity: string, renewedAgoS: number, leaseDurationSeconds = 60): V1Lease => ({
  spec: { holderIdentity, leaseDurationSeconds, renewTime: new V1MicroTime(NOW - renewedAgoS * 1000) },
});
const input = (over: Partial<HoldingInput>): HoldingInput => ({ lease: undefined, me: 'lending/a', node: 'gpu-1', lendingTo: [], now: NOW, ...over });

describe('holding', () => {
  it.each<[string, Partial<HoldingInput>, string, string]>([
    ['no Lease yet', {}, 'free', ''],
    ['an empty holder', { lease: lease('', 0) }, 'free', ''],
    ['ours', { lease: lease('lending/a', 5) }, 'mine', ''],
    ['another PeerFleet, renewed', { lease: lease('lending/b', 30) }, 'held', 'lending/b'],
    ['another PeerFleet, expired', { lease: lease('lending/b', 61) }, 'free', ''],
    ['expired, but its mirror still runs on the node', { lease: lease('lending/b', 3600), lendingTo: ['lending/b'] }, 'held', 'lending/b'],
    ['no Lease at all, another mirror runs there', { lendingTo: ['lending/b'] }, 'held', 'lending/b'],
    ['only our own mirrors run there', { lease: lease('lending/a', 3600), lendingTo: ['lending/a'] }, 'mine', ''],
  ])('%s: %s', (_name, over, kind, by) => {
    const h = holding(input(over));
    expect(h.kind).toBe(kind);
    if (by) expect(h).toMatchObject({ by, message: `node gpu-1 lends to PeerFleet ${by}; this PeerFleet waits until that session ends` });
  });

  it('names the Lease after the node', () => {
    expect(holderLeaseName('gpu-1')).toBe('leasehold-peer-gpu-1');
    const long = 'n'.repeat(250);
    expect(holderLeaseName(long)).toMatch(/^leasehold-peer-[0-9a-f]{32}$/);
    expect(holderLeaseName(long)).not.toBe(holderLeaseName(`${long}x`));
  });
});
