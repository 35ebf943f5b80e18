import { describe, it, expect } from '@jest/globals';
import { StatusWriter, type StatusClient } from './status.js';
import { mergePatch, deepEqual } from './mergepatch.js';
import { setCondition } from './conditions.js';
import type { ResourceRef } from './resource.js';

const ref: ResourceRef = { group: 'leasehold.dev', version: 'v1alpha1', plural: 'leases', kind: 'Lease', namespaced: true };

class RecordingClient implements StatusClient {
  calls: { namespace?: string; name: string; body: any }[] = [];
  async patchStatus(_ref: ResourceRef, namespace: string | undefined, name: string, body: unknown) {
    this.calls.push({ namespace, name, body });
    return { metadata: { name, namespace, resourceVersion: '2' }, status: (body as any).status };
  }
}

const lease = (status: unknown) => ({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Lease', metadata: { name: 'a', namespace: 'ns', resourceVersion: '1' }, spec: {}, status });

describe('StatusWriter', () => {
  it('sends nothing when the status is unchanged, whatever the key order', async () => {
    const client = new RecordingClient();
    const w = new StatusWriter(client);
    const obj = lease({ phase: 'Pending', conditions: [{ type: 'Scheduled', status: 'False' }] });
    const out = await w.write(ref, obj, { conditions: [{ status: 'False', type: 'Scheduled' }], phase: 'Pending' });
    expect(out).toBe(obj);
    expect(client.calls).toHaveLength(0);
    expect(w.skipped).toBe(1);
  });

  it('patches only what changed, with the resourceVersion it decided from', async () => {
    const client = new RecordingClient();
    const w = new StatusWriter(client);
    await w.write(ref, lease({ phase: 'Pending', message: 'old', reason: 'X' }), { phase: 'Launching', message: 'old' });
    expect(client.calls).toEqual([{ namespace: 'ns', name: 'a', body: { metadata: { resourceVersion: '1' }, status: { phase: 'Launching', reason: null } } }]);
  });

  it('can write without the precondition when asked', async () => {
    const client = new RecordingClient();
    await new StatusWriter(client).write(ref, lease(undefined), { phase: 'Pending' }, { unconditional: true });
    expect(client.calls[0]!.body).toEqual({ status: { phase: 'Pending' } });
  });
});

describe('mergePatch', () => {
  it('is undefined for equal documents and replaces arrays whole', () => {
    expect(mergePatch({ a: [1, 2], b: { c: 1 } }, { b: { c: 1 }, a: [1, 2] })).toBeUndefined();
    expect(mergePatch({ a: [1, 2] }, { a: [1] })).toEqual({ a: [1] });
    expect(mergePatch({ a: { b: 1, c: 2 } }, { a: { b: 1 } })).toEqual({ a: { c: null } });
    expect(deepEqual({ t: new Date('2026-01-01T00:00:00Z') }, { t: '2026-01-01T00:00:00.000Z' })).toBe(true);
  });
});

describe('setCondition', () => {
  const t0 = new Date('2026-01-01T00:00:00Z');
  const t1 = new Date('2026-01-01T00:05:00Z');
  it('moves lastTransitionTime only when the status changes', () => {
    const a = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'Launching', message: '' }, 1, t0);
    const b = setCondition(a, { type: 'Ready', status: 'False', reason: 'Probing', message: 'ssh' }, 2, t1);
    expect(b[0]).toEqual({ type: 'Ready', status: 'False', reason: 'Probing', message: 'ssh', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 2 });
    const c = setCondition(b, { type: 'Ready', status: 'True', reason: 'MachineReady', message: '' }, 2, t1);
    expect(c[0]!.lastTransitionTime).toBe('2026-01-01T00:05:00Z');
    expect(a[0]!.reason).toBe('Launching');
  });
});
