// The reconciler over several Leases on a pretend API server whose writes
// take time: the maxLeases slot is taken at the scheduling decision, and a
// Ready or Idle Lease is probed once per check, not again when its own write
// comes back.
import { describe, it, expect } from '@jest/globals';
import type { Lease, LeaseStatus } from '../../src/api/index.js';
import { connectionRefused, FakeAPIServer } from '../../src/kube/testing/fake-api.js';
import type { AcquireResult, LeaseDriver, MachineCheck } from './driver.js';
import { MemoryRecordStore } from './testing/records.js';
import { recordOf } from './policy/trust.js';
import { leaseReconciler, seedLease } from './testing/harness.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const FACTS = { os: 'linux', arch: 'amd64', cpus: 2, memoryGiB: 4, gpus: [] };

function world(opts: { names: string[]; maxLeases?: number; writeDelayMs?: number; status?: Record<string, unknown>; checkIntervalMs?: number; agentUp?: boolean }) {
  const api = new FakeAPIServer<Lease>({ finalizer: 'leasehold.dev/release', writeDelayMs: opts.writeDelayMs });
  opts.names.forEach((name, i) => seedLease(api, { name, uid: `${String(i).padStart(8, '0')}-0000-0000-0000-000000000000`, status: opts.status as Partial<LeaseStatus> | undefined, finalizer: !!opts.status }));
  const state = { acquires: 0, checks: 0, releases: 0, refuseLaunching: 0, writes: [] as { phase?: string; reason?: string }[] };
  api.beforeStatusWrite = (_name, body) => {
    if (state.refuseLaunching > 0 && body.status?.phase === 'Launching') {
      state.refuseLaunching--;
      throw connectionRefused();
    }
    state.writes.push({ phase: body.status?.phase, reason: body.status?.reason });
  };
  const machine = { ssh: { host: '10.0.0.5', port: 22, user: 'u', hostKey: 'ssh-ed25519 AAAA' } };
  // Leases this controller launched have their records.
  const records = new MemoryRecordStore();
  if (opts.status) for (const l of api.cache.list()) void records.put(recordOf(l, l.status!));
  const driver: LeaseDriver = {
    async acquire(): Promise<AcquireResult> {
      state.acquires++;
      return { kind: 'launched', state: '{"pid":1}', machine };
    },
    async prepare(): Promise<MachineCheck> {
      if (opts.agentUp) return { kind: 'ok', facts: FACTS, busy: 0, keysHash: 'k', machine } as unknown as MachineCheck;
      return { kind: 'unreachable', message: 'booting' };
    },
    async check(): Promise<MachineCheck> {
      state.checks++;
      return { kind: 'ok', facts: FACTS, busy: 0, keysHash: 'k', machine } as unknown as MachineCheck;
    },
    async release() {
      state.releases++;
    },
  };
  const { reconciler, effects } = leaseReconciler(api, {
    driver,
    records,
    settings: { maxLeases: opts.maxLeases ?? 2, checkIntervalMs: opts.checkIntervalMs ?? 60_000 },
  });
  const set = (name: string, f: (l: Lease) => Lease) => api.set('ns', name, f);
  /** A pass, then the pass that the end of the effect it started would bring (as the work queue would). */
  const pass = async (name: string) => {
    const first = await reconciler.reconcile(`ns/${name}`);
    // A quick effect may have ended before the pass returned: its result waits to be taken.
    if (!effects.get(api.stored('ns', name)!.metadata!.uid!)) return first;
    await effects.idle();
    return reconciler.reconcile(`ns/${name}`);
  };
  /** Strips the finalizer and deletes the Lease, as an admin could: it leaves the cache without ever ending here. */
  const vanish = async (name: string) => {
    const gone = api.cache.get('ns', name)!;
    await api.writer.removeFinalizer(gone);
    await api.writer.delete('ns', name);
    reconciler.forget(gone);
  };
  return { reconciler, effects, pass, state, lease: (name: string) => api.stored('ns', name)!, set, vanish };
}

