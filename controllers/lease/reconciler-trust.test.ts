// The reconciler acts on its own record of each Lease's machine, never on
// what status says for it: a pretend API server, a driver that records what
// it was handed, records in memory.
import { describe, it, expect } from '@jest/globals';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Lease, LeaseStatus } from '../../src/api/index.js';
import { EventRecorder } from '../../src/kube/events.js';
import { FakeAPIServer } from '../../src/kube/testing/fake-api.js';
import type { LeaseDriver, MachineCheck } from './driver.js';
import { RECORD_SWEEP_KEY } from './reconciler.js';
import { leaseReconciler, log, seedLease, settle as settleOwners } from './testing/harness.js';
import { MemoryRecordStore } from './testing/records.js';
import { recordOf } from './policy/trust.js';

const UID = '0123abcd-0000-0000-0000-000000000000';
const MACHINE = { ssh: { host: '10.0.0.5', port: 22, user: 'u', hostKey: 'ssh-ed25519 AAAA' } };
const FACTS = { os: 'linux', arch: 'amd64', cpus: 2, memoryGiB: 4, gpus: 0 };
const now = Date.now();
const iso = (ms: number) => new Date(ms).toISOString();
const launched: Partial<LeaseStatus> = {
  offer: 'box',
  leaseID: '0123abcd',
  machineName: 'leasehold-0123abcd',
  release: { provider: 'command', command: ['/bin/release'] },
  idleTimeout: '20m',
  expiresAt: iso(now + 3600_000),
  launch: { attempt: 1, startedAt: iso(now - 60_000) },
  providerState: '{"dir":"/m/0123abcd"}',
  machine: MACHINE,
  readyAt: iso(now - 30_000),
  lastActivityAt: iso(now - 30_000),
};

function world(status?: Partial<LeaseStatus>, opts: { record?: boolean; adopted?: boolean; stamp?: string | null } = {}) {
  const stamp = opts.stamp === undefined ? (status ? 'inst0001' : null) : opts.stamp;
  const api = new FakeAPIServer<Lease>({ finalizer: 'leasehold.dev/release' });
  seedLease(api, { name: 'l', uid: UID, status, finalizer: !!status, ...(stamp ? { annotations: { 'leasehold.dev/installation': stamp } } : {}) });
  const records = new MemoryRecordStore();
  records.marked = opts.adopted ?? true;
  if (status && opts.record !== false) void records.put(recordOf(api.stored('ns', 'l')!, status));
  const handed: { verb: string; status: LeaseStatus }[] = [];
  const faults: { releases: number; acquireGate?: Promise<void> } = { releases: 0 };
  const events: CoreV1Event[] = [];
  const driver: LeaseDriver = {
    async acquire(l) {
      handed.push({ verb: 'acquire', status: structuredClone(l.status!) });
      await faults.acquireGate;
      return { kind: 'launched', state: '{"dir":"/m/0123abcd"}', machine: MACHINE };
    },
    async prepare(l) {
      handed.push({ verb: 'prepare', status: structuredClone(l.status!) });
      return { kind: 'ok', facts: FACTS, busy: 0, keysHash: 'k', machine: l.status!.machine! } as MachineCheck;
    },
    async check(l) {
      handed.push({ verb: 'check', status: structuredClone(l.status!) });
      return { kind: 'ok', facts: FACTS, busy: 1, keysHash: 'k', machine: l.status!.machine! } as MachineCheck;
    },
    async release(l) {
      handed.push({ verb: 'release', status: structuredClone(l.status!) });
      if (faults.releases > 0 && faults.releases--) throw new Error('provider down');
    },
  };
  const { reconciler, effects } = leaseReconciler(api, {
    driver,
    records,
    // A repeat of an event counts on the first one, as on a real server; here it is listed again, written at once (no write interval).
    events: new EventRecorder(
      { create: async (_ns, e) => void events.push(e), updateCount: async (_ns, name) => void events.push(events.find((e) => e.metadata?.name === name)!) },
      'test',
      log,
      'default',
      0,
    ),
    recordScope: { namespace: 'leasehold-system', watchNamespace: 'ns' },
  });
  /** Passes until nothing runs or waits to be taken, as the work queue would run them when effects end. */
  const settle = (key = 'ns/l') => settleOwners({ reconciler, effects }, key, [UID, `record/${UID}`], 12);
  const reasons = () => events.map((e) => e.reason);
  return { api, records, handed, faults, events, reasons, reconciler, effects, settle, lease: () => api.stored('ns', 'l') };
}

