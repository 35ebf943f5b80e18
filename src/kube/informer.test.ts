import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { MAX_LIST_PAGES, ResilientInformer } from './informer.js';
import { diffRelist } from './relistdiff.js';
import { jsonSize, type HoldLimits, type OverBudgetError } from './holdbudget.js';
import { ApiStatusError, isResourceVersionExpired, type ListPage, type ListWatchTransport, type RawWatchEvent } from './listwatch.js';

const obj = (name: string, rv: string, namespace = 'default'): KubernetesObject => ({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Lease', metadata: { namespace, name, resourceVersion: rv } });
const names = (objs: KubernetesObject[]) => objs.map((o) => o.metadata!.name).sort();

describe('diffRelist', () => {
  it('turns a relist into adds, updates and deletes against the cache', () => {
    const cache = new Map([
      ['default/kept', obj('kept', '1')],
      ['default/changed', obj('changed', '2')],
      ['default/gone', obj('gone', '3')],
      ['other/gone-too', obj('gone-too', '4', 'other')],
    ]);
    const { cache: next, events } = diffRelist(cache, [obj('kept', '1'), obj('changed', '9'), obj('new', '10')]);
    expect(events.map((e) => `${e.type}:${e.object.metadata!.name}@${e.object.metadata!.resourceVersion}`)).toEqual(['update:changed@9', 'add:new@10', 'delete:gone@3', 'delete:gone-too@4']);
    const update = events[0]!;
    expect(update.type === 'update' && update.old.metadata!.resourceVersion).toBe('2');
    expect([...next.keys()]).toEqual(['default/kept', 'default/changed', 'default/new']);
    expect(cache.size).toBe(4);
  });

  it('keys cluster-scoped objects by name and sees an empty list as deleting everything', () => {
    const node = { kind: 'Node', metadata: { name: 'n1', resourceVersion: '5' } };
    const { cache, events } = diffRelist(new Map(), [node]);
    expect([...cache.keys()]).toEqual(['n1']);
    expect(events).toEqual([{ type: 'add', object: node }]);
    expect(diffRelist(cache, []).events).toEqual([{ type: 'delete', object: node }]);
  });

  it('is quiet when nothing changed', () => {
    const { cache } = diffRelist(new Map(), [obj('a', '1'), obj('b', '2')]);
    expect(diffRelist(cache, [obj('b', '2'), obj('a', '1')]).events).toEqual([]);
  });
});

describe('isResourceVersionExpired', () => {
  it('recognises 410 and expired-resourceVersion answers only', () => {
    expect(isResourceVersionExpired(new ApiStatusError(410, 'Gone', 'gone'))).toBe(true);
    expect(isResourceVersionExpired(new ApiStatusError(500, 'Expired', 'x'))).toBe(true);
    expect(isResourceVersionExpired(new ApiStatusError(504, 'Timeout', 'Too large resource version: 12, current: 10'))).toBe(true);
    expect(isResourceVersionExpired(new ApiStatusError(500, 'InternalError', 'etcd is down'))).toBe(false);
    expect(isResourceVersionExpired(new Error('ECONNREFUSED'))).toBe(false);
  });
});

interface OpenWatch {
  query: Record<string, string>;
  send(type: string, object: unknown): void;
  end(): void;
  fail(err: Error): void;
  aborted: boolean;
}

/** An API server in memory: paginated lists and scriptable watch streams. */
class FakeApi implements ListWatchTransport<KubernetesObject> {
  objects: KubernetesObject[] = [];
  listRV = '100';
  lists: Record<string, string>[] = [];
  watches: OpenWatch[] = [];
  listFailures: Error[] = [];

  async list(query: Record<string, string>): Promise<ListPage<KubernetesObject>> {
    this.lists.push(query);
    const failure = this.listFailures.shift();
    if (failure) throw failure;
    const start = Number(query.continue ?? 0);
    const limit = Number(query.limit);
    const end = start + limit;
    return { items: this.objects.slice(start, end).map((o) => structuredClone(o)), resourceVersion: this.listRV, continue: end < this.objects.length ? String(end) : undefined };
  }

  watch(query: Record<string, string>, onEvent: (e: RawWatchEvent) => void, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const w: OpenWatch = {
        query,
        aborted: false,
        send: (type, object) => onEvent({ type, object }),
        end: () => resolve(),
        fail: (err) => reject(err),
      };
      signal.addEventListener('abort', () => {
        w.aborted = true;
        reject(new Error('aborted'));
      });
      this.watches.push(w);
    });
  }

  get current(): OpenWatch {
    return this.watches.at(-1)!;
  }
}

