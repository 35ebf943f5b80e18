// A Lease that no Offer can serve waits Pending with a reason and an event,
// and costs no further writes until an Offer appears.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';

const kubectl = testKubectl();
let ns: string;
let ctl: ControllerProcess;
const offerName = `no-offer-${Date.now().toString(36)}`;

beforeAll(async () => {
  ns = await freshNamespace(kubectl, 'no-offer');
  ctl = await startController(process.env.E2E_KUBECONFIG!, ['--watch-namespace', ns, '--leader-election-namespace', ns]);
});

afterAll(async () => {
  await ctl?.stop();
  await kubectl(['delete', 'offer.leasehold.dev', offerName, '--ignore-not-found']);
});

describe('a Lease with no matching Offer', () => {
  it('waits Pending with Scheduled=False/NoMatchingOffer and an event, then stays quiet', async () => {
    await apply(kubectl, `apiVersion: leasehold.dev/v1alpha1
kind: Lease
metadata: {name: train, namespace: ${ns}}
spec: {where: "gpu=h100"}
`);
    const lease = await waitFor('Pending lease', async () => {
      const l = await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', 'train']);
      return l?.status?.phase === 'Pending' && l.status.reason === 'NoMatchingOffer' ? l : undefined;
    });
    const scheduled = lease.status.conditions.find((c: any) => c.type === 'Scheduled');
    expect(scheduled).toMatchObject({ status: 'False', reason: 'NoMatchingOffer', observedGeneration: 1 });
    expect(lease.status.message).toMatch(/gpu=h100/);

    const events = await waitFor('NoMatchingOffer event', async () => {
      const list = await getJSON(kubectl, ['-n', ns, 'events', '--field-selector', 'involvedObject.name=train']);
      return list.items.find((e: any) => e.reason === 'NoMatchingOffer');
    });
    expect(events.type).toBe('Warning');
    const describe = await kubectl(['-n', ns, 'describe', 'leases.leasehold.dev', 'train']);
    expect(describe.stdout).toMatch(/NoMatchingOffer/);

    const before = await ctl.writes();
    await new Promise((r) => setTimeout(r, 5000));
    expect(await ctl.writes()).toBe(before);
  });

  it('is reconciled again as soon as an Offer appears', async () => {
    await apply(kubectl, `apiVersion: leasehold.dev/v1alpha1
kind: Offer
metadata: {name: ${offerName}}
spec:
  command:
    acquire: ["/bin/false"]
    release: ["/bin/true"]
    shape: {os: linux, arch: amd64, cpus: 4, gpu: "H100 80GB", vramGiB: 80}
  pricePerHour: 2.5
`);
    const lease = await waitFor('Lease scheduled on the new Offer', async () => {
      const l = await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', 'train']);
      return l?.status?.offer === offerName ? l : undefined;
    });
    const scheduled = lease.status.conditions.find((c: any) => c.type === 'Scheduled');
    expect(scheduled).toMatchObject({ status: 'True' });
  });
});
