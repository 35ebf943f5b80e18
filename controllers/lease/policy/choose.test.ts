import { describe, it, expect } from '@jest/globals';
import { parseWhere, type ParsedWhere } from '../../../src/api/where.js';
import { MAX_REASONS, chooseOffer, type OfferCandidate } from './choose.js';

const where = (raw: string): ParsedWhere => {
  const p = parseWhere(raw);
  if (!p.ok) throw new Error(p.error);
  return p.value;
};
const gpuBox = (name: string, price?: number, extra: Partial<OfferCandidate> = {}): OfferCandidate => ({
  name,
  offer: name.split('/')[0]!,
  shape: { os: 'linux', arch: 'amd64', cpus: 8, gpu: 'H100', gpus: 1, vramGiB: 80 },
  ...(price === undefined ? {} : { pricePerHour: price }),
  ...extra,
});

describe('chooseOffer', () => {
  it('over hundreds of Offers names the first few it refused and counts the rest', () => {
    const boxes = Array.from({ length: 300 }, (_, i) => gpuBox(`b${i}`, 1, { shape: { os: 'linux', arch: 'amd64', cpus: 2, gpus: 0 } }));
    const r = chooseOffer(where('gpu'), 'gpu', [gpuBox('busy', 1, { unavailable: 'sold out', noCapacity: false }), ...boxes], undefined);
    expect(r.ok).toBe(false);
    const message = !r.ok ? r.message : '';
    expect(message).toContain('busy: sold out; b0: requires 1 GPU (has none)');
    expect(message).toContain(`b${MAX_REASONS - 2}: requires`);
    expect(message).not.toContain(`b${MAX_REASONS - 1}:`);
    expect(message).toContain(`and ${301 - MAX_REASONS} more (kubectl get offers.leasehold.dev)`);
  });

  it('judges each where-expression on its own, however many share the same Offers', () => {
    const shared = [gpuBox('a', 1)];
    for (let cpus = 1; cpus <= 600; cpus++) {
      const raw = `cpus>=${cpus}`;
      expect({ cpus, ok: chooseOffer(where(raw), raw, shared, undefined).ok }).toEqual({ cpus, ok: cpus <= 8 });
    }
    expect(chooseOffer(where('cpus>=4'), 'cpus>=4', shared, undefined).ok).toBe(true);
  });

  it('takes the cheapest matching candidate, and a priced one (even 0) before an unpriced one', () => {
    const r = chooseOffer(where('gpu=h100'), 'gpu=h100', [gpuBox('a', 3), gpuBox('b', 2), gpuBox('c')], undefined);
    expect(r.ok && r.candidate.name).toBe('b');
    const z = chooseOffer(where('gpu'), 'gpu', [gpuBox('free', 0), gpuBox('unpriced')], undefined);
    expect(z.ok && z.candidate.name).toBe('free');
  });

  it('breaks ties at random', () => {
    const seen = new Set<string>();
    for (const k of [0.1, 0.9]) {
      let i = 0;
      const r = chooseOffer(where('gpu'), 'gpu', [gpuBox('x', 1), gpuBox('y', 1)], undefined, () => (i++ === 0 ? k : 1 - k));
      if (r.ok) seen.add(r.candidate.name);
    }
    expect([...seen].sort()).toEqual(['x', 'y']);
  });

  it('narrows to one Offer with spec.offer, including all of a Lambda Offer\'s types', () => {
    const r = chooseOffer(where('gpu'), 'gpu', [gpuBox('cheap', 1), gpuBox('lambda/gpu-1x-h100', 2.49), gpuBox('lambda/gpu-8x', 20)], 'lambda');
    expect(r.ok && r.candidate.name).toBe('lambda/gpu-1x-h100');
    const missing = chooseOffer(where('gpu'), 'gpu', [gpuBox('cheap', 1)], 'nope');
    expect(missing.ok).toBe(false);
    expect(!missing.ok && missing.message).toContain('spec.offer names nope');
  });

  it('says what each candidate lacks, and why a matching one is unavailable', () => {
    const r = chooseOffer(where('gpus>=8'), 'gpus>=8', [gpuBox('one', 1), gpuBox('l/gpu-8x', 23.92, { shape: { os: 'linux', arch: 'amd64', gpu: 'H100', gpus: 8 }, unavailable: 'listed at $23.92/h, above the cap of $10.00/h; raise spec.lambda.maxPricePerHour to rent it' })], undefined);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.message).toContain('one: ');
    expect(r.message).toContain('l/gpu-8x: listed at $23.92/h');
    expect(r.noCapacity).toBeUndefined();
  });

  it('names at most MAX_REASONS candidates in a refusal, the unavailable ones first, and counts the rest', () => {
    const lacking = Array.from({ length: 100 }, (_, i) => gpuBox(`cpu-${i}`, 1, { shape: { os: 'linux', arch: 'amd64', cpus: 4 } }));
    const capped = gpuBox('l/gpu-8x', 23.92, { unavailable: 'listed at $23.92/h, above the cap of $10.00/h' });
    const r = chooseOffer(where('gpu'), 'gpu', [...lacking, capped], undefined);
    if (r.ok) throw new Error('chose an Offer');
    const named = r.message.split('; ').filter((part) => /^(no Offer matches gpu: )?[\w/-]+: /.test(part));
    expect(named).toHaveLength(MAX_REASONS);
    expect(named[0]).toBe('no Offer matches gpu: l/gpu-8x: listed at $23.92/h, above the cap of $10.00/h');
    expect(r.message).toContain('cpu-0: ');
    expect(r.message).not.toContain(`cpu-${MAX_REASONS - 1}: `);
    expect(r.message).toMatch(new RegExp(`; and ${101 - MAX_REASONS} more \\(kubectl get offers.leasehold.dev\\)$`));
    expect(r.message.length).toBeLessThan(400);
  });

  it('flags a Lease that only candidates without capacity could serve', () => {
    const r = chooseOffer(where('gpu'), 'gpu', [gpuBox('l/a10', 0.75, { unavailable: 'no capacity in us-east-1', noCapacity: true })], undefined);
    expect(!r.ok && r.noCapacity).toBe(true);
  });

  it.each<[string, Partial<OfferCandidate>[], string | undefined]>([
    ['one type sold out, the other over the price cap', [{ unavailable: 'no capacity', noCapacity: true }, { unavailable: 'above the cap', blockedBy: 'OverPriceCap' }], 'OverPriceCap'],
    ['the namespace not selected', [{ unavailable: 'not selected', blockedBy: 'NamespaceNotAllowed' }], 'NamespaceNotAllowed'],
    ['the namespace at its cap', [{ unavailable: 'at the cap', blockedBy: 'MaxLeasesPerNamespace' }, { unavailable: 'at the cap', blockedBy: 'MaxLeasesPerNamespace' }], 'MaxLeasesPerNamespace'],
    ['two different policies', [{ unavailable: 'x', blockedBy: 'NamespaceNotAllowed' }, { unavailable: 'y', blockedBy: 'MaxLeasesPerNamespace' }], undefined],
    ['a policy and a plain unavailability', [{ unavailable: 'x', blockedBy: 'NamespaceNotAllowed' }, { unavailable: 'not Ready' }], undefined],
  ])('names the one policy that blocks every match: %s', (_name, extras, reason) => {
    const r = chooseOffer(where('gpu'), 'gpu', extras.map((e, i) => gpuBox(`o${i}`, 1, e)), undefined);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toBe(reason ?? undefined);
  });

  it('names at most MAX_REASONS candidates in a refusal, however many Offers there are', () => {
    const many = Array.from({ length: 500 }, (_, i) => gpuBox(`offer-with-a-rather-long-name-${i}`, 1, { shape: { os: 'linux', arch: 'amd64', cpus: 1, gpus: 0 } }));
    const r = chooseOffer(where('gpu'), 'gpu', many, undefined);
    expect(!r.ok && r.message).toMatch(/; and 495 more \(kubectl get offers.leasehold.dev\)$/);
    expect(!r.ok && r.message.length).toBeLessThan(2000);
  });
});
