import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { LEADER_POD_LABEL, LeaderPodLabel, type PodLabelClient, type PodRef } from './leaderpod.js';

function client(failures: unknown[]): PodLabelClient & { calls: Record<string, string | null>[] } {
  const calls: Record<string, string | null>[] = [];
  return {
    calls,
    async patchLabels(_pod: PodRef, labels: Record<string, string | null>) {
      calls.push(labels);
      const err = failures.shift();
      if (err) throw err;
    },
  };
}

const pod = { namespace: 'leasehold-system', name: 'leasehold-abc' };
const quiet = pino({ level: 'silent' });
const httpError = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

describe('LeaderPodLabel', () => {
  it('sets the label while leading and removes it (null in a merge patch) when not', async () => {
    const c = client([]);
    const label = new LeaderPodLabel(c, pod, quiet, { retryMs: 1 });
    expect(await label.mark(true)).toBe(true);
    expect(await label.mark(false)).toBe(true);
    expect(c.calls).toEqual([{ [LEADER_POD_LABEL]: 'true' }, { [LEADER_POD_LABEL]: null }]);
  });

  it('retries a transient failure', async () => {
    const c = client([httpError(500), httpError(429)]);
    expect(await new LeaderPodLabel(c, pod, quiet, { retryMs: 1 }).mark(true)).toBe(true);
    expect(c.calls).toHaveLength(3);
  });

  it.each([403, 404, 401])('gives up at once on %i and never throws', async (code) => {
    const c = client([httpError(code)]);
    expect(await new LeaderPodLabel(c, pod, quiet, { retryMs: 1 }).mark(true)).toBe(false);
    expect(c.calls).toHaveLength(1);
  });

  it('gives up after its attempts without throwing', async () => {
    const c = client(Array.from({ length: 10 }, () => new Error('connection refused')));
    expect(await new LeaderPodLabel(c, pod, quiet, { retryMs: 1, attempts: 3 }).mark(false)).toBe(false);
    expect(c.calls).toHaveLength(3);
  });
});
