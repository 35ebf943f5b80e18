// A Lease that no Offer can serve waits Pending with a reason and an event,
// and costs no further writes until an Offer appears.
import { describe, it, expect } from '@jest/globals';
import { getJSON, waitFor } from './support/kube.js';
import { leaseSuite } from './support/suite.js';

const fx = leaseSuite('no-offer');

describe('a Lease with no matching Offer', () => {
  it('waits Pending with Scheduled=False/NoMatchingOffer and an event, then stays quiet', async () => {
    await fx.lease('train', { where: 'gpu=h100' });
    const lease = await waitFor('Pending lease', async () => {
      const l = await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', 'train']);
      return l?.status?.phase === 'Pending' && l.status.reason === 'NoMatchingOffer' ? l : undefined;
    });
    const scheduled = lease.status.conditions.find((c: any) => c.type === 'Scheduled');
    expect(scheduled).toMatchObject({ status: 'False', reason: 'NoMatchingOffer', observedGeneration: 1 });
    expect(lease.status.message).toMatch(/gpu=h100/);

    const events = await waitFor('NoMatchingOffer event', async () => {
      const list = await getJSON(fx.kubectl, ['-n', fx.ns, 'events', '--field-selector', 'involvedObject.name=train']);
      return list.items.find((e: any) => e.reason === 'NoMatchingOffer');
    });
    expect(events.type).toBe('Warning');
    const describe = await fx.kubectl(['-n', fx.ns, 'describe', 'leases.leasehold.dev', 'train']);
    expect(describe.stdout).toMatch(/NoMatchingOffer/);

    const before = await fx.controller.writes();
    await new Promise((r) => setTimeout(r, 5000));
    expect(await fx.controller.writes()).toBe(before);
  });

  it('is reconciled again as soon as an Offer appears', async () => {
    const offerName = await fx.offer('no-offer', {
      acquire: ['/bin/false'],
      release: ['/bin/true'],
      shape: { os: 'linux', arch: 'amd64', cpus: 4, gpu: 'H100 80GB', vramGiB: 80 },
      pricePerHour: 2.5,
    });
    const lease = await waitFor('Lease scheduled on the new Offer', async () => {
      const l = await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', 'train']);
      return l?.status?.offer === offerName ? l : undefined;
    });
    const scheduled = lease.status.conditions.find((c: any) => c.type === 'Scheduled');
    expect(scheduled).toMatchObject({ status: 'True' });
  });
});
