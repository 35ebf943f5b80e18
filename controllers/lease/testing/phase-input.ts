// Builders for table tests of the phase functions: a Lease in a given
// phase and status, and the effect state a pass would see.
import type { Lease, LeaseStatus } from '../../../src/api/index.js';
import type { EffectState } from '../../../src/kube/effects.js';
import type { LeaseEffectResult, PhaseInput, Wake } from '../decision.js';

export const NOW = Date.parse('2026-12-03T10:00:00Z');
export const at = (offsetMs: number) => new Date(NOW + offsetMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
export const MACHINE = { ssh: { host: '10.0.0.5', port: 22, user: 'u', hostKey: 'ssh-ed25519 AAAA' } };
export const FACTS = { os: 'linux', arch: 'amd64', cpus: 2, memoryGiB: 4, gpus: 0 };

export function leaseWith(status: Partial<LeaseStatus>, meta: Partial<NonNullable<Lease['metadata']>> = {}): Lease {
  return {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: { name: 'l', namespace: 'ns', uid: '0123abcd-0000-0000-0000-000000000000', generation: 1, ...meta },
    spec: { where: 'cpus>=1', sshKeys: [] },
    status: status as LeaseStatus,
  } as Lease;
}

export function input(lease: Lease, effect?: EffectState<LeaseEffectResult>, wake?: Wake): PhaseInput {
  return { lease, now: NOW, settings: { installationID: 'inst0001', maxLeases: 2, acquireTimeoutMs: 600_000, checkIntervalMs: 60_000 }, effect, wake };
}

export const running = (id: string): EffectState<LeaseEffectResult> => ({ state: 'running', id });
export const done = (result: LeaseEffectResult): EffectState<LeaseEffectResult> => ({ state: 'done', id: `${result.kind}/1`, result });
