import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { CoordinationV1Api, V1Lease } from '@kubernetes/client-node';
import { KubeLeaseStore } from './leasestore.js';
import { LeaderElector, leaderIdentity, type LeaderElectionRecord, type LeaseStore, type StoredRecord } from './leaderelection.js';

const T0 = Date.UTC(2025, 0, 1);

class ApiError extends Error {
  constructor(readonly code: number) {
    super(`HTTP ${code}`);
  }
}

const copy = (r: LeaderElectionRecord): LeaderElectionRecord => ({
  ...r,
  acquireTime: r.acquireTime && new Date(r.acquireTime),
  renewTime: r.renewTime && new Date(r.renewTime),
});

/** One Lease in memory, with resourceVersion checks like the API server's. */
class MemoryLease {
  stored?: { record: LeaderElectionRecord; rv: number };
  writes: LeaderElectionRecord[] = [];
  private rv = 0;

  read(): StoredRecord | undefined {
    return this.stored && { record: copy(this.stored.record), resourceVersion: String(this.stored.rv) };
  }

  write(record: LeaderElectionRecord, rv?: string): StoredRecord {
    if (rv === undefined ? this.stored : !this.stored || String(this.stored.rv) !== rv) throw new ApiError(409);
    this.stored = { record: copy(record), rv: ++this.rv };
    this.writes.push(copy(record));
    return this.read()!;
  }

  /** A replica's connection to the Lease, which a test can cut or hang. */
  view(): LeaseStore & { mode: 'up' | 'down' | 'hang'; beforeUpdate?: () => void } {
    const call = <R>(fn: () => R): Promise<R> => {
      if (v.mode === 'down') return Promise.reject(new ApiError(503));
      if (v.mode === 'hang') return new Promise(() => {});
      return Promise.resolve().then(fn);
    };
    const v = {
      mode: 'up' as 'up' | 'down' | 'hang',
      beforeUpdate: undefined as (() => void) | undefined,
      get: () => call(() => this.read()),
      create: (r: LeaderElectionRecord) => call(() => this.write(r)),
      update: (r: LeaderElectionRecord, rv: string) =>
        call(() => {
          v.beforeUpdate?.();
          return this.write(r, rv);
        }),
      describe: () => 'default/test',
    };
    return v;
  }
}

function candidate(lease: MemoryLease, identity: string) {
  const store = lease.view();
  const events: string[] = [];
  let signal: AbortSignal | undefined;
  const elector = new LeaderElector({
    store,
    identity,
    onStartedLeading: (s) => {
      signal = s;
      events.push('started');
    },
    onStoppedLeading: () => events.push('stopped'),
    onNewLeader: (id) => events.push(`leader:${id}`),
  });
  const done = elector.run();
  return { elector, store, events, done, signal: () => signal };
}

const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
});
afterEach(() => {
  jest.useRealTimers();
});

