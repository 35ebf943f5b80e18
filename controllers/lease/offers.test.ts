import { describe, expect, it } from '@jest/globals';
import type { Offer, OfferCandidate } from '../../src/api/index.js';
import { candidatesOf, offerChangedForScheduling } from './offers.js';

const listed = (instanceType: string, pricePerHour: number, gpus: number): OfferCandidate => ({
  name: instanceType.replace(/_/g, '-'),
  instanceType,
  region: 'us-east-1',
  gpus,
  cpus: 8,
  arch: 'amd64',
  pricePerHour,
  available: true,
});

describe('candidatesOf', () => {
  it('makes an Offer object\'s candidates once, and anew for the object that replaces it when the Offer changes', () => {
    const box = (cpus: number) => ({ metadata: { name: 'box' }, spec: { command: { acquire: ['/a'], release: ['/r'], shape: { cpus } } } }) as unknown as Offer;
    const before = box(2);
    const first = candidatesOf(before);
    expect(candidatesOf(before)).toBe(first);
    const after = box(4);
    expect(candidatesOf(after)).not.toBe(first);
    expect(candidatesOf(after)[0]!.shape.cpus).toBe(4);
    expect(Object.isFrozen(first)).toBe(true);
  });

  it('gives each Lambda instance type its own listed price, even if an old Offer still carries spec.pricePerHour', () => {
    // Stored before the schema refused it: admission now rejects pricePerHour on a Lambda Offer.
    const offer = {
      metadata: { name: 'lambda' },
      spec: { lambda: { apiKeySecretRef: { name: 'k', namespace: 'ns' } }, pricePerHour: 0.5 },
      status: {
        conditions: [{ type: 'Ready', status: 'True' }],
        candidates: [listed('gpu_1x_a10', 0.75, 1), listed('gpu_8x_h100', 23.92, 8)],
      },
    } as unknown as Offer;
    expect(candidatesOf(offer).map((c) => [c.instanceType, c.pricePerHour])).toEqual([
      ['gpu_1x_a10', 0.75],
      ['gpu_8x_h100', 23.92],
    ]);
  });

  it('prices a command Offer by its spec.pricePerHour', () => {
    const offer = { metadata: { name: 'box' }, spec: { command: { acquire: ['/a'], release: ['/r'], shape: { cpus: 4 } }, pricePerHour: 1.5 } } as unknown as Offer;
    expect(candidatesOf(offer)[0]!.pricePerHour).toBe(1.5);
  });
});

describe('offerChangedForScheduling', () => {
  const lambda = (extra: Record<string, unknown> = {}, candidates = [listed('gpu_1x_a10', 0.75, 1)]) =>
    ({
      metadata: { name: 'lambda', generation: 1 },
      spec: { lambda: { apiKeySecretRef: { name: 'k' } } },
      status: { conditions: [{ type: 'Ready', status: 'True' }], candidates, lastListTime: '2026-12-01T10:00:00Z', ...extra },
    }) as unknown as Offer;

  it('wakes waiting Leases for a change a decision reads, and for nothing else', () => {
    const base = lambda();
    expect(offerChangedForScheduling(base, base)).toBe(false);
    // A status write that only restates the same listing (a new resourceVersion, another condition's time).
    expect(offerChangedForScheduling(lambda({ observedGeneration: 1 }), base)).toBe(false);
    expect(offerChangedForScheduling(lambda({}, [listed('gpu_1x_a10', 0.8, 1)]), base)).toBe(true);
    expect(offerChangedForScheduling(lambda({ lastListTime: '2026-12-01T10:05:00Z' }), base)).toBe(true);
    expect(offerChangedForScheduling(lambda({ conditions: [{ type: 'Ready', status: 'False', reason: 'Unauthorized', message: 'no' }] }), base)).toBe(true);
    expect(offerChangedForScheduling({ ...base, spec: { ...base.spec, maxLeasesPerNamespace: 2 } } as Offer, base)).toBe(true);
    expect(offerChangedForScheduling({ ...base, metadata: { ...base.metadata, generation: 2 } } as Offer, base)).toBe(true);
  });
});
