// After reconciling 200 Leases, a quiet minute costs the controller zero
// writes, counted both by the controller's own request counter and by the
// API server's apiserver_request_total.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { leaseManifest } from './support/builders.js';
import { startController, sumMetric, type ControllerProcess } from './support/controller.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';

const kubectl = testKubectl();
const N = 200;
let ns: string;
let ctl: ControllerProcess;

const serverWrites = async () => {
  const text = (await kubectl(['get', '--raw', '/metrics'])).stdout;
  let sum = 0;
  for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE']) {
    sum += sumMetric(text, 'apiserver_request_total', { group: 'leasehold.dev', resource: 'leases', verb });
  }
  return sum;
};

beforeAll(async () => {
  ns = await freshNamespace(kubectl, 'quiet');
  ctl = await startController(process.env.E2E_KUBECONFIG!, ['--watch-namespace', ns, '--leader-election-namespace', ns]);
});

afterAll(async () => {
  await ctl?.stop();
});

describe('quiet cluster', () => {
  it(`costs zero writes for a minute after ${N} Leases are reconciled`, async () => {
    const items = Array.from({ length: N }, (_, i) => leaseManifest(`quiet-${i}`, ns, { where: `gpus>=${(i % 7) + 1},cpus>=4` }));
    await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    await waitFor(`${N} Leases Pending`, async () => {
      const list = await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev']);
      return list.items.filter((l: any) => l.status?.phase === 'Pending').length === N;
    }, 120_000, 1000);
    await new Promise((r) => setTimeout(r, 3000));
    const [c0, s0] = [await ctl.writes(), await serverWrites()];
    await new Promise((r) => setTimeout(r, 60_000));
    const [c1, s1] = [await ctl.writes(), await serverWrites()];
    process.stdout.write(`quiet minute: controller writes ${c1 - c0}, API server lease writes ${s1 - s0}\n`);
    expect(c1 - c0).toBe(0);
    expect(s1 - s0).toBe(0);
  }, 240_000);
});
