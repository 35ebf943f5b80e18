import { describe, it, expect } from '@jest/globals';
import { offerStatus } from './status.js';

const offer = (spec: object) => ({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Offer', metadata: { name: 'box', generation: 3 }, spec }) as never;
const lease = (offerName: string, phase: string) => ({ metadata: { name: phase }, spec: { where: 'gpu' }, status: { offer: offerName, phase } }) as never;
const now = new Date('2026-12-01T00:00:00Z');

describe('offerStatus', () => {
  it('counts only active Leases of this Offer and is Ready for a command Offer', () => {
    const st = offerStatus(offer({ command: { acquire: ['/a'], release: ['/r'], shape: {} } }),
      [lease('box', 'Ready'), lease('box', 'Launching'), lease('box', 'Released'), lease('other', 'Ready'), lease('box', 'Releasing')], now);
    expect(st.activeLeases).toBe(3);
    expect(st.observedGeneration).toBe(3);
    expect(st.conditions?.[0]).toMatchObject({ type: 'Ready', status: 'True', reason: 'CommandConfigured' });
  });
  it('says a Lambda Offer has not been listed yet', () => {
    const st = offerStatus(offer({ lambda: {} }), [], now);
    expect(st.conditions?.[0]).toMatchObject({ status: 'False', reason: 'NotListed' });
  });
  it('shows the candidates of a successful listing and names the cheapest available one', () => {
    const c = (name: string, price: number, available: boolean) => ({ name, instanceType: name.replace(/-/g, '_'), region: 'us-east-1', gpus: 1, cpus: 8, arch: 'amd64' as const, pricePerHour: price, available });
    const listing = { ok: true as const, at: now.getTime(), generation: 3, candidates: [c('gpu-1x-a10', 0.75, false), c('gpu-1x-a100', 1.29, true)] };
    const st = offerStatus(offer({ lambda: {} }), [], now, listing);
    expect(st.candidates).toHaveLength(2);
    expect(st.lastListTime).toBe('2026-12-01T00:00:00Z');
    expect(st.conditions?.[0]).toMatchObject({ status: 'True', reason: 'Listed' });
    expect(st.conditions?.[0]?.message).toContain('1 of 2');
    expect(st.conditions?.[0]?.message).toContain('gpu-1x-a100 at $1.29/h');
  });
  it('keeps the last candidates but turns Ready False with the reason of a failed listing', () => {
    const prev = { candidates: [{ name: 'x' }], lastListTime: '2026-11-30T00:00:00Z' };
    const st = offerStatus({ ...(offer({ lambda: {} }) as object), status: prev } as never, [], now, {
      ok: false, at: now.getTime(), generation: 3, reason: 'APIKeySecretNotFound', message: 'Secret ops/lambda does not exist', failures: 1,
    });
    expect(st.candidates).toEqual(prev.candidates);
    expect(st.lastListError).toBe('Secret ops/lambda does not exist');
    expect(st.conditions?.[0]).toMatchObject({ status: 'False', reason: 'APIKeySecretNotFound' });
  });
});
