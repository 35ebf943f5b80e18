import { describe, expect, it } from '@jest/globals';
import type { V1Lease } from '@kubernetes/client-node';
import { CheckLeases } from './checklease.js';

/** A Lease API in memory with the API server's resourceVersion rules. */
function leaseAPI() {
  const store = new Map<string, V1Lease>();
  let rv = 0;
  const fail = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });
  const api = {
    writes: 0,
    failNext: 0,
    async readNamespacedLease({ name }: { namespace: string; name: string }): Promise<V1Lease> {
      const l = store.get(name);
      if (!l) throw fail(404);
      return structuredClone(l);
    },
    async createNamespacedLease({ body }: { namespace: string; body: V1Lease }): Promise<V1Lease> {
      if (store.has(body.metadata!.name!)) throw fail(409);
      api.writes++;
      const l = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      store.set(body.metadata!.name!, l);
      return structuredClone(l);
    },
    async replaceNamespacedLease({ name, body }: { namespace: string; name: string; body: V1Lease }): Promise<V1Lease> {
      if (api.failNext > 0) {
        api.failNext--;
        throw fail(500);
      }
      const cur = store.get(name);
      if (!cur) throw fail(404);
      if (cur.metadata?.resourceVersion !== body.metadata?.resourceVersion) throw fail(409);
      api.writes++;
      const l = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      store.set(name, l);
      return structuredClone(l);
    },
    /** Another writer changes the Lease. */
    set(name: string, spec: V1Lease['spec']) {
      const cur = store.get(name) ?? { metadata: { name, namespace: 'ctl' } };
      store.set(name, { ...cur, spec: { ...cur.spec, ...spec }, metadata: { ...cur.metadata, resourceVersion: String(++rv) } });
    },
    get: (name: string) => store.get(name),
  };
  return api;
}

const until = async (what: string, cond: () => boolean) => {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('CheckLeases', () => {
  it('creates the lease when there is none, and releases it with an empty holder', async () => {
    const api = leaseAPI();
    const leases = new CheckLeases({ api, namespace: 'ctl', identity: 'me' });
    const got = await leases.acquire('rt-1', { 'leasehold.dev/runnertarget': 'ns/a' });
    expect(got.held).toBe(true);
    expect(api.get('rt-1')?.spec?.holderIdentity).toBe('me');
    expect(api.get('rt-1')?.metadata?.annotations).toEqual({ 'leasehold.dev/runnertarget': 'ns/a' });
    if (got.held) await got.lease.release();
    expect(api.get('rt-1')?.spec?.holderIdentity).toBe('');
  });

  it('a lease another identity holds is not taken, then taken once its record stayed unchanged for its duration by our clock', async () => {
    const api = leaseAPI();
    let now = 1_000_000;
    const leases = new CheckLeases({ api, namespace: 'ctl', identity: 'me', now: () => now });
    // Its renewTime is far in the past by our clock: remote timestamps are not compared with ours.
    api.set('rt-1', { holderIdentity: 'other', leaseDurationSeconds: 30, renewTime: new Date(0) as never });
    expect(await leases.acquire('rt-1', {})).toMatchObject({ held: false, holder: 'other', retryAfterMs: 31_000 });
    now += 29_000;
    expect((await leases.acquire('rt-1', {})).held).toBe(false);
    // The holder renewed: the clock starts again.
    api.set('rt-1', { renewTime: new Date(5) as never });
    now += 29_000;
    expect((await leases.acquire('rt-1', {})).held).toBe(false);
    now += 31_000;
    const got = await leases.acquire('rt-1', {});
    expect(got.held).toBe(true);
    expect(api.get('rt-1')?.spec).toMatchObject({ holderIdentity: 'me', leaseTransitions: 1 });
    if (got.held) await got.lease.release();
  });

  it('a released lease (empty holder) is taken at once', async () => {
    const api = leaseAPI();
    api.set('rt-1', { holderIdentity: '', leaseDurationSeconds: 1 });
    const got = await new CheckLeases({ api, namespace: 'ctl', identity: 'me' }).acquire('rt-1', {});
    expect(got.held).toBe(true);
    if (got.held) await got.lease.release();
  });

  it('losing the race to write the lease means it is held elsewhere', async () => {
    const api = leaseAPI();
    const leases = new CheckLeases({ api, namespace: 'ctl', identity: 'me' });
    const read = api.readNamespacedLease;
    // Another replica writes between our read and our write.
    api.readNamespacedLease = async (args) => {
      const l = await read(args).catch(() => undefined);
      api.set('rt-1', { holderIdentity: 'other', leaseDurationSeconds: 30 });
      if (!l) throw Object.assign(new Error('HTTP 404'), { code: 404 });
      return l;
    };
    expect(await leases.acquire('rt-1', {})).toMatchObject({ held: false });
  });

  it('renews while held, and aborts the check when another writer takes the lease', async () => {
    const api = leaseAPI();
    const leases = new CheckLeases({ api, namespace: 'ctl', identity: 'me', durationMs: 60 });
    const got = await leases.acquire('rt-1', {});
    if (!got.held) throw new Error('not held');
    const writes = api.writes;
    await until('a renewal', () => api.writes > writes);
    expect(got.lease.signal.aborted).toBe(false);
    api.set('rt-1', { holderIdentity: 'other' });
    await until('the lease lost', () => got.lease.signal.aborted);
    expect(String(got.lease.signal.reason)).toMatch(/was lost/);
    await got.lease.release();
    // Not ours any more: release writes nothing over the new holder.
    expect(api.get('rt-1')?.spec?.holderIdentity).toBe('other');
  });

  it('renewals that keep failing for two thirds of the duration abort the check', async () => {
    const api = leaseAPI();
    const leases = new CheckLeases({ api, namespace: 'ctl', identity: 'me', durationMs: 60 });
    const got = await leases.acquire('rt-1', {});
    if (!got.held) throw new Error('not held');
    api.failNext = 1000;
    await until('the lease lost', () => got.lease.signal.aborted);
    await got.lease.release();
  });
});