describe('the record is written before the provider is called, and the result before status', () => {
  it('launches with the record in place, and records the machine in it before status shows it', async () => {
    const w = world();
    const seen: { phase?: string; record: boolean; providerState?: string }[] = [];
    w.api.beforeStatusWrite = (_name, body) => {
      const rec = w.records.records.get(UID);
      if (body.status?.phase === 'Launching') seen.push({ phase: 'Launching', record: !!rec });
      if (body.status?.providerState) seen.push({ record: !!rec, providerState: rec?.providerState });
    };
    await w.settle();
    expect(seen).toEqual([{ phase: 'Launching', record: true }, { record: true, providerState: '{"dir":"/m/0123abcd"}' }]);
    expect(w.records.records.get(UID)).toMatchObject({ release: { provider: 'command', command: ['/bin/release'] }, machine: MACHINE, namespace: 'ns', name: 'l' });
    expect(w.lease()?.status?.phase).toBe('Ready');
  });

  it('marks the record released once the provider confirms, and deletes it before the finalizer goes', async () => {
    const w = world({ ...launched, phase: 'Ready' });
    w.api.set('ns', 'l', (l) => ({ ...l, metadata: { ...l.metadata, deletionTimestamp: new Date() as never } }));
    let recordWhenFinalizerWent: unknown = 'unset';
    const remove = w.api.writer.removeFinalizer;
    w.api.writer.removeFinalizer = async (l) => {
      recordWhenFinalizerWent = w.records.records.get(UID);
      return remove(l);
    };
    await w.settle();
    expect(w.handed.map((h) => h.verb)).toEqual(['release']);
    expect(recordWhenFinalizerWent).toBeUndefined();
    expect(w.lease()).toBeUndefined();
  });
});

describe('status that differs from the record', () => {
  const tamperings: [string, Partial<LeaseStatus>][] = [
    ['status.release', { release: { provider: 'command', command: ['/bin/sh', '-c', 'touch /tmp/canary'] } }],
    ['status.release', { release: { provider: 'lambda', lambda: { apiKeySecretRef: { name: 'theirs', namespace: 'ns', key: 'apiKey' }, endpoint: 'http://127.0.0.1:1' } } }],
    ['status.machine', { machine: { ssh: { host: '10.9.9.9', port: 22, user: 'root', hostKey: 'ssh-ed25519 BBBB' } } }],
    ['status.providerState', { providerState: '{"dir":"/m/someone-else"}' }],
    ['status.expiresAt', { expiresAt: iso(now + 365 * 24 * 3600_000) }],
    ['status.machineName', { machineName: 'leasehold-ffffffff' }],
  ];

  it.each(tamperings)('%s: probes and releases the way the record says, reports it once, and restores it', async (field, change) => {
    const w = world({ ...launched, phase: 'Ready' });
    const record = structuredClone(w.records.records.get(UID)!);
    w.api.set('ns', 'l', (l) => ({ ...l, status: { ...l.status, ...change } }));
    await w.settle();
    await w.settle();
    expect(w.reasons().filter((r) => r === 'StatusTampered')).toHaveLength(1);
    expect(w.events.find((e) => e.reason === 'StatusTampered')).toMatchObject({ type: 'Warning', message: expect.stringContaining(`${field} changed by someone other than the controller`) });
    const check = w.handed.find((h) => h.verb === 'check')!;
    expect([check.status.machine, check.status.release, check.status.providerState, check.status.expiresAt]).toEqual([record.machine, record.release, record.providerState, record.expiresAt]);
    const restored = w.lease()!.status!;
    expect([restored.machine, restored.release, restored.providerState, restored.expiresAt, restored.machineName]).toEqual([record.machine, record.release, record.providerState, record.expiresAt, record.machineName]);

    // Tampered again, then deleted: the release is the record's too, and the tampering is reported again.
    w.api.set('ns', 'l', (l) => ({ ...l, metadata: { ...l.metadata, deletionTimestamp: new Date() as never }, status: { ...l.status, ...change } }));
    await w.settle();
    const release = w.handed.find((h) => h.verb === 'release')!;
    expect([release.status.release, release.status.providerState, release.status.machineName, release.status.leaseID]).toEqual([record.release, record.providerState, record.machineName, record.leaseID]);
    expect(w.reasons().filter((r) => r === 'StatusTampered')).toHaveLength(2);
    expect(w.lease()).toBeUndefined();
  });

  it('an expiresAt moved later does not keep the machine past the recorded maxLifetime', async () => {
    const w = world({ ...launched, phase: 'Ready', expiresAt: iso(now - 1000) });
    w.api.set('ns', 'l', (l) => ({ ...l, status: { ...l.status, expiresAt: iso(now + 3600_000) } }));
    await w.settle();
    expect(w.lease()?.status).toMatchObject({ phase: 'Released', endReason: 'MaxLifetime' });
  });
});

