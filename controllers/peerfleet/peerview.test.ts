import { describe, expect, it } from '@jest/globals';
import type { V1Job } from '@kubernetes/client-node';
import { PEER_WRITE_MS, PeerWrites } from './peerview.js';

const job = (rv: string, uid = 'u1', note = ''): V1Job => ({ metadata: { name: `job-${uid}`, uid, resourceVersion: rv, annotations: note ? { note } : {} } });
const T = 1_000_000;

describe('PeerWrites', () => {
  it.each<[string, Array<[V1Job, V1Job]>, V1Job[], number, string[]]>([
    ['the watch still shows the version our write replaced: our answer stands in', [[job('1'), job('2', 'u1', 'claimed')]], [job('1')], T, ['2']],
    ['the watch caught up: its own Job', [[job('1'), job('2', 'u1', 'claimed')]], [job('2')], T, ['2']],
    ['someone wrote after us: the watch, never our older answer', [[job('1'), job('2', 'u1', 'claimed')]], [job('3')], T, ['3']],
    ['two writes in a row (claim, then write-back) while the watch lags: the last answer', [[job('1'), job('2')], [job('2'), job('3', 'u1', 'running')]], [job('1')], T, ['3']],
    ['a write decided on a stale Job does not make an older one stand in', [[job('1'), job('2')], [job('5'), job('6')]], [job('1')], T, ['1']],
    ['past its time the watch is trusted again', [[job('1'), job('2')]], [job('1')], T + PEER_WRITE_MS + 1, ['1']],
    ['other Jobs are left as the watch has them', [[job('1'), job('2')]], [job('1'), job('7', 'u2')], T, ['2', '7']],
  ])('%s', (_name, writes, watched, now, versions) => {
    const w = new PeerWrites();
    for (const [before, after] of writes) w.record(before, after, T);
    expect(w.view(watched, now)!.map((j) => j.metadata?.resourceVersion)).toEqual(versions);
  });

  it('an unread queue stays unread, and a Job gone from the watch is forgotten', () => {
    const w = new PeerWrites();
    w.record(job('1'), job('2'), T);
    expect(w.view(undefined, T)).toBeUndefined();
    expect(w.view([], T)).toEqual([]);
    expect(w.view([job('1')], T)!.map((j) => j.metadata?.resourceVersion)).toEqual(['1']);
  });
});