describe('maxLeases slots', () => {
  it('Leases scheduled while another one\'s intent is still being written count its slot', async () => {
    const w = world({ names: ['a', 'b', 'c'], maxLeases: 1, writeDelayMs: 20 });
    await Promise.all(['a', 'b', 'c'].map((n) => w.reconciler.reconcile(`ns/${n}`)));
    await w.effects.idle();
    expect(w.state.acquires).toBe(1);
    const phases = ['a', 'b', 'c'].map((n) => w.lease(n).status?.phase);
    expect(phases.filter((p) => p === 'Launching')).toHaveLength(1);
    const waiting = ['a', 'b', 'c'].map((n) => w.lease(n).status).filter((s) => s?.phase === 'Pending');
    expect(waiting.map((s) => s?.reason)).toEqual(['MaxLeases', 'MaxLeases']);
  });

  it('a failed intent write gives the slot back', async () => {
    const w = world({ names: ['a', 'b'], maxLeases: 1 });
    w.state.refuseLaunching = 1;
    await expect(w.reconciler.reconcile('ns/a')).rejects.toThrow('ECONNREFUSED');
    expect(w.lease('a').status?.phase).toBeUndefined();
    await w.reconciler.reconcile('ns/b');
    await w.effects.idle();
    expect(w.lease('b').status?.phase).toBe('Launching');
    expect(w.state.acquires).toBe(1);
  });

  it('Leases that vanish from the cache without ending give their slots back', async () => {
    const w = world({ names: ['a', 'b', 'c', 'd'], maxLeases: 2 });
    await w.pass('a');
    await w.pass('b');
    expect(['a', 'b'].map((n) => w.lease(n).status?.phase)).toEqual(['Launching', 'Launching']);
    await w.reconciler.reconcile('ns/c');
    expect(w.lease('c').status?.reason).toBe('MaxLeases');
    await w.vanish('a');
    await w.vanish('b');
    await w.pass('c');
    await w.pass('d');
    expect(['c', 'd'].map((n) => w.lease(n).status?.phase)).toEqual(['Launching', 'Launching']);
  });

  it('a Lease scheduled again after its own failed write is not kept out by its own slot', async () => {
    const w = world({ names: ['a'], maxLeases: 1 });
    w.state.refuseLaunching = 1;
    await expect(w.reconciler.reconcile('ns/a')).rejects.toThrow('ECONNREFUSED');
    await w.reconciler.reconcile('ns/a');
    expect(w.lease('a').status?.phase).toBe('Launching');
  });
});

describe('checks of Ready and Idle Leases', () => {
  const now = new Date();
  const ready = {
    phase: 'Ready',
    offer: 'box',
    leaseID: '00000000',
    machineName: 'leasehold-00000000',
    providerState: '{"pid":1}',
    readyAt: now.toISOString(),
    lastActivityAt: now.toISOString(),
    idleTimeout: '20m',
    expiresAt: new Date(now.getTime() + 3600_000).toISOString(),
    release: { provider: 'command', command: ['/bin/release'] },
    launch: { attempt: 1, startedAt: now.toISOString() },
  };

  it('probes once per check: the pass that its own Idle write wakes waits for the next check', async () => {
    const w = world({ names: ['a'], status: ready });
    await w.pass('a');
    expect(w.state.checks).toBe(1);
    expect(w.lease('a').status?.phase).toBe('Idle');
    const again = await w.pass('a');
    expect(w.state.checks).toBe(1);
    expect(again?.requeueAfter).toBeGreaterThan(50_000);
    expect(again?.requeueAfter).toBeLessThanOrEqual(60_000);
  });

  it('a Lease just made Ready by the prepare probe is first checked a check interval later', async () => {
    const w = world({ names: ['a'], agentUp: true, status: { ...ready, phase: 'Launching', readyAt: undefined, lastActivityAt: undefined } });
    await w.pass('a');
    expect(w.lease('a').status?.phase).toBe('Ready');
    // The Ready write comes back through the watch: no probe yet.
    const again = await w.pass('a');
    expect(w.state.checks).toBe(0);
    expect(again?.requeueAfter).toBeGreaterThan(50_000);
    expect(w.lease('a').status?.phase).toBe('Ready');
  });

  it('probes again at once when the spec or the activity annotation changes', async () => {
    const w = world({ names: ['a'], status: ready });
    await w.pass('a');
    w.set('a', (l) => ({ ...l, metadata: { ...l.metadata, generation: 2 } }) as Lease);
    await w.pass('a');
    expect(w.state.checks).toBe(2);
    w.set('a', (l) => ({ ...l, metadata: { ...l.metadata, annotations: { 'leasehold.dev/activity': new Date().toISOString() } } }) as Lease);
    await w.pass('a');
    expect(w.state.checks).toBe(3);
  });

  it('probes again once the check interval has passed', async () => {
    const w = world({ names: ['a'], status: ready, checkIntervalMs: 150 });
    await w.pass('a');
    await w.pass('a');
    expect(w.state.checks).toBe(1);
    await sleep(200);
    await w.pass('a');
    expect(w.state.checks).toBe(2);
  });

  it('releases at maxLifetime without probing the machine first', async () => {
    const w = world({ names: ['a'], status: { ...ready, expiresAt: new Date(now.getTime() - 1000).toISOString() } });
    await w.pass('a');
    expect(w.state.checks).toBe(0);
    expect(w.state.releases).toBe(1);
    expect(w.state.writes[0]).toEqual({ phase: 'Releasing', reason: 'MaxLifetime' });
    expect(w.lease('a').status?.phase).toBe('Released');
  });
});