describe('status the controller never wrote', () => {
  it('a Ready Lease with no record fails StatusTampered: nothing is probed, nothing released', async () => {
    const w = world({ ...launched, phase: 'Ready' }, { record: false });
    await w.settle();
    expect(w.handed).toEqual([]);
    expect(w.lease()?.status).toMatchObject({ phase: 'Failed', reason: 'StatusTampered' });
    expect(w.lease()?.status?.release).toBeUndefined();
    expect(w.events.find((e) => e.reason === 'StatusTampered')?.type).toBe('Warning');
  });

  it('a Releasing Lease with no record is Released without running any release', async () => {
    const w = world({ ...launched, phase: 'Releasing' }, { record: false });
    await w.settle();
    expect(w.handed).toEqual([]);
    expect(w.lease()?.status?.phase).toBe('Released');
  });

  it('a Lease set to Released while its machine runs has the machine released from the record before its finalizer goes', async () => {
    const w = world({ ...launched, phase: 'Ready' });
    w.api.set('ns', 'l', (l) => ({ ...l, status: { ...l.status, phase: 'Released', release: { provider: 'command', command: ['/bin/evil'] } } }));
    await w.settle();
    expect(w.handed.map((h) => [h.verb, h.status.release?.command])).toEqual([['release', ['/bin/release']]]);
    expect(w.records.records.size).toBe(0);
    expect(w.lease()?.metadata?.finalizers).toEqual([]);
    expect(w.reasons()).toContain('StatusTampered');
  });

  it('a Lease set back to Pending while its machine runs has that machine released before it is launched again', async () => {
    const w = world({ ...launched, phase: 'Ready' });
    w.api.set('ns', 'l', (l) => ({ ...l, status: { phase: 'Pending' } }));
    await w.settle();
    const verbs = w.handed.map((h) => h.verb);
    expect(verbs.slice(0, 2)).toEqual(['release', 'acquire']);
    expect(w.handed[0]!.status.providerState).toBe(launched.providerState);
  });
});

describe('installations sharing a namespace', () => {
  it("leaves a Lease another installation stamped alone: no status write, no release, no event", async () => {
    const w = world({ ...launched, phase: 'Ready' }, { record: false, stamp: 'other001' });
    const before = w.lease()!.metadata!.resourceVersion;
    await w.settle();
    expect(w.handed).toEqual([]);
    expect(w.lease()!.metadata!.resourceVersion).toBe(before);
    expect(w.reasons()).toEqual([]);
  });

  it('leaves an unstamped machine-holding Lease with no record alone, reporting it once', async () => {
    const w = world({ ...launched, phase: 'Ready' }, { record: false, stamp: null });
    await w.settle();
    await w.settle();
    expect(w.handed).toEqual([]);
    expect(w.lease()?.status?.phase).toBe('Ready');
    expect(w.reasons()).toEqual(['NotTakenOn']);
  });

  it('stamps a new Lease before anything else is written for it', async () => {
    const w = world(undefined, { stamp: null });
    await w.settle();
    const lease = w.lease()!;
    expect(lease.metadata?.annotations).toEqual({ 'leasehold.dev/installation': 'inst0001' });
    expect(w.handed.map((h) => h.verb)[0]).toBe('acquire');
  });

  it('takes on an unstamped Lease whose record it holds (an upgrade), and sets back a stamp naming another installation', async () => {
    const w = world({ ...launched, phase: 'Ready' }, { stamp: null });
    await w.settle();
    expect(w.lease()?.metadata?.annotations).toEqual({ 'leasehold.dev/installation': 'inst0001' });
    await w.records.put({ ...(await w.records.get(UID))!, installation: 'inst0001' });
    w.api.set('ns', 'l', (l) => ({ ...l, metadata: { ...l.metadata, annotations: { 'leasehold.dev/installation': 'other001' } } }));
    await w.settle();
    expect(w.lease()?.metadata?.annotations).toEqual({ 'leasehold.dev/installation': 'inst0001' });
    expect(w.reasons()).toContain('InstallationConflict');
    expect(w.lease()?.status?.phase).toBe('Ready');
  });

  it('loses a stamping race without writing anything: the other installation took the Lease', async () => {
    const w = world(undefined, { stamp: null });
    w.api.beforeStamp = () => {
      const l = w.lease()!;
      w.api.create({ ...l, metadata: { ...l.metadata, annotations: { 'leasehold.dev/installation': 'other001' } } });
    };
    await expect(w.reconciler.reconcile('ns/l')).rejects.toMatchObject({ code: 409 });
    w.api.beforeStamp = undefined;
    await w.settle();
    expect(w.handed).toEqual([]);
    expect(w.lease()?.status).toBeUndefined();
    expect(w.lease()?.metadata?.finalizers).toEqual([]);
  });
});

