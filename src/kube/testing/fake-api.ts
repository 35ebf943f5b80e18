// A pretend API server for reconciler unit tests: objects of one kind kept in
// memory with resourceVersions, status merge patches that honour the
// resourceVersion precondition the way the real server does (409 when the
// write was decided on a stale read), finalizer writes, the cache a
// reconciler reads from, and an event sink. Tests slow writes down or refuse
// them to put the reconciler between an intent write and its effect.
import type { EventSink } from '../events.js';
import type { Object as KubeObject } from '../resource.js';
import type { StatusClient } from '../status.js';

/** The error a write gets when the API server cannot be reached. */
export function connectionRefused(): Error {
  return Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
}

/** Applies a JSON merge patch (RFC 7386): null removes a key, objects merge, anything else replaces. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = { ...(target && typeof target === 'object' && !Array.isArray(target) ? target : {}) };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out;
}

interface StatusPatch {
  metadata?: { resourceVersion?: string };
  status?: any;
}

export interface FakeAPIOptions {
  /** The finalizer the writer adds. */
  finalizer: string;
  /** How long each status write takes, so that tests can overlap reconciles with writes in flight. */
  writeDelayMs?: number;
}

export class FakeAPIServer<T extends KubeObject> {
  private rv = 1;
  private readonly objects = new Map<string, T>();
  private readonly listeners: { [E in 'add' | 'update' | 'delete']: ((object: T) => void)[] } = { add: [], update: [], delete: [] };
  /** Runs before each status write, after the write delay; throwing refuses the write (see connectionRefused). */
  beforeStatusWrite?: (name: string, body: StatusPatch) => void;
  /** Runs before a stamp write, as another installation's write landing first would. */
  beforeStamp?: () => void;

  constructor(private readonly opts: FakeAPIOptions) {}

  /** Stores `obj` as created, with a fresh resourceVersion. */
  create(obj: T): void {
    this.put(this.key(obj.metadata?.namespace, obj.metadata!.name!), this.bump(obj));
  }

  /** The stored object itself (not a copy), or undefined. */
  stored(namespace: string | undefined, name: string): T | undefined {
    return this.objects.get(this.key(namespace, name));
  }

  /** Changes a stored object as another client would, without a new resourceVersion (as tests seed state). */
  set(namespace: string | undefined, name: string, change: (obj: T) => T): void {
    const key = this.key(namespace, name);
    this.put(key, change(this.objects.get(key)!));
  }

  /** What an informer cache over this server would hand a reconciler: copies of the stored objects. */
  readonly cache = {
    get: (namespace: string | undefined, name: string): T | undefined => this.copy(this.stored(namespace, name)),
    list: (): T[] => [...this.objects.values()].map((o) => structuredClone(o)),
    /** Each stored change, as an informer's handlers would see it once the watch delivered it. */
    on: (event: 'add' | 'update' | 'delete', fn: (object: T) => void): void => void this.listeners[event].push(fn),
  };

  readonly statusClient: StatusClient = {
    patchStatus: async (_ref, namespace, name, body) => {
      const patch = body as StatusPatch;
      if (this.opts.writeDelayMs) await new Promise((r) => setTimeout(r, this.opts.writeDelayMs));
      this.beforeStatusWrite?.(name, patch);
      const cur = this.stored(namespace, name);
      if (!cur) throw Object.assign(new Error(`${name} not found`), { code: 404 });
      const want = patch.metadata?.resourceVersion;
      if (want && want !== cur.metadata?.resourceVersion) throw Object.assign(new Error(`conflict: ${name} is at ${cur.metadata?.resourceVersion}, not ${want}`), { code: 409 });
      const next = this.bump({ ...cur, status: applyMergePatch(cur.status ?? {}, patch.status) });
      this.put(this.key(namespace, name), next);
      return structuredClone(next);
    },
  };

  /** The writes a reconciler makes besides status. */
  readonly writer = {
    addFinalizer: async (obj: T): Promise<T> => this.write(obj, (cur) => ({ ...cur, metadata: { ...cur.metadata, finalizers: [...(cur.metadata?.finalizers ?? []).filter((f) => f !== this.opts.finalizer), this.opts.finalizer] } })),
    removeFinalizer: async (obj: T): Promise<T> => this.write(obj, (cur) => ({ ...cur, metadata: { ...cur.metadata, finalizers: (cur.metadata?.finalizers ?? []).filter((f) => f !== this.opts.finalizer) } })),
    get: async (namespace: string, name: string): Promise<T | undefined> => this.copy(this.stored(namespace, name)),
    stamp: async (obj: T, installationID: string): Promise<T> => {
      this.beforeStamp?.();
      const cur = this.stored(obj.metadata?.namespace, obj.metadata!.name!);
      if (cur && obj.metadata?.resourceVersion && cur.metadata?.resourceVersion !== obj.metadata.resourceVersion) throw Object.assign(new Error(`conflict: ${obj.metadata.name}`), { code: 409 });
      return this.write(obj, (c) => ({ ...c, metadata: { ...c.metadata, annotations: { ...c.metadata?.annotations, 'leasehold.dev/installation': installationID } } }));
    },
    delete: async (namespace: string, name: string, uid?: string): Promise<void> => {
      const cur = this.stored(namespace, name);
      if (!cur) return;
      // The UID precondition: another object of the same name is not deleted.
      if (uid !== undefined && cur.metadata?.uid !== uid) return;
      // Like the real server: an object with finalizers is only marked; without, it is gone.
      if (cur.metadata?.finalizers?.length) this.put(this.key(namespace, name), this.bump({ ...cur, metadata: { ...cur.metadata, deletionTimestamp: new Date() } }));
      else this.remove(this.key(namespace, name));
    },
  };

  /** Events are accepted and dropped: these tests look at status and effects. */
  readonly events: EventSink = {
    async create() {},
    async updateCount() {},
  };

  private write(obj: T, change: (cur: T) => T): T {
    const key = this.key(obj.metadata?.namespace, obj.metadata!.name!);
    const cur = this.objects.get(key);
    if (!cur) throw Object.assign(new Error(`${obj.metadata?.name} not found`), { code: 404 });
    const next = this.bump(change(cur));
    // A marked object goes when its last finalizer does.
    if (next.metadata?.deletionTimestamp && !next.metadata.finalizers?.length) this.remove(key);
    else this.put(key, next);
    return structuredClone(next);
  }

  private put(key: string, obj: T): void {
    const event = this.objects.has(key) ? 'update' : 'add';
    this.objects.set(key, obj);
    for (const fn of this.listeners[event]) fn(structuredClone(obj));
  }

  private remove(key: string): void {
    const obj = this.objects.get(key);
    if (!obj || !this.objects.delete(key)) return;
    for (const fn of this.listeners.delete) fn(structuredClone(obj));
  }

  private bump(obj: T): T {
    return { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++this.rv) } };
  }

  private copy(obj: T | undefined): T | undefined {
    return obj === undefined ? undefined : structuredClone(obj);
  }

  private key(namespace: string | undefined, name: string): string {
    return `${namespace ?? ''}/${name}`;
  }
}
