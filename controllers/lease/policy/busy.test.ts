import { describe, it, expect } from '@jest/globals';
import { BUSY_KINDS } from '../../../src/api/index.js';
import { busyOf, nextUsage, type WorkSeen } from './busy.js';

const seen = (jobs: number, sessions: number, gpuProcesses: number): WorkSeen => ({ jobs, sessions, gpuProcesses });

describe('busyOf', () => {
  it.each([
    ['nothing running', seen(0, 0, 0), undefined, 0, 'none'],
    ['a job, by default', seen(1, 0, 0), undefined, 1, '1 job'],
    ['an open shell, by default', seen(0, 1, 0), undefined, 1, '1 session'],
    ['a detached GPU process, by default', seen(0, 0, 1), undefined, 1, '1 GPU process'],
    ['all of them, in a fixed order', seen(2, 3, 1), ['gpuProcesses', 'jobs', 'sessions'] as const, 6, '2 jobs, 3 sessions, 1 GPU process'],
    ['sessions the Offer does not count', seen(0, 2, 0), ['jobs', 'gpuProcesses'] as const, 0, 'none'],
    ['only jobs counted', seen(1, 2, 2), ['jobs'] as const, 1, '1 job'],
    ['an empty list counts everything', seen(0, 0, 2), [] as const, 2, '2 GPU processes'],
  ])('%s', (_name, s, busyWhen, busy, summary) => {
    expect(busyOf(s, busyWhen)).toMatchObject({ busy, summary });
  });
});

describe('nextUsage', () => {
  const at = '2026-01-01T00:00:10Z';
  const prev = { jobs: 0, sessions: 0, gpuProcesses: 0, busy: 'none', at: '2026-01-01T00:00:00Z' };

  it('writes nothing when an idle check sees what the last one saw', () => {
    expect(nextUsage(prev, seen(0, 0, 0), BUSY_KINDS, 'none', false, at)).toBeUndefined();
  });

  it('writes nothing when only a kind busyWhen leaves out changed, and records it with the next write', () => {
    expect(nextUsage(prev, seen(0, 3, 0), ['jobs', 'gpuProcesses'], 'none', false, at)).toBeUndefined();
    expect(nextUsage(prev, seen(1, 3, 0), ['jobs', 'gpuProcesses'], '1 job', true, at)).toEqual({ jobs: 1, sessions: 3, gpuProcesses: 0, busy: '1 job', at });
  });

  it('writes the counts when they change, or when work is seen', () => {
    expect(nextUsage(undefined, seen(0, 0, 0), BUSY_KINDS, 'none', false, at)).toEqual({ ...prev, at });
    expect(nextUsage(prev, seen(0, 1, 0), BUSY_KINDS, 'none', false, at)).toEqual({ jobs: 0, sessions: 1, gpuProcesses: 0, busy: 'none', at });
    const busy = { jobs: 0, sessions: 1, gpuProcesses: 0, busy: '1 session', at: '2026-01-01T00:00:00Z' };
    expect(nextUsage(busy, seen(0, 1, 0), BUSY_KINDS, '1 session', true, at)).toEqual({ ...busy, at });
  });
});