describe('Leases from before records', () => {
  it('are given a record from their status once; later Leases without one are not', async () => {
    const w = world({ ...launched, phase: 'Ready' }, { record: false, adopted: false });
    await w.settle();
    expect(w.records.marked).toBe(true);
    expect(w.records.records.get(UID)).toMatchObject({ release: launched.release, machine: MACHINE, providerState: launched.providerState });
    expect(w.lease()?.status?.phase).toBe('Ready');
    expect(w.handed.map((h) => h.verb)).toEqual(['check']);
  });
});

describe('the sweep of records whose Lease vanished', () => {
  it('releases the machine from the record and deletes it; leaves records of Leases that exist, or of other namespaces', async () => {
    const w = world({ ...launched, phase: 'Ready' });
    const gone = { ...recordOf(w.lease()!, launched), uid: 'gone-uid', name: 'gone', release: { provider: 'command' as const, command: ['/bin/release', 'gone'] } };
    await w.records.put(gone);
    await w.records.put({ ...gone, uid: 'elsewhere', namespace: 'other' });
    await w.reconciler.reconcile(RECORD_SWEEP_KEY);
    await w.effects.idle();
    await w.reconciler.reconcile(RECORD_SWEEP_KEY);
    expect(w.handed.map((h) => [h.verb, h.status.release?.command])).toEqual([['release', ['/bin/release', 'gone']]]);
    expect([...w.records.records.keys()].sort()).toEqual([UID, 'elsewhere'].sort());
    expect(w.events.filter((e) => e.involvedObject.name === 'leasehold-lease-gone-uid').map((e) => e.reason)).toEqual(['LeaseVanished', 'ReleasedFromRecord']);
  });

  it("waits for the Lease's own acquire to end before releasing from the record, so a machine it makes is not left behind", async () => {
    const w = world();
    let open!: () => void;
    w.faults.acquireGate = new Promise((resolve) => (open = resolve));
    // Acquire until the provider is called (the record is written before that), then the Lease vanishes.
    for (let i = 0; i < 6 && !w.handed.some((h) => h.verb === 'acquire'); i++) {
      await w.reconciler.reconcile('ns/l');
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(w.handed.map((h) => h.verb)).toEqual(['acquire']);
    expect(w.records.records.has(UID)).toBe(true);
    w.api.set('ns', 'l', (l) => ({ ...l, metadata: { ...l.metadata, finalizers: [] } }));
    await w.api.writer.delete('ns', 'l');
    await w.reconciler.reconcile(RECORD_SWEEP_KEY);
    await new Promise((resolve) => setImmediate(resolve));
    expect(w.handed.map((h) => h.verb)).toEqual(['acquire']);
    open();
    await w.effects.idle();
    for (let i = 0; i < 3; i++) {
      await w.reconciler.reconcile(RECORD_SWEEP_KEY);
      await w.effects.idle();
    }
    expect(w.handed.map((h) => h.verb)).toEqual(['acquire', 'release']);
    expect(w.records.records.size).toBe(0);
  });

  it('retries a release that failed', async () => {
    const w = world();
    const gone = { ...recordOf(w.lease()!, launched), uid: 'gone-uid', name: 'gone' };
    await w.records.put(gone);
    w.faults.releases = 1;
    await w.reconciler.reconcile(RECORD_SWEEP_KEY);
    await w.effects.idle();
    await w.reconciler.reconcile(RECORD_SWEEP_KEY);
    await w.effects.idle();
    await w.reconciler.reconcile(RECORD_SWEEP_KEY);
    expect(w.handed.map((h) => h.verb)).toEqual(['release', 'release']);
    expect(w.records.records.size).toBe(0);
    expect(w.reasons()).toEqual(['LeaseVanished', 'ReleaseFailed', 'ReleasedFromRecord']);
  });
});
