// The pretend API server behaves like the real one where reconcilers depend on it.
import { describe, it, expect } from '@jest/globals';
import type { Object as KubeObject } from '../resource.js';
import { StatusWriter } from '../status.js';
import { connectionRefused, FakeAPIServer } from './fake-api.js';

type Thing = KubeObject<{ size: number }, { phase?: string; note?: string }>;
const ref = { group: 'example.dev', version: 'v1', plural: 'things', kind: 'Thing', namespaced: true };
const thing = (name: string): Thing => ({ apiVersion: 'example.dev/v1', kind: 'Thing', metadata: { name, namespace: 'ns' }, spec: { size: 1 } });

describe('FakeAPIServer', () => {
  it('merges status patches, bumps the resourceVersion, and refuses a write decided on a stale read with 409', async () => {
    const api = new FakeAPIServer<Thing>({ finalizer: 'example.dev/cleanup' });
    api.create(thing('a'));
    const status = new StatusWriter(api.statusClient);
    const read = api.cache.get('ns', 'a')!;
    const written = await status.write(ref, read, { phase: 'Up', note: 'x' });
    expect(written.metadata?.resourceVersion).not.toBe(read.metadata?.resourceVersion);
    await status.write(ref, written, { phase: 'Up' });
    expect(api.stored('ns', 'a')?.status).toEqual({ phase: 'Up' });
    await expect(status.write(ref, read, { phase: 'Down' })).rejects.toMatchObject({ code: 409 });
    await status.write(ref, read, { phase: 'Down' }, { unconditional: true });
    expect(api.stored('ns', 'a')?.status?.phase).toBe('Down');
  });

  it('lets a test refuse writes before they land', async () => {
    const api = new FakeAPIServer<Thing>({ finalizer: 'example.dev/cleanup' });
    api.create(thing('a'));
    api.beforeStatusWrite = () => {
      throw connectionRefused();
    };
    await expect(new StatusWriter(api.statusClient).write(ref, api.cache.get('ns', 'a')!, { phase: 'Up' })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(api.stored('ns', 'a')?.status).toBeUndefined();
  });

  it('adds and removes its finalizer once, and deletes an object with finalizers only by marking it, until the last one goes', async () => {
    const api = new FakeAPIServer<Thing>({ finalizer: 'example.dev/cleanup' });
    api.create({ ...thing('a'), metadata: { ...thing('a').metadata, finalizers: ['other'] } });
    const added = await api.writer.addFinalizer(api.cache.get('ns', 'a')!);
    await api.writer.addFinalizer(added);
    expect(api.stored('ns', 'a')?.metadata?.finalizers).toEqual(['other', 'example.dev/cleanup']);
    await api.writer.delete('ns', 'a');
    expect(api.stored('ns', 'a')?.metadata?.deletionTimestamp).toBeInstanceOf(Date);
    await api.writer.removeFinalizer(added);
    expect(api.stored('ns', 'a')?.metadata?.finalizers).toEqual(['other']);
    api.set('ns', 'a', (t) => ({ ...t, metadata: { ...t.metadata, finalizers: ['example.dev/cleanup'] } }));
    await api.writer.removeFinalizer(added);
    expect(api.stored('ns', 'a')).toBeUndefined();
    api.create(thing('b'));
    await api.writer.delete('ns', 'b');
    expect(await api.writer.get('ns', 'b')).toBeUndefined();
    expect(api.cache.list()).toEqual([]);
  });
});
