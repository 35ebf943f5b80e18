// Which Offer serves a Lease, maxLeases, and acquire output that breaks the
// provider rules (no JSON, over 16 KiB, a local socket): fails and releases.
import { describe, it, expect } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { getJSON, waitFor } from './support/kube.js';
import { BAD_TARGET_PROVIDER as bad, SSHD_PROVIDER as sshd } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const fx = leaseSuite('sched', { maxLeases: 1 });

const offer = (name: string, acquire: string[], release: string[], pricePerHour?: number, gpu?: string) =>
  fx.offer(name, { acquire, release, shape: { os: 'linux', arch: 'amd64', cpus: 1, ...(gpu ? { gpu } : {}) }, pricePerHour });
const lease = (name: string, where: string, offerName?: string) => fx.lease(name, { where, offer: offerName });
const status = (name: string) => fx.status(name);
const waitPhase = (name: string, want: string, ms?: number) => fx.waitPhase(name, want, ms);

describe('scheduling and provider output rules', () => {
  it('chooses the cheapest matching Offer, a priced one before an unpriced one, and holds maxLeases', async () => {
    const release = [sshd, 'release'];
    await offer('unpriced', [sshd, 'acquire'], release, undefined, 'T4');
    const cheap = await offer('cheap', [sshd, 'acquire'], release, 0.5, 'T4');
    await offer('dear', [sshd, 'acquire'], release, 3, 'T4');
    // The machines are real sshd boxes without GPUs; the facts check will fail
    // them, which is fine here: the choice is made before the machine exists.
    await lease('first', `gpu=t4`);
    const first = await waitFor('first scheduled', async () => (await status('first'))?.offer, 30_000);
    expect(first).toBe(cheap);
    await waitPhase('first', 'Failed');

    // maxLeases=1: while one Lease is active, the next waits with MaxLeases.
    const box = await offer('box', [sshd, 'acquire'], release, 0.1);
    await lease('one', 'cpus>=1', box);
    await waitPhase('one', 'Ready');
    const boxStatus = await waitFor('Offer counts its active Lease', async () => {
      const o = await getJSON(fx.kubectl, ['offers.leasehold.dev', box]);
      return o?.status?.activeLeases === 1 ? o.status : undefined;
    }, 10_000);
    expect(boxStatus.conditions.find((c: any) => c.type === 'Ready').status).toBe('True');
    await lease('two', 'cpus>=1', box);
    const waiting = await waitFor('two waits', async () => ((await status('two'))?.reason === 'MaxLeases' ? status('two') : undefined), 20_000);
    expect(waiting.phase).toBe('Pending');
    expect(waiting.message).toMatch(/maxLeases is 1/);
    await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'one', '--timeout=60s']);
    await waitPhase('two', 'Ready');
    await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'two', '--timeout=60s']);
  });

  for (const mode of ['nojson', 'huge', 'socket']) {
    it(`fails and releases when acquire output breaks the rules (${mode})`, async () => {
      const o = await offer(`bad-${mode}`, [bad, 'acquire', mode], [bad, 'release']);
      await lease(`bad-${mode}`, 'cpus>=1', o);
      const st = await waitPhase(`bad-${mode}`, 'Failed');
      expect(st.reason).toBe('InvalidTarget');
      expect(existsSync(join(fx.machines, 'released'))).toBe(true);
      expect(readFileSync(join(fx.machines, 'released'), 'utf8')).toContain(st.leaseID);
    });
  }
});
