// One Lease reconciler on a pretend API server, shared by the reconciler
// tests: each test brings its Leases, its driver, its records and, where it
// looks at them, its event sink; the wiring (the effect runner, the status
// writer, the one Offer "box", the settings) is the same for all.
import pino from 'pino';
import type { Lease, LeaseStatus, Offer } from '../../../src/api/index.js';
import { EffectRunner } from '../../../src/kube/effects.js';
import { EventRecorder } from '../../../src/kube/events.js';
import { StatusWriter } from '../../../src/kube/status.js';
import type { FakeAPIServer } from '../../../src/kube/testing/fake-api.js';
import type { LeaseDriver } from '../driver.js';
import type { LeaseEffectResult, LeaseSettings } from '../decision.js';
import { LeaseReconciler, type LeaseReconcilerDeps } from '../reconciler.js';
import type { MemoryRecordStore } from './records.js';

export const log = pino({ level: 'silent' });

/** The Offer every harness Lease can be scheduled on: a command Offer of one linux/amd64 CPU. */
export const BOX = {
  apiVersion: 'leasehold.dev/v1alpha1',
  kind: 'Offer',
  metadata: { name: 'box', generation: 1 },
  spec: { command: { acquire: ['/a'], release: ['/bin/release'], shape: { os: 'linux', arch: 'amd64', cpus: 1 } }, idleTimeout: '20m', maxLifetime: '12h' },
} as unknown as Offer;

export interface LeaseSeed {
  name: string;
  uid: string;
  status?: Partial<LeaseStatus> | undefined;
  /** Whether the release finalizer is on it already (as on a Lease this controller launched). */
  finalizer?: boolean;
  annotations?: Record<string, string>;
}

/** A Lease in namespace ns asking for `cpus>=1`, created on the pretend API server. */
export function seedLease(api: FakeAPIServer<Lease>, seed: LeaseSeed): void {
  api.create({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: {
      name: seed.name,
      namespace: 'ns',
      uid: seed.uid,
      generation: 1,
      creationTimestamp: new Date() as never,
      finalizers: seed.finalizer ? ['leasehold.dev/release'] : [],
      ...(seed.annotations ? { annotations: seed.annotations } : {}),
    },
    spec: { where: 'cpus>=1', sshKeys: [] },
    ...(seed.status ? { status: structuredClone(seed.status) } : {}),
  } as unknown as Lease);
}

export interface HarnessOptions {
  driver: LeaseDriver;
  records: MemoryRecordStore;
  events?: EventRecorder;
  recordScope?: LeaseReconcilerDeps['recordScope'];
  settings?: Partial<LeaseSettings>;
  /** The effect runner (a manager's, to test its stop); a fresh one when absent. */
  effects?: EffectRunner<LeaseEffectResult>;
  /** Where an ended effect puts the Lease's key back (a work queue); nowhere when absent. */
  enqueue?: (key: string) => void;
  /** The Leases as the reconciler's informer holds them (one that lags the server); the server's own when absent. */
  leases?: LeaseReconcilerDeps['leases'];
}

/** A reconciler and its effect runner over `api`; a second call is a restarted controller over the same API server and records. */
export function leaseReconciler(api: FakeAPIServer<Lease>, opts: HarnessOptions): { reconciler: LeaseReconciler; effects: EffectRunner<LeaseEffectResult> } {
  const effects = opts.effects ?? new EffectRunner<LeaseEffectResult>();
  const reconciler = new LeaseReconciler({
    effects,
    enqueue: opts.enqueue ?? (() => {}),
    leases: opts.leases ?? api.cache,
    offers: { get: (_ns, name) => (name === 'box' ? BOX : undefined), list: () => [BOX] },
    status: new StatusWriter(api.statusClient),
    writer: api.writer,
    events: opts.events ?? new EventRecorder(api.events, 'test', log),
    driver: opts.driver,
    records: opts.records,
    ...(opts.recordScope ? { recordScope: opts.recordScope } : {}),
    settings: { installationID: 'inst0001', maxLeases: 2, acquireTimeoutMs: 60_000, checkIntervalMs: 1000, ...opts.settings },
    log,
  });
  return { reconciler, effects };
}

/** Passes until none of `owners`' effects runs or waits to be taken: what the work queue would do as effects end. */
export async function settle(r: { reconciler: LeaseReconciler; effects: EffectRunner<LeaseEffectResult> }, key: string, owners: string[], passes = 10): Promise<void> {
  for (let i = 0; i < passes; i++) {
    await r.reconciler.reconcile(key);
    await r.effects.idle();
    if (!owners.some((o) => r.effects.get(o))) return;
  }
}
