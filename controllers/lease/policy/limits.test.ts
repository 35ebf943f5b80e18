import { describe, expect, it } from '@jest/globals';
import type { Lease, Offer } from '../../../src/api/index.js';
import { limitFor, parseNamespaceLeaseLimits } from './limits.js';
import { schedule } from '../phases/pending.js';
import { leaseWith, NOW } from '../testing/phase-input.js';

const offer = (name: string, pricePerHour?: number) =>
  ({
    metadata: { name, generation: 1 },
    spec: { command: { acquire: ['/a'], release: ['/r'], shape: { os: 'linux', arch: 'amd64', cpus: 4 } }, ...(pricePerHour === undefined ? {} : { pricePerHour }) },
  }) as unknown as Offer;
const pending = (extra: Partial<Lease['spec']> = {}) => ({ ...leaseWith({}), spec: { where: 'cpus>=2', sshKeys: [], ...extra } }) as Lease;

describe('the admin caps per namespace', () => {
  const limits = parseNamespaceLeaseLimits('{"perNamespace":{"maxLeases":2,"maxPricePerHour":5},"namespaces":{"team-gpu":{"maxLeases":4}}}', '--namespace-lease-limits');

  it('are every namespace\'s unless it is named, and a named one has its own in their place', () => {
    expect(limitFor(limits, 'team-a')).toEqual({ maxLeases: 2, maxPricePerHour: 5, source: 'leaseLimits.perNamespace' });
    expect(limitFor(limits, 'team-gpu')).toEqual({ maxLeases: 4, source: 'leaseLimits.namespaces.team-gpu' });
    expect(limitFor(undefined, 'x')).toEqual({ maxLeases: 0, source: 'leaseLimits.perNamespace' });
  });

  it.each([
    ['not json', /must be JSON/],
    ['{"perNamespace":{"maxLeases":-1}}', /leaseLimits\.perNamespace\.maxLeases: .*0 or more/],
    ['{"perNamespace":{"maxleases":1}}', /leaseLimits\.perNamespace/],
    ['{"namespaces":{"Team":{}}}', /leaseLimits\.namespaces\.Team/],
  ])('refuse %s, naming the value', (text, want) => {
    expect(() => parseNamespaceLeaseLimits(text, '--namespace-lease-limits')).toThrow(want);
  });

  const input = (namespace: string, active: string[], offers: Offer[], lease = pending()) =>
    schedule({
      lease: { ...lease, metadata: { ...lease.metadata, namespace } },
      offers,
      active: active.length,
      maxLeases: 100,
      namespace: { labels: {}, activeOffers: active },
      namespaceLimit: limitFor(limits, namespace),
      installationID: 'inst0001',
      now: NOW,
      random: () => 0,
    });

  it('hold a namespace to its maxLeases, whatever the Offers allow', () => {
    expect(input('team-a', ['cheap', 'cheap'], [offer('cheap', 1)]).event).toMatchObject({
      type: 'UNSCHEDULABLE',
      reason: 'MaxLeasesPerNamespace',
      message: expect.stringContaining("the platform admin's leaseLimits.perNamespace.maxLeases is 2"),
    });
    expect(input('team-gpu', ['cheap', 'cheap'], [offer('cheap', 1)]).event).toMatchObject({ type: 'OFFER_CHOSEN' });
  });

  it('never choose a machine above the price cap, even one the Lease names', () => {
    expect(input('team-a', [], [offer('dear', 9), offer('cheap', 4)]).event).toMatchObject({ type: 'OFFER_CHOSEN', offer: 'cheap' });
    expect(input('team-a', [], [offer('dear', 9)], pending({ offer: 'dear' })).event).toMatchObject({
      type: 'UNSCHEDULABLE',
      reason: 'NamespacePriceCap',
      message: expect.stringContaining("costs $9.00/h, above the platform admin's leaseLimits.perNamespace.maxPricePerHour 5 for namespace team-a"),
    });
    // A named namespace without a price cap of its own has none.
    expect(input('team-gpu', [], [offer('dear', 9)]).event).toMatchObject({ type: 'OFFER_CHOSEN', offer: 'dear' });
  });
});
