import { describe, it, expect } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { adoptedMarkerFor, KubeRecordStore, type LeaseRecord } from './leaserecords.js';

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

const INSTALLATION = { id: 'inst0001', secret: 'leasehold-release-a-installation', legacyMarker: adoptedMarkerFor(undefined) };
const store0 = (k: ReturnType<typeof secretsAPI>, installation = INSTALLATION) => new KubeRecordStore(k.api, 'leasehold-system', installation);
/** The installation ID Secret of a release from before lease records (no adoption noted). */
const installationSecret = (k: ReturnType<typeof secretsAPI>, name = INSTALLATION.secret) =>
  k.stored.set(name, { metadata: { name, resourceVersion: '0' }, data: { id: Buffer.from('inst0001').toString('base64') } });

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
  it('after one list of every record, answers each Lease from memory: no read per Lease, and what is written since is known', async () => {
    const k = secretsAPI();
    await store0(k).put(record('u-held'));
    const store = store0(k);
    expect(await store.get('u-before')).toBeUndefined();
    expect(k.calls.filter((c) => c.startsWith('read'))).toHaveLength(1);
    await store.list();
    const reads = k.calls.length;
    expect(await store.get('u-held')).toMatchObject({ uid: 'u-held' });
    expect(await store.get('u-none')).toBeUndefined();
    await store.put(record('u-new'));
    expect(await store.get('u-new')).toMatchObject({ uid: 'u-new' });
    expect(k.calls.slice(reads).filter((c) => c.startsWith('read'))).toEqual([]);
  });

  it('keeps a record in a labelled Secret named after the Lease UID, readable by a fresh store', async () => {
    const k = secretsAPI();
    await store0(k).put(record('0123abcd-1'));
    const secret = k.stored.get('leasehold-lease-0123abcd-1')!;
    expect(secret.metadata?.labels).toEqual({
      'app.kubernetes.io/managed-by': 'leasehold',
      'app.kubernetes.io/component': 'lease-record',
      'leasehold.dev/lease-uid': '0123abcd-1',
      'leasehold.dev/installation': 'inst0001',
      'leasehold.dev/lease-namespace': 'team-a',
      'leasehold.dev/lease-name': 'train',
    });
    expect(await store0(k).get('0123abcd-1')).toEqual(record('0123abcd-1', { installation: 'inst0001' }));
  });

  it('replaces a record it wrote, from memory, without reading it again', async () => {
    const k = secretsAPI();
    const store = store0(k);
    await store.put(record('u1'));
    await store.put(record('u1', { providerState: '{"pid":1}' }));
    expect(await store.get('u1')).toMatchObject({ providerState: '{"pid":1}' });
    expect(k.calls).toEqual(['create leasehold-lease-u1', 'replace leasehold-lease-u1']);
  });

  it('replaces a record another process wrote, or one changed since it was read', async () => {
    const k = secretsAPI();
    await store0(k).put(record('u1'));
    const store = store0(k);
    await store.put(record('u1', { providerState: 'a' }));
    k.bumpBehind('leasehold-lease-u1');
    await store.put(record('u1', { providerState: 'b' }));
    expect(await store0(k).get('u1')).toMatchObject({ providerState: 'b' });
  });

  it('lists records only (not the adoption marker or other Secrets), deletes idempotently', async () => {
    const k = secretsAPI();
    const store = store0(k);
    installationSecret(k);
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
    const store = store0(k);
    expect(await store.get('u1')).toBeUndefined();
    expect(await store.get('u1')).toBeUndefined();
    await store.put(record('u1'));
    expect(await store.get('u1')).toEqual(record('u1', { installation: 'inst0001' }));
    store.evict('u1');
    expect(await store.get('u1')).toEqual(record('u1', { installation: 'inst0001' }));
    expect(k.calls).toEqual(['read leasehold-lease-u1', 'create leasehold-lease-u1', 'read leasehold-lease-u1']);
  });

  it('notes the adoption on the installation ID Secret, so a marker that goes missing never reopens it', async () => {
    const k = secretsAPI();
    installationSecret(k);
    const store = store0(k);
    await store.markAdopted();
    k.stored.delete(INSTALLATION.legacyMarker);
    expect(await store0(k).adopted()).toBe(true);
    expect(k.stored.get(INSTALLATION.secret)?.data?.['lease-records']).toBeDefined();
  });

  it('takes the marker of a release from before per-release installations as the adoption done, and notes it', async () => {
    const k = secretsAPI();
    installationSecret(k);
    k.stored.set(INSTALLATION.legacyMarker, { metadata: { name: INSTALLATION.legacyMarker } });
    expect(await store0(k).adopted()).toBe(true);
    k.stored.delete(INSTALLATION.legacyMarker);
    expect(await store0(k).adopted()).toBe(true);
  });

  it('never reads, lists or replaces a record of another installation sharing the namespace', async () => {
    const k = secretsAPI();
    await store0(k, { ...INSTALLATION, id: 'other001' }).put(record('u1', { machineName: 'leasehold-other001-u1' }));
    // Written before records were stamped: whose is told by the machine name.
    await store0(k).put(record('legacy1', { machineName: 'leasehold-other001-legacy1' }));
    const legacy = k.stored.get('leasehold-lease-legacy1')!;
    const data = JSON.parse(Buffer.from(legacy.data!['record.json']!, 'base64').toString());
    delete data.installation;
    legacy.data = { 'record.json': Buffer.from(JSON.stringify(data)).toString('base64') };
    delete legacy.metadata!.labels!['leasehold.dev/installation'];
    await store0(k).put(record('mine'));
    const store = store0(k);
    expect(await store.get('u1')).toBeUndefined();
    expect(await store.get('legacy1')).toBeUndefined();
    expect((await store.list()).map((r) => r.uid)).toEqual(['mine']);
    expect((await store0(k, { ...INSTALLATION, id: 'other001' }).list()).map((r) => r.uid).sort()).toEqual(['legacy1', 'u1']);
  });
});