describe('LeaderElector', () => {
  it('creates the Lease when there is none and leads', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    await advance(0);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.events).toEqual(['leader:a', 'started']);
    expect(a.signal()?.aborted).toBe(false);
    expect(lease.stored?.record).toEqual({ holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: new Date(T0), renewTime: new Date(T0), leaseTransitions: 0 });
  });

  it('renews every retry period, keeping acquireTime', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    await advance(6_000);
    expect(lease.stored?.record.renewTime).toEqual(new Date(T0 + 6_000));
    expect(lease.stored?.record.acquireTime).toEqual(new Date(T0));
    expect(lease.writes).toHaveLength(4); // the create, then one renewal every 2 s
    expect(a.events).toEqual(['leader:a', 'started']);
  });

  it('lets exactly one of two candidates lead while the leader renews', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    const b = candidate(lease, 'b');
    for (let t = 0; t < 60_000; t += 500) {
      await advance(500);
      expect(Number(a.elector.isLeader()) + Number(b.elector.isLeader())).toBe(1);
    }
    const [leader, follower] = a.elector.isLeader() ? [a, b] : [b, a];
    expect(follower.events).toEqual([`leader:${leader.elector.identity}`]);
    expect(lease.stored?.record.leaseTransitions).toBe(0);
  });

  it('takes over once the leader has not renewed for leaseDuration by its own clock, never overlapping', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    await advance(0);
    const b = candidate(lease, 'b');
    await advance(3_000);
    a.store.mode = 'down';
    const lastRenew = lease.stored!.record.renewTime!.getTime();
    let aStoppedAt = 0;
    let bStartedAt = 0;
    for (let t = 0; t < 30_000; t += 100) {
      await advance(100);
      expect(a.elector.isLeader() && b.elector.isLeader()).toBe(false);
      if (!aStoppedAt && !a.elector.isLeader()) aStoppedAt = Date.now();
      if (!bStartedAt && b.elector.isLeader()) bStartedAt = Date.now();
    }
    // The old leader gives up within renewDeadline (plus the wait before its round); the new one waits out leaseDuration.
    expect(aStoppedAt - lastRenew).toBeLessThanOrEqual(12_000);
    expect(bStartedAt - lastRenew).toBeGreaterThanOrEqual(15_000);
    expect(bStartedAt - lastRenew).toBeLessThanOrEqual(17_500);
    expect(a.events).toEqual(['leader:a', 'started', 'stopped']);
    expect(a.signal()?.aborted).toBe(true);
    await a.done;
    expect(b.events).toEqual(['leader:a', 'leader:b', 'started']);
    expect(lease.stored?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    expect(bStartedAt - lease.stored!.record.acquireTime!.getTime()).toBeLessThan(100);
  });

  it('judges expiry by when it saw the record change, not by the remote renewTime', async () => {
    const lease = new MemoryLease();
    // Written by a holder whose clock is a year behind: by timestamps, long expired.
    lease.write({ holderIdentity: 'skewed', leaseDurationSeconds: 15, renewTime: new Date(T0 - 365 * 86_400_000), leaseTransitions: 3 });
    const b = candidate(lease, 'b');
    await advance(10_000);
    // The holder renews (its timestamp still a year behind); b's 15 s start again.
    const rv = lease.read()!.resourceVersion;
    lease.write({ ...lease.read()!.record, renewTime: new Date(T0 - 365 * 86_400_000 + 10_000) }, rv);
    await advance(14_000);
    expect(b.elector.isLeader()).toBe(false);
    await advance(4_000);
    expect(b.elector.isLeader()).toBe(true);
    expect(lease.stored?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 4 });
  });

  it('treats a 409 on update as a lost race', async () => {
    const lease = new MemoryLease();
    lease.write({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 2 });
    const b = candidate(lease, 'b');
    b.store.beforeUpdate = () => {
      b.store.beforeUpdate = undefined;
      const rv = lease.read()!.resourceVersion;
      lease.write({ holderIdentity: 'c', leaseDurationSeconds: 15, renewTime: new Date(Date.now()), leaseTransitions: 3 }, rv);
    };
    await advance(0);
    expect(b.elector.isLeader()).toBe(false);
    expect(lease.stored?.record.holderIdentity).toBe('c');
    await advance(2_500);
    expect(b.elector.isLeader()).toBe(false);
    expect(b.events).toEqual(['leader:c']);
  });

  it('rides out an API outage shorter than renewDeadline', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    await advance(2_000);
    a.store.mode = 'down';
    await advance(7_000);
    a.store.mode = 'up';
    await advance(5_000);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.events).toEqual(['leader:a', 'started']);
    expect(lease.stored?.record.renewTime!.getTime()).toBeGreaterThan(T0 + 9_000);
  });

  it('stops leading at renewDeadline even when a request hangs', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    await advance(0);
    a.store.mode = 'hang';
    await advance(11_999);
    expect(a.elector.isLeader()).toBe(true);
    await advance(1);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.events).toEqual(['leader:a', 'started', 'stopped']);
  });

  it('release hands the Lease to a waiting candidate at once', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    await advance(0);
    const b = candidate(lease, 'b');
    await advance(4_100);
    const released = a.elector.release();
    await advance(0);
    expect(await released).toBe(true);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.events).toEqual(['leader:a', 'started', 'stopped']);
    expect(lease.writes.at(-1)).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 0 });
    await advance(2_400);
    expect(b.elector.isLeader()).toBe(true);
    expect(lease.stored?.record).toMatchObject({ holderIdentity: 'b', leaseDurationSeconds: 15, leaseTransitions: 1 });
    await a.done;
  });

  it('release by a follower writes nothing', async () => {
    const lease = new MemoryLease();
    candidate(lease, 'a');
    await advance(0);
    const b = candidate(lease, 'b');
    await advance(1_000);
    const writes = lease.writes.length;
    expect(await b.elector.release()).toBe(true);
    await b.done;
    expect(lease.writes).toHaveLength(writes);
    expect(b.events).toEqual(['leader:a']);
  });

  it('release returns within renewDeadline when the API server hangs', async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, 'a');
    await advance(0);
    a.store.mode = 'hang';
    await advance(2_500);
    let result: boolean | undefined;
    void a.elector.release().then((r) => (result = r));
    await advance(9_999);
    expect(a.elector.isLeader()).toBe(false);
    expect(result).toBeUndefined();
    await advance(1);
    expect(result).toBe(false);
    await a.done;
  });

  it('refuses timings that would let two replicas lead', () => {
    const store = new MemoryLease().view();
    expect(() => new LeaderElector({ store, identity: 'a', leaseDurationMs: 10_000, renewDeadlineMs: 10_000 })).toThrow(/leaseDuration/);
    expect(() => new LeaderElector({ store, identity: 'a', renewDeadlineMs: 2_000, retryPeriodMs: 2_000 })).toThrow(/renewDeadline/);
    expect(() => new LeaderElector({ store, identity: '' })).toThrow(/identity/);
  });

  it('names identities hostname_uuid', () => {
    expect(leaderIdentity('pod-1')).toMatch(/^pod-1_[0-9a-f-]{36}$/);
  });
});

