// HA: two controller replicas with leader election in one namespace. Lambda
// launches are queued (one per 3 s per account, on the emulator and in the
// controller), the leader is SIGKILLed while they go out, the other replica
// takes over within 20 s, and no machine is doubled or leaked.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { lambdaLedger, report, runLifecycles, sleep, until, type Restartable } from '../support/chaos.js';
import { getJSON } from '../support/kube.js';
import { harness, processesLeft, type Harness } from './harness.js';

const SOAK = process.env.LEASEHOLD_SOAK === '1';
let h: Harness;
let replicas: Restartable[] = [];

beforeAll(async () => {
  h = await harness('ha', { emulator: { launchIntervalMs: 3000 } });
  // No launch answer is delayed here (no faults injected): a launch request
  // can land only within its own round trip, so a short settle is enough.
  const flags = ['--lambda-launch-interval', '3s', '--lambda-launch-settle', '10s'];
  replicas = [h.controller(flags), h.controller(flags)];
  await Promise.all(replicas.map((r) => r.up()));
}, 120_000);

afterAll(async () => {
  await h?.cleanup(replicas);
  const left = h ? processesLeft(h, replicas) : [];
  if (left.length) throw new Error(`processes left: ${left.join(', ')}`);
});

const isLeader = async (r: Restartable) => (r.alive() ? (await r.ctl!.metric('leasehold_leader').catch(() => 0)) === 1 : false);

describe('two replicas, leader killed during launches', () => {
  it('the follower takes over within 20 s; every Lease converges; nothing doubled or leaked', async () => {
    const rounds = SOAK ? 3 : 1;
    const n = SOAK ? 10 : 6;
    const failovers: number[] = [];
    let total = 0;
    for (let round = 0; round < rounds; round++) {
      await until('one leader', async () => (await Promise.all(replicas.map(isLeader))).filter(Boolean).length === 1, 40_000, 200);
      const names = Array.from({ length: n }, (_, i) => `ha-${round}-${i}`);
      total += n;
      const run = runLifecycles(h.api, h.ns, names, { where: 'cpus>=1', offer: h.lambdaOffer }, 240_000);
      // Kill once launches are under way: two sent, the rest still queued.
      const account = h.emu.accounts.find((a) => a.apiKey === h.apiKey)!.id;
      const launched0 = h.emu.launches.filter((l) => l.account === account).length;
      await until('two launches sent', () => h.emu.launches.filter((l) => l.account === account).length >= launched0 + 2, 60_000, 20);
      const leaderIdx = (await isLeader(replicas[0]!)) ? 0 : 1;
      const leader = replicas[leaderIdx]!;
      const follower = replicas[1 - leaderIdx]!;
      const lease = await getJSON(h.kubectl, ['-n', h.ns, 'leases.coordination.k8s.io', 'leasehold-controller']);
      const queued = (await h.api.list(h.ns)).filter((l) => names.includes(l.metadata.name) && l.status?.phase !== 'Ready' && l.status?.phase !== 'Idle').length;
      const killedAt = Date.now();
      await leader.kill();
      const reconcilesBefore = await follower.ctl!.metric('leasehold_reconcile_total');
      await until('follower leads', () => isLeader(follower), 30_000, 50);
      const ledAt = Date.now();
      // Taking over means acting: its first reconcile after winning the election.
      await until('follower reconciles', async () => (await follower.ctl!.metric('leasehold_reconcile_total')) > reconcilesBefore, 30_000, 50);
      const tookMs = Date.now() - killedAt;
      failovers.push(tookMs);
      const after = await getJSON(h.kubectl, ['-n', h.ns, 'leases.coordination.k8s.io', 'leasehold-controller']);
      expect(after.spec.holderIdentity).not.toBe(lease.spec.holderIdentity);
      process.stdout.write(`ha: round ${round}: leader killed with ${queued} of ${n} Leases not yet Ready; follower led after ${ledAt - killedAt} ms, reconciled after ${tookMs} ms\n`);
      // The killed replica comes back as the new follower.
      await leader.up();
      await run;
      await sleep(100);
    }
    await until('Lambda instances terminated', () => h.emu.instances(h.apiKey).every((i) => i.status === 'terminated'), 15_000, 100).catch(() => undefined);
    const led = lambdaLedger(h.emu, h.apiKey);
    report('ha', {
      leases: total,
      kills: replicas.reduce((a, r) => a + r.kills, 0),
      failoverMs: failovers.join(','),
      launches: h.emu.launches.length,
      instances: led.instances,
      leaked: led.leaked,
      doubled: led.doubled,
    });
    expect(led.detail).toEqual([]);
    for (const ms of failovers) expect(ms).toBeLessThan(20_000);
  }, SOAK ? 1_000_000 : 240_000);
});