function start(api: FakeApi, opts: { resyncMs?: number; watchdogMs?: number; pageSize?: number; maxListPages?: number; transform?: (o: KubernetesObject) => KubernetesObject; budget?: HoldLimits } = {}) {
  const events: string[] = [];
  const errors: Error[] = [];
  const restarts: string[] = [];
  const drops: string[] = [];
  const handlerErrors: number[] = [];
  const cutOffs: OverBudgetError[] = [];
  const inf = new ResilientInformer<KubernetesObject>(new KubeConfig(), '/apis/leasehold.dev/v1alpha1/leases', {
    transport: api,
    resyncMs: opts.resyncMs ?? 0,
    watchdogMs: opts.watchdogMs ?? 60_000,
    pageSize: opts.pageSize ?? 500,
    transform: opts.transform,
    onRestart: (r) => restarts.push(r),
    onDrop: (r) => drops.push(r),
    onHandlerError: () => handlerErrors.push(1),
    ...(opts.maxListPages ? { maxListPages: opts.maxListPages } : {}),
    ...(opts.budget ? { budget: opts.budget, onOverBudget: (e: OverBudgetError) => cutOffs.push(e) } : {}),
  });
  inf.on('add', (o) => events.push(`add:${o.metadata!.name}`));
  inf.on('update', (o, old) => events.push(`update:${o.metadata!.name}@${old.metadata!.resourceVersion}->${o.metadata!.resourceVersion}`));
  inf.on('delete', (o) => events.push(`delete:${o.metadata!.name}`));
  inf.on('error', (e) => errors.push(e));
  inf.start();
  return { inf, events, errors, restarts, drops, handlerErrors, cutOffs };
}