describe('KubeLeaseStore', () => {
  function fakeApi() {
    const calls: { verb: string; body?: V1Lease }[] = [];
    let current: unknown;
    const api = {
      readNamespacedLease: async () => {
        calls.push({ verb: 'read' });
        if (!current) throw new ApiError(404);
        return current;
      },
      createNamespacedLease: async ({ body }: { body: V1Lease }) => {
        calls.push({ verb: 'create', body });
        return (current = wire(body, '1'));
      },
      replaceNamespacedLease: async ({ body }: { body: V1Lease }) => {
        calls.push({ verb: 'replace', body });
        return (current = wire(body, String(Number(body.metadata!.resourceVersion) + 1)));
      },
    };
    // What client-node hands back: MicroTime fields stay the strings on the wire.
    const wire = (body: V1Lease, rv: string) => ({ ...JSON.parse(JSON.stringify(body)), metadata: { ...body.metadata, resourceVersion: rv } });
    return { api: api as unknown as CoordinationV1Api, calls, setCurrent: (l: unknown) => (current = l) };
  }

  it('reads a missing Lease as undefined and writes MicroTime with six fractional digits', async () => {
    const { api, calls } = fakeApi();
    const store = new KubeLeaseStore(api, 'ns', 'ctl');
    expect(await store.get()).toBeUndefined();
    const at = new Date(Date.UTC(2025, 0, 1, 12, 0, 0, 123));
    const created = await store.create({ holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: at, renewTime: at, leaseTransitions: 0 });
    expect(JSON.stringify(calls[1]!.body!.spec!.renewTime)).toBe('"2025-01-01T12:00:00.123000Z"');
    expect(calls[1]!.body!.metadata).toEqual({ namespace: 'ns', name: 'ctl' });
    expect(created).toEqual({ resourceVersion: '1', record: { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: at, renewTime: at, leaseTransitions: 0 } });
  });

  it('replaces only the record, with the resourceVersion, keeping the rest of the Lease', async () => {
    const { api, calls, setCurrent } = fakeApi();
    setCurrent({ metadata: { namespace: 'ns', name: 'ctl', resourceVersion: '7', labels: { app: 'leasehold' } }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: '2025-01-01T12:00:00.000000Z', strategy: 'OldestEmulationVersion' } });
    const store = new KubeLeaseStore(api, 'ns', 'ctl');
    const got = await store.get();
    expect(got?.record.renewTime).toEqual(new Date(Date.UTC(2025, 0, 1, 12)));
    await store.update({ ...got!.record, holderIdentity: 'b', leaseTransitions: 1 }, '7');
    const body = calls.at(-1)!.body!;
    expect(body.metadata).toEqual({ namespace: 'ns', name: 'ctl', resourceVersion: '7', labels: { app: 'leasehold' } });
    expect(body.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1, strategy: 'OldestEmulationVersion' });
  });
});
