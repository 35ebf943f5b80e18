import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1JobStatus } from '@kubernetes/client-node';
import { recover, type Recovery } from './recovery.js';

const START = new Date('2026-12-03T09:00:00Z');
const COMPLETE: V1JobStatus = { startTime: START, completionTime: START, conditions: [{ type: 'SuccessCriteriaMet', status: 'True' }, { type: 'Complete', status: 'True' }] };
const peer = (uid: string, status: V1JobStatus = {}, node = 'gpu-1'): V1Job => ({
  metadata: { name: `job-${uid}`, namespace: 'queue', uid, annotations: { 'leasehold.dev/claimed-by': `ours/peer/${node}` } },
  spec: { template: {} },
  status,
});
const mirror = (uid: string, status: V1JobStatus = { active: 1 }): V1Job => ({
  metadata: { name: `lh-peer-${uid}`, namespace: 'lending', labels: { 'leasehold.dev/peer-job-uid': uid } },
  spec: { template: {} },
  status,
});
const kinds = (r: Recovery[]) => r.map((x) => `${x.kind}:${'peerJob' in x ? x.peerJob.metadata!.uid : x.mirror.metadata!.labels!['leasehold.dev/peer-job-uid']}`);

describe('recover', () => {
  const yes = () => true;
  const no = () => false;
  const recorded = () => true;
  it.each<[string, V1Job[], V1Job[], () => boolean, string[]]>([
    ['a running pair: write back', [peer('a', { startTime: START, active: 1 })], [mirror('a')], yes, ['writeBack:a']],
    ['a finished mirror the peer has not heard of: write back', [peer('a', { startTime: START })], [mirror('a', COMPLETE)], yes, ['writeBack:a']],
    ['both finished: the mirror may go', [peer('a', COMPLETE)], [mirror('a', COMPLETE)], yes, ['deleteMirror:a']],
    ['claimed, never started, the node may take it: start', [peer('a')], [], yes, ['start:a']],
    ['claimed, never started, the node may not: release', [peer('a')], [], no, ['release:a']],
    ['started here, mirror gone: report lost, never run again', [peer('a', { startTime: START, active: 1 })], [], yes, ['reportLost:a']],
    ['finished and cleaned up: nothing', [peer('a', COMPLETE)], [], yes, []],
    ['a running mirror of a Job the peer deleted: left to finish', [], [mirror('a')], yes, ['orphan:a']],
    ['a finished mirror of a Job the peer deleted: may go', [], [mirror('a', COMPLETE)], yes, ['deleteMirror:a']],
    ['a Job whose claim the peer removed counts as not ours', [{ ...peer('a'), metadata: { uid: 'a', name: 'job-a', annotations: {} } }], [mirror('a')], yes, ['orphan:a']],
  ])('%s', (_name, claims, mirrors, mayStart, want) => {
    expect(kinds(recover({ claims, mirrors, mayStart, recorded }))).toEqual(want);
  });

  it.each<[string, V1Job, V1Job[], () => boolean, string[]]>([
    ['a claim our record never made, never started: reported, not run', peer('a'), [], yes, ['forged:a']],
    ['the same, on a node that may not take it: reported, not released', peer('a'), [], no, ['forged:a']],
    ['an unrecorded claim with a running mirror of ours is still written back', peer('a', { startTime: START, active: 1 }), [mirror('a')], yes, ['writeBack:a']],
  ])('%s', (_name, claim, mirrors, mayStart, want) => {
    expect(kinds(recover({ claims: [claim], mirrors, mayStart, recorded: () => false }))).toEqual(want);
  });

  it('asks whether the claimed node may start the Job', () => {
    const asked: string[] = [];
    const result = recover({ claims: [peer('a', {}, 'gpu-3')], mirrors: [], mayStart: (node) => (asked.push(node), true), recorded: () => true });
    expect(asked).toEqual(['gpu-3']);
    expect(result).toEqual([expect.objectContaining({ kind: 'start', node: 'gpu-3' })]);
  });

  it('a second pass over the same world plans the same, so a restart mid-way is safe', () => {
    const input = { claims: [peer('a'), peer('b', { startTime: START }), peer('c', COMPLETE)], mirrors: [mirror('c', COMPLETE), mirror('d')], mayStart: () => true, recorded: () => true };
    expect(recover(input)).toEqual(recover(input));
  });
});