describe('ResilientInformer', () => {
  const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);
  let running: ResilientInformer<KubernetesObject> | undefined;
  afterEach(async () => {
    await running?.stop();
    running = undefined;
    jest.useRealTimers();
  });
  const setup = (api: FakeApi, opts?: Parameters<typeof start>[1]) => {
    jest.useFakeTimers({ now: 0 });
    const s = start(api, opts);
    running = s.inf;
    return s;
  };

  it('lists page by page, syncs, then watches from the list resourceVersion with bookmarks', async () => {
    const api = new FakeApi();
    api.objects = ['a', 'b', 'c', 'd', 'e'].map((n, i) => obj(n, String(i + 1)));
    const { inf, events } = setup(api, { pageSize: 2 });
    expect(inf.hasSynced()).toBe(false);
    await inf.waitForSync();
    expect(api.lists.map((q) => q.continue)).toEqual([undefined, '2', '4']);
    expect(api.lists[0]!.limit).toBe('2');
    expect(events).toEqual(['add:a', 'add:b', 'add:c', 'add:d', 'add:e']);
    expect(names(inf.list())).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(inf.get('default', 'c')?.metadata?.resourceVersion).toBe('3');
    await advance(0);
    expect(api.current.query).toMatchObject({ resourceVersion: '100', allowWatchBookmarks: 'true' });
  });

  it('applies watch events to the cache and resumes from the last bookmark after a close, without relisting', async () => {
    const api = new FakeApi();
    api.objects = [obj('a', '1')];
    const { inf, events, restarts } = setup(api);
    await advance(0);
    api.current.send('ADDED', obj('b', '101'));
    api.current.send('MODIFIED', obj('a', '102'));
    api.current.send('DELETED', obj('b', '103'));
    api.current.send('BOOKMARK', { kind: 'Lease', metadata: { resourceVersion: '150' } });
    expect(events).toEqual(['add:a', 'add:b', 'update:a@1->102', 'delete:b']);
    expect(names(inf.list())).toEqual(['a']);
    expect(inf.lastResourceVersion()).toBe('150');

    api.current.end();
    await advance(300);
    expect(api.watches).toHaveLength(2);
    expect(api.current.query.resourceVersion).toBe('150');
    expect(api.lists).toHaveLength(1);
    expect(restarts).toEqual(['closed']);
    expect(inf.stats).toMatchObject({ lists: 1, relists: 0, restarts: 1 });
  });

  it('restarts a failed watch with growing, jittered backoff and reports the error', async () => {
    const api = new FakeApi();
    const { errors, restarts } = setup(api);
    await advance(0);
    api.current.fail(new Error('connect ECONNREFUSED'));
    await advance(159);
    expect(api.watches).toHaveLength(1);
    await advance(82);
    expect(api.watches).toHaveLength(2);
    api.current.fail(new Error('connect ECONNREFUSED'));
    await advance(319);
    expect(api.watches).toHaveLength(2);
    await advance(162);
    expect(api.watches).toHaveLength(3);
    // A watch that delivered events was healthy: its failure backs off from the start again.
    api.current.send('ADDED', obj('a', '101'));
    api.current.fail(new Error('socket hang up'));
    await advance(159);
    expect(api.watches).toHaveLength(3);
    await advance(82);
    expect(api.watches).toHaveLength(4);
    expect(errors.map((e) => e.message)).toEqual(['connect ECONNREFUSED', 'connect ECONNREFUSED', 'socket hang up']);
    expect(restarts).toEqual(['error', 'error', 'error']);
  });

  it('retries a failed initial list until it succeeds', async () => {
    const api = new FakeApi();
    api.objects = [obj('a', '1')];
    api.listFailures = [new ApiStatusError(503, 'ServiceUnavailable', 'apiserver starting')];
    const { inf, errors } = setup(api);
    await advance(0);
    expect(inf.hasSynced()).toBe(false);
    await advance(300);
    expect(inf.hasSynced()).toBe(true);
    expect(errors).toHaveLength(1);
  });

  it.each([
    ['an ERROR event in the stream', (w: OpenWatch) => w.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 100 (200)' })],
    ['an HTTP 410', (w: OpenWatch) => w.fail(new ApiStatusError(410, 'Gone', 'gone'))],
  ])('relists on %s, emitting what changed meanwhile', async (_what, expire) => {
    const api = new FakeApi();
    api.objects = [obj('kept', '1'), obj('changed', '2'), obj('gone', '3')];
    const { inf, events, errors, restarts } = setup(api);
    await advance(0);
    api.objects = [obj('kept', '1'), obj('changed', '20'), obj('new', '21')];
    api.listRV = '300';
    events.length = 0;
    expire(api.current);
    await advance(300);
    expect(events).toEqual(['update:changed@2->20', 'add:new', 'delete:gone']);
    expect(names(inf.list())).toEqual(['changed', 'kept', 'new']);
    expect(api.current.query.resourceVersion).toBe('300');
    expect(inf.stats).toMatchObject({ lists: 2, relists: 1 });
    expect(restarts).toEqual(['expired']);
    expect(errors).toEqual([]);
  });

  it('treats other ERROR events as errors: restart from the same resourceVersion', async () => {
    const api = new FakeApi();
    const { errors, restarts } = setup(api);
    await advance(0);
    api.current.send('ERROR', { kind: 'Status', code: 500, reason: 'InternalError', message: 'etcd leader changed' });
    await advance(300);
    expect(api.lists).toHaveLength(1);
    expect(api.current.query.resourceVersion).toBe('100');
    expect(errors.map((e) => e.message)).toEqual(['etcd leader changed']);
    expect(restarts).toEqual(['error']);
  });

  it('aborts and restarts a watch silent for watchdogMs; events and bookmarks keep it alive', async () => {
    const api = new FakeApi();
    const { inf, restarts } = setup(api, { watchdogMs: 1_000 });
    await advance(0);
    const first = api.current;
    await advance(900);
    first.send('BOOKMARK', { metadata: { resourceVersion: '120' } });
    await advance(900);
    expect(first.aborted).toBe(false);
    await advance(100);
    expect(first.aborted).toBe(true);
    await advance(300);
    expect(api.watches).toHaveLength(2);
    expect(api.current.query.resourceVersion).toBe('120');
    expect(restarts).toEqual(['watchdog']);
    expect(inf.stats.watchdogs).toBe(1);
  });

  it('drops listed and watched objects that fail the schema check, and keeps watching', async () => {
    const api = new FakeApi();
    const bad = (o: unknown) => o as KubernetesObject;
    api.objects = [obj('a', '1'), bad({ metadata: { name: 'strung', resourceVersion: '2', annotations: 'not a map' } }), bad({ metadata: 'nonsense' }), bad(null)];
    const { inf, events, drops, restarts } = setup(api);
    await inf.waitForSync();
    expect(names(inf.list())).toEqual(['a']);
    await advance(0);
    api.current.send('ADDED', { metadata: { name: 'x', resourceVersion: '101', annotations: 'kubectl.kubernetes.io/last-applied-configuration' } });
    api.current.send('MODIFIED', { metadata: { name: 'a', resourceVersion: '102', labels: { n: 5 } } });
    api.current.send('ADDED', { metadata: { name: 7, resourceVersion: '103' } });
    api.current.send('DELETED', 'a');
    api.current.send('SURPRISE', obj('s', '104'));
    api.current.send('ADDED', obj('b', '105'));
    await advance(0);
    expect(events).toEqual(['add:a', 'add:b']);
    expect(names(inf.list())).toEqual(['a', 'b']);
    expect(drops).toEqual([...Array(7).fill('invalid_object'), 'invalid_event']);
    // Dropped objects still move the resourceVersion on: watching again from before them would only bring them back.
    expect(inf.lastResourceVersion()).toBe('105');
    expect(restarts).toEqual([]);
    expect(api.current.aborted).toBe(false);
  });

  it('drops an object the transform fails on instead of failing the watch', async () => {
    const api = new FakeApi();
    const { inf, events, drops } = setup(api, {
      transform: (o) => {
        if (o.metadata!.name === 'boom') throw new TypeError('transform bug');
        return o;
      },
    });
    await inf.waitForSync();
    await advance(0);
    api.current.send('ADDED', obj('boom', '101'));
    api.current.send('ADDED', obj('fine', '102'));
    await advance(0);
    expect(events).toEqual(['add:fine']);
    expect(drops).toEqual(['transform_failed']);
  });

  it('refuses a list that never stops handing out continue tokens, at the page limit, and retries with backoff', async () => {
    const api = new FakeApi();
    let served = 0;
    api.list = async (query) => {
      api.lists.push(query);
      served++;
      return { items: [obj(`o${served}`, String(served))], resourceVersion: '1', continue: `page-${served}` };
    };
    const { inf, errors, drops, restarts } = setup(api, { maxListPages: 20 });
    await advance(0);
    expect(served).toBe(20);
    expect(errors[0]!.message).toBe('a list of /apis/leasehold.dev/v1alpha1/leases still had more pages after 20, the limit on pages per list; the list was dropped');
    expect(drops).toEqual(['too_many_pages']);
    expect(restarts).toEqual(['error']);
    expect(inf.hasSynced()).toBe(false);
    expect(inf.list()).toEqual([]);
    await advance(300);
    expect(served).toBe(40);
  });

  describe('with a budget', () => {
    const padded = (name: string, rv: string, bytes: number) => ({ ...obj(name, rv), data: 'x'.repeat(bytes) });

    it('cuts off a list of valid pages that never ends once the pages held pass the bytes budget, long before the page limit, and reads no more', async () => {
      const api = new FakeApi();
      let served = 0;
      api.list = async (query) => {
        api.lists.push(query);
        served++;
        return { items: [padded(`o${served}`, String(served), 10_000)], resourceVersion: '1', continue: `page-${served}` };
      };
      const { inf, cutOffs, restarts } = setup(api, { budget: { objects: 1_000, bytes: 100_000 } });
      await advance(0);
      expect(served).toBe(10);
      expect(cutOffs).toHaveLength(1);
      expect(cutOffs[0]!.kind).toBe('bytes');
      expect(cutOffs[0]!.held.objects).toBe(10);
      expect(cutOffs[0]!.held.bytes).toBeGreaterThan(100_000);
      expect(cutOffs[0]!.message).toMatch(/^it would hold 10 objects in [0-9.]+ KiB|^it would hold 10 objects in [0-9]+ bytes/);
      expect(inf.cutOff()).toBe(cutOffs[0]);
      expect(inf.hasSynced()).toBe(false);
      expect(inf.list()).toEqual([]);
      // Cut off for good: no backoff, no second list.
      await advance(60_000);
      expect(served).toBe(10);
      expect(restarts).toEqual([]);
    });

    it('cuts off a watch that streams ever-new valid objects, closes it and drops the cache', async () => {
      const api = new FakeApi();
      api.objects = [obj('a', '1')];
      const { inf, cutOffs, events } = setup(api, { budget: { objects: 5, bytes: 1_000_000 } });
      await advance(0);
      const watch = api.current;
      for (let i = 0; i < 10 && !watch.aborted; i++) watch.send('ADDED', obj(`flood-${i}`, String(200 + i)));
      await advance(0);
      expect(watch.aborted).toBe(true);
      expect(cutOffs.map((e) => [e.kind, e.held.objects])).toEqual([['objects', 6]]);
      // The object past the budget was never stored or handed on.
      expect(events).toEqual(['add:a', 'add:flood-0', 'add:flood-1', 'add:flood-2', 'add:flood-3']);
      expect(inf.list()).toEqual([]);
      expect(inf.hasSynced()).toBe(false);
      await advance(60_000);
      expect(api.watches).toHaveLength(1);
      expect(api.lists).toHaveLength(1);
    });

    it('counts a replaced object once and frees a deleted one, so a steady queue stays within its budget', async () => {
      const api = new FakeApi();
      api.objects = [obj('a', '1'), obj('b', '2')];
      const { inf, cutOffs } = setup(api, { budget: { objects: 3, bytes: 1_000_000 } });
      await advance(0);
      for (let i = 0; i < 50; i++) {
        api.current.send('MODIFIED', obj('a', String(10 + i)));
        api.current.send('ADDED', obj('c', String(100 + i)));
        api.current.send('DELETED', obj('c', String(100 + i)));
      }
      await advance(0);
      expect(cutOffs).toEqual([]);
      expect(names(inf.list())).toEqual(['a', 'b']);
    });

    it('counts a list in progress on top of the cache it will replace', async () => {
      const api = new FakeApi();
      api.objects = [obj('a', '1'), obj('b', '2')];
      const { inf, cutOffs } = setup(api, { budget: { objects: 3, bytes: 1_000_000 } });
      await advance(0);
      expect(names(inf.list())).toEqual(['a', 'b']);
      // An expired watch brings a relist; while it is read, the old cache is held too.
      api.current.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
      await advance(1_000);
      expect(cutOffs.map((e) => [e.kind, e.held.objects])).toEqual([['objects', 4]]);
    });

    it('cuts off a page that holds more items than the list asked for', async () => {
      const api = new FakeApi();
      api.objects = ['a', 'b', 'c'].map((n, i) => obj(n, String(i + 1)));
      api.list = async (query) => {
        api.lists.push(query);
        return { items: api.objects, resourceVersion: '1' };
      };
      const { cutOffs } = setup(api, { pageSize: 2, budget: { objects: 100, bytes: 1_000_000 } });
      await advance(0);
      expect(cutOffs.map((e) => e.kind)).toEqual(['page_items']);
      expect(cutOffs[0]!.message).toBe('a list page held 3 objects where at most 2 were asked for');
    });

    it('counts bytes as the JSON of the stored object, after the transform', async () => {
      const api = new FakeApi();
      api.objects = [padded('big', '1', 50_000)];
      const slim = (o: KubernetesObject) => ({ apiVersion: o.apiVersion, kind: o.kind, metadata: o.metadata }) as KubernetesObject;
      const { inf, cutOffs } = setup(api, { transform: slim, budget: { objects: 10, bytes: jsonSize(slim(obj('big', '1'))) } });
      await inf.waitForSync();
      expect(cutOffs).toEqual([]);
      expect(inf.list()).toHaveLength(1);
    });
  });

  it('the default page limit is 1000 pages', () => {
    expect(MAX_LIST_PAGES).toBe(1000);
  });

  it('counts a handler that throws or rejects, and goes on with the next handler and event', async () => {
    const api = new FakeApi();
    const { inf, events, handlerErrors } = setup(api);
    inf.on('add', () => {
      throw new Error('sync bug');
    });
    inf.on('add', async () => {
      throw new Error('async bug');
    });
    const after: string[] = [];
    inf.on('add', (o) => after.push(o.metadata!.name!));
    await inf.waitForSync();
    await advance(0);
    api.current.send('ADDED', obj('a', '101'));
    api.current.send('ADDED', obj('b', '102'));
    await advance(0);
    expect(events).toEqual(['add:a', 'add:b']);
    expect(after).toEqual(['a', 'b']);
    expect(handlerErrors).toHaveLength(4);
  });

  it('resyncs every resyncMs from the cache alone', async () => {
    const api = new FakeApi();
    api.objects = [obj('a', '1'), obj('b', '2')];
    const { events } = setup(api, { resyncMs: 10_000 });
    await advance(0);
    events.length = 0;
    await advance(10_000);
    expect(events.sort()).toEqual(['update:a@1->1', 'update:b@2->2']);
    await advance(10_000);
    expect(events).toHaveLength(4);
    expect(api.lists).toHaveLength(1);
    expect(api.watches).toHaveLength(1);
  });

  it('stores listed and watched objects without managedFields or the last-applied annotation, by default', async () => {
    const applied = (name: string, rv: string, annotations: Record<string, string>): KubernetesObject => ({
      ...obj(name, rv),
      metadata: { ...obj(name, rv).metadata, annotations, managedFields: [{ manager: 'kubectl', operation: 'Apply', fieldsV1: { 'f:spec': {} } }] },
    });
    const lastApplied = { 'kubectl.kubernetes.io/last-applied-configuration': '{"spec":{}}' };
    const api = new FakeApi();
    api.objects = [applied('listed', '1', { ...lastApplied, 'leasehold.dev/last-activity': 't1' })];
    const { inf } = setup(api);
    const seen: KubernetesObject[] = [];
    inf.on('add', (o) => seen.push(o));
    inf.on('update', (o) => seen.push(o));
    inf.on('delete', (o) => seen.push(o));
    await advance(0);
    api.current.send('ADDED', applied('watched', '101', lastApplied));
    api.current.send('MODIFIED', applied('listed', '102', { ...lastApplied, 'leasehold.dev/last-activity': 't2' }));
    expect(inf.get('default', 'listed')!.metadata).toEqual({ namespace: 'default', name: 'listed', resourceVersion: '102', annotations: { 'leasehold.dev/last-activity': 't2' } });
    expect(inf.get('default', 'watched')!.metadata).toEqual({ namespace: 'default', name: 'watched', resourceVersion: '101' });
    api.current.send('DELETED', applied('watched', '103', lastApplied));
    expect(seen.map((o) => [o.metadata!.name, o.metadata!.managedFields, o.metadata!.annotations?.['kubectl.kubernetes.io/last-applied-configuration']])).toEqual([
      ['listed', undefined, undefined],
      ['watched', undefined, undefined],
      ['listed', undefined, undefined],
      ['watched', undefined, undefined],
    ]);
  });

  it('stores objects as the transform option makes them', async () => {
    const api = new FakeApi();
    api.objects = [{ ...obj('a', '1'), metadata: { ...obj('a', '1').metadata, managedFields: [{ manager: 'm' }] } }];
    const { inf } = setup(api, { transform: (o) => ({ ...o, kind: `${o.kind}Seen` }) });
    await advance(0);
    api.current.send('ADDED', obj('b', '101'));
    expect(inf.list().map((o) => [o.metadata!.name, o.kind, o.metadata!.managedFields])).toEqual([
      ['a', 'LeaseSeen', [{ manager: 'm' }]],
      ['b', 'LeaseSeen', undefined],
    ]);
  });

  it('keeps delivering to the other handlers when one throws', async () => {
    const api = new FakeApi();
    api.objects = [obj('a', '1')];
    jest.useFakeTimers({ now: 0 });
    const inf = new ResilientInformer<KubernetesObject>(new KubeConfig(), '/x', { transport: api, resyncMs: 0 });
    running = inf;
    const seen: string[] = [];
    inf.on('add', () => {
      throw new Error('handler bug');
    });
    inf.on('add', (o) => seen.push(o.metadata!.name!));
    inf.start();
    await inf.waitForSync();
    expect(seen).toEqual(['a']);
  });

  it('stop aborts the watch and leaves no timers behind', async () => {
    const api = new FakeApi();
    const { inf } = setup(api, { resyncMs: 10_000, watchdogMs: 5_000 });
    await advance(0);
    await inf.stop();
    expect(api.current.aborted).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
    await advance(60_000);
    expect(api.watches).toHaveLength(1);
  });

  it('stop during a backoff wait ends the loop at once', async () => {
    const api = new FakeApi();
    const { inf } = setup(api);
    await advance(0);
    api.current.fail(new Error('boom'));
    await advance(10);
    await inf.stop();
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('KubeListWatch over HTTP', () => {
  it('lists with the kubeconfig credentials, fills in item kinds, and relists on a 410 ERROR event', async () => {
    const seen: { url: string; auth?: string }[] = [];
    let watchCount = 0;
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      seen.push({ url: req.url!, auth: req.headers.authorization });
      const url = new URL(req.url!, 'http://x');
      if (url.searchParams.get('watch') !== 'true') {
        const rv = watchCount === 0 ? '10' : '20';
        const items = watchCount === 0 ? [{ metadata: { name: 'n1', resourceVersion: '5' } }] : [{ metadata: { name: 'n2', resourceVersion: '15' } }];
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: rv }, items }));
        return;
      }
      watchCount++;
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (watchCount === 1) {
        res.write(JSON.stringify({ type: 'MODIFIED', object: { kind: 'Node', apiVersion: 'v1', metadata: { name: 'n1', resourceVersion: '11' } } }) + '\n');
        res.end(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }) + '\n');
      }
      // The second watch stays open until the informer stops.
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'tok3n' }],
      contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      currentContext: 'ctx',
    });
    const inf = new ResilientInformer<KubernetesObject>(kc, '/api/v1/nodes', { resyncMs: 0, initialBackoffMs: 5 });
    const events: string[] = [];
    inf.on('add', (o) => events.push(`add:${o.kind}/${o.metadata!.name}`));
    inf.on('update', (o) => events.push(`update:${o.metadata!.name}`));
    inf.on('delete', (o) => events.push(`delete:${o.metadata!.name}`));
    try {
      inf.start();
      await inf.waitForSync();
      for (let i = 0; i < 200 && watchCount < 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect(events).toEqual(['add:Node/n1', 'update:n1', 'add:Node/n2', 'delete:n1']);
      expect(inf.stats).toMatchObject({ lists: 2, relists: 1 });
      expect(seen.every((s) => s.auth === 'Bearer tok3n')).toBe(true);
      const watches = seen.filter((s) => s.url.includes('watch=true')).map((s) => new URL(s.url, 'http://x').searchParams);
      expect(watches[0]!.get('resourceVersion')).toBe('10');
      expect(watches[0]!.get('allowWatchBookmarks')).toBe('true');
      expect(watches[1]!.get('resourceVersion')).toBe('20');
      expect(seen[0]!.url).toBe('/api/v1/nodes?limit=500');
    } finally {
      await inf.stop();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('reports a non-200 answer as an ApiStatusError with the Status reason', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(403, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', code: 403, reason: 'Forbidden', message: 'nodes is forbidden' }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      currentContext: 'ctx',
    });
    const inf = new ResilientInformer<KubernetesObject>(kc, '/api/v1/nodes', { resyncMs: 0, initialBackoffMs: 1000 });
    const errors: Error[] = [];
    inf.on('error', (e) => errors.push(e));
    try {
      inf.start();
      for (let i = 0; i < 200 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(errors[0]).toBeInstanceOf(ApiStatusError);
      expect(errors[0]).toMatchObject({ statusCode: 403, reason: 'Forbidden' });
      expect(errors[0]!.message).toContain('nodes is forbidden');
    } finally {
      await inf.stop();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
