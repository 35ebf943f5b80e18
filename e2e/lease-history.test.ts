// History: ended Leases (Released, Failed) stay listed, at most
// --history-limit per namespace (the most recent), for at most
// --history-max-age; active Leases are never pruned.
import { describe, it, expect } from '@jest/globals';
import { getJSON, waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const MAX_AGE_S = 25;
const fx = leaseSuite('history', { controllerArgs: ['--history-limit', '3', '--history-max-age', `${MAX_AGE_S}s`] });

const listed = async () => {
  const list = await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev']);
  return new Map<string, any>(list.items.map((l: any) => [l.metadata.name, l.status]));
};

describe('ended Lease history', () => {
  it('keeps the most recent --history-limit ended Leases, drops them after --history-max-age, and never prunes an active one', async () => {
    const box = await fx.offer('box', { ...sshdCommands(), idleTimeout: '10m', maxLifetime: '1h' });
    const failing = await fx.offer('fail', sshdCommands('SSHD_MACHINE_FAIL_ACQUIRE=1'));
    await fx.lease('active', { where: 'cpus>=1', offer: box });
    const active = await fx.waitPhase('active', 'Ready');

    const ends: Record<string, number> = {};
    for (let i = 1; i <= 5; i++) {
      await fx.lease(`ended-${i}`, { where: 'cpus>=1', offer: failing });
      const st = await fx.waitPhase(`ended-${i}`, 'Failed', 30_000);
      expect(st.reason).toBe('AcquireFailed');
      ends[`ended-${i}`] = Date.parse(st.releasedAt);
      // releasedAt has whole seconds: the next one ends in a later second.
      await new Promise((r) => setTimeout(r, 1100));
    }

    const kept = await waitFor('only the 3 most recent ended Leases left', async () => {
      const now = await listed();
      return !now.has('ended-1') && !now.has('ended-2') ? now : undefined;
    }, 10_000, 250);
    expect([...kept.keys()].sort()).toEqual(['active', 'ended-3', 'ended-4', 'ended-5']);
    expect(['Ready', 'Idle']).toContain(kept.get('active').phase);

    const t0 = Date.now();
    const gone: Record<string, number> = {};
    await waitFor('every ended Lease pruned after the max age', async () => {
      const now = await listed();
      for (const n of ['ended-3', 'ended-4', 'ended-5']) if (!now.has(n) && gone[n] === undefined) gone[n] = Date.now();
      return Object.keys(gone).length === 3 ? now : undefined;
    }, (MAX_AGE_S + 20) * 1000, 250);
    const after = await listed();
    expect([...after.keys()]).toEqual(['active']);
    expect(['Ready', 'Idle']).toContain(after.get('active').phase);
    for (const n of Object.keys(gone)) {
      const age = (gone[n]! - ends[n]!) / 1000;
      // Never before the max age (releasedAt is rounded down to the second), and soon after it.
      expect(age).toBeGreaterThanOrEqual(MAX_AGE_S - 1);
      expect(age).toBeLessThan(MAX_AGE_S + 10);
    }
    process.stdout.write(`history: pruned ${Object.keys(gone).map((n) => `${n} at ${((gone[n]! - ends[n]!) / 1000).toFixed(1)}s`).join(', ')} after it ended (max age ${MAX_AGE_S}s); waited ${Date.now() - t0} ms\n`);

    const del = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'active', '--timeout=60s']);
    expect(del.code).toBe(0);
    expect(fx.sshdFor(active.leaseID)).toBe('');
  });
});
