// Stop and restart kube-apiserver and etcd under a running controller: its
// informers resume and a Lease created afterwards is reconciled.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { join } from 'node:path';
import { ControlPlane } from './cluster/controlplane.js';
import { leaseManifest } from './support/builders.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, getJSON, testKubectl, waitFor } from './support/kube.js';

let cp: ControlPlane;
let ctl: ControllerProcess;

beforeAll(async () => {
  cp = await ControlPlane.start({ binDir: process.env.E2E_BIN_DIR });
  const crds = await cp.kubectl(['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
  expect(crds.code).toBe(0);
  await cp.kubectl(['wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s']);
  // Leader election is off here: with it on, a replica whose renewals fail
  // for the renew deadline exits by design, and this test is about the
  // informers riding out the outage inside one process.
  ctl = await startController(cp.info.kubeconfig, ['--no-leader-elect', '--resync-period', '20s']);
}, 120_000);

afterAll(async () => {
  await ctl?.stop();
  await cp?.stop();
});

describe('control plane restart', () => {
  it('informers resume and reconcile Leases created after the restart', async () => {
    const kubectl = testKubectl(cp.info.kubeconfig, cp.info.binDir);
    await apply(kubectl, leaseManifest('before', 'default', { where: 'gpu' }));
    await waitFor('before reconciled', async () => (await getJSON(kubectl, ['leases.leasehold.dev', 'before']))?.status?.phase === 'Pending');

    await cp.restart(2000);
    await apply(kubectl, leaseManifest('after', 'default', { where: 'gpus>=2' }));
    const after = await waitFor('after reconciled', async () => {
      const l = await getJSON(kubectl, ['leases.leasehold.dev', 'after']);
      return l?.status?.phase === 'Pending' ? l : undefined;
    }, 60_000);
    expect(after.status.reason).toBe('NoMatchingOffer');
    expect(await ctl.metric('leasehold_informer_restarts_total')).toBeGreaterThan(0);
    expect(ctl.child.exitCode).toBeNull();
  }, 120_000);
});
