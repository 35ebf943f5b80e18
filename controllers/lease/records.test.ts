import { describe, it, expect } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { adoptedMarkerFor, KubeRecordStore, type LeaseRecord } from './records.js';

const httpError = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

/** Secrets of one namespace with the API server's answers: 404, 409 on create of an existing name or a stale resourceVersion. */
function secretsAPI() {
  const stored = new Map<string, V1Secret>();
  let rv = 0;
  const calls: string[] = [];
  const api = {
    async readNamespacedSecret({ name }: { name: string }) {
      calls.push(`read ${name}`);
      const s = stored.get(name);
      if (!s) throw httpError(404);
      return structuredClone(s);
    },
    async createNamespacedSecret({ body }: { body: V1Secret }) {
      calls.push(`create ${body.metadata!.name}`);
      if (stored.has(body.metadata!.name!)) throw httpError(409);
      const s = { ...body, metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      stored.set(body.metadata!.name!, s);
      return structuredClone(s);
    },
    async replaceNamespacedSecret({ name, body }: { name: string; body: V1Secret }) {
      calls.push(`replace ${name}`);
      const cur = stored.get(name);
      if (!cur) throw httpError(404);
      if (body.metadata?.resourceVersion !== cur.metadata?.resourceVersion) throw httpError(409);
      const s = { ...body, metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      stored.set(name, s);
      return structuredClone(s);
    },
    async deleteNamespacedSecret({ name }: { name: string }) {
      calls.push(`delete ${name}`);
      if (!stored.delete(name)) throw httpError(404);
      return {};
    },
    async listNamespacedSecret({ labelSelector }: { labelSelector: string }) {
      calls.push('list');
      const want = labelSelector.split(',').map((t) => t.split('='));
      return { items: [...stored.values()].filter((s) => want.every(([k, v]) => s.metadata?.labels?.[k!] !== undefined && (v === undefined || s.metadata.labels[k!] === v))) };
    },
  };
  return { api: api as never, stored, calls, bumpBehind: (name: string) => (stored.get(name)!.metadata!.resourceVersion = String(++rv)) };
}

const record = (uid: string, extra: Partial<LeaseRecord> = {}): LeaseRecord => ({
  uid,
  namespace: 'team-a',
  name: 'train',
  offer: 'box',
  leaseID: uid.slice(0, 8),
  machineName: `leasehold-${uid.slice(0, 8)}`,
  release: { provider: 'command', command: ['/bin/release'] },
  expiresAt: '2026-12-03T12:00:00Z',
  ...extra,
});

describe('KubeRecordStore', () => {
  it('keeps a record in a labelled Secret named after the Lease UID, readable by a fresh store', async () => {
    const k = secretsAPI();
    await new KubeRecordStore(k.api, 'leasehold-system').put(record('0123abcd-1'));
    const secret = k.stored.get('leasehold-lease-0123abcd-1')!;
    expect(secret.metadata?.labels).toEqual({
      'app.kubernetes.io/managed-by': 'leasehold',
      'app.kubernetes.io/component': 'lease-record',
      'leasehold.dev/lease-uid': '0123abcd-1',
      'leasehold.dev/lease-namespace': 'team-a',
      'leasehold.dev/lease-name': 'train',
    });
    expect(await new KubeRecordStore(k.api, 'leasehold-system').get('0123abcd-1')).toEqual(record('0123abcd-1'));
  });

  it('replaces a record it wrote, from memory, without reading it again', async () => {
    const k = secretsAPI();
    const store = new KubeRecordStore(k.api, 'leasehold-system');
    await store.put(record('u1'));
    await store.put(record('u1', { providerState: '{"pid":1}' }));
    expect(await store.get('u1')).toMatchObject({ providerState: '{"pid":1}' });
    expect(k.calls).toEqual(['create leasehold-lease-u1', 'replace leasehold-lease-u1']);
  });

  it('replaces a record another process wrote, or one changed since it was read', async () => {
    const k = secretsAPI();
    await new KubeRecordStore(k.api, 'leasehold-system').put(record('u1'));
    const store = new KubeRecordStore(k.api, 'leasehold-system');
    await store.put(record('u1', { providerState: 'a' }));
    k.bumpBehind('leasehold-lease-u1');
    await store.put(record('u1', { providerState: 'b' }));
    expect(await new KubeRecordStore(k.api, 'leasehold-system').get('u1')).toMatchObject({ providerState: 'b' });
  });

  it('lists records only (not the adoption marker or other Secrets), deletes idempotently', async () => {
    const k = secretsAPI();
    const store = new KubeRecordStore(k.api, 'leasehold-system');
    await store.put(record('u1'));
    await store.put(record('u2', { name: 'x'.repeat(80) }));
    expect(await store.adopted()).toBe(false);
    await store.markAdopted();
    await store.markAdopted();
    expect(await store.adopted()).toBe(true);
    k.stored.set('other', { metadata: { name: 'other', labels: { 'app.kubernetes.io/managed-by': 'leasehold' } } });
    expect((await store.list()).map((r) => r.uid).sort()).toEqual(['u1', 'u2']);
    // A Lease name too long for a label value is in the record and the annotation only.
    expect(k.stored.get('leasehold-lease-u2')!.metadata?.labels?.['leasehold.dev/lease-name']).toBeUndefined();
    await store.delete('u1');
    await store.delete('u1');
    expect(await store.get('u1')).toBeUndefined();
  });

  it('asks the API server about a Lease without a record once, until the Lease leaves the cache', async () => {
    const k = secretsAPI();
    const store = new KubeRecordStore(k.api, 'leasehold-system');
    expect(await store.get('u1')).toBeUndefined();
    expect(await store.get('u1')).toBeUndefined();
    await store.put(record('u1'));
    expect(await store.get('u1')).toEqual(record('u1'));
    store.evict('u1');
    expect(await store.get('u1')).toEqual(record('u1'));
    expect(k.calls).toEqual(['read leasehold-lease-u1', 'create leasehold-lease-u1', 'read leasehold-lease-u1']);
  });

  it('keeps one adoption marker per installation sharing the namespace', async () => {
    const k = secretsAPI();
    const all = new KubeRecordStore(k.api, 'leasehold-system', adoptedMarkerFor(undefined));
    const teamA = new KubeRecordStore(k.api, 'leasehold-system', adoptedMarkerFor('team-a'));
    await all.markAdopted();
    expect(await teamA.adopted()).toBe(false);
    expect([...k.stored.keys()]).toEqual(['leasehold-lease-records']);
  });
});
