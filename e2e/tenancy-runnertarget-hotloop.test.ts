// Finding 7 of the tenancy review, RunnerTarget side: a namespace user with
// leasehold.dev "*" in their own namespace cannot make the controller check
// a pool in a hot loop. The CRD refuses a checkInterval under 30s with the
// reason, on create and on a later patch.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testKubectl } from './support/kube.js';
import { makeTenant, type Tenant } from './support/tenancy.js';
import { runnerTargetManifest } from './support/builders.js';

const kubectl = testKubectl();
let tenant: Tenant;

const spec = (checkInterval: string) => ({
  github: { org: 'example', repositories: ['example/app'], tokenSecretRef: { name: 'gh' } },
  gce: { project: 'my-project', zones: ['us-central1-a'], machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }], serviceAccount: 'host@my-project.iam.gserviceaccount.com', credentialsSecretRef: { name: 'gce' } },
  floor: 0,
  maxHosts: 1,
  dailyBudgetUSD: 1,
  checkInterval,
});
const applyAsTenant = (name: string, checkInterval: string) =>
  tenant.kubectl(['apply', '-f', '-'], JSON.stringify(runnerTargetManifest(name, undefined, spec(checkInterval))));

beforeAll(async () => {
  tenant = await makeTenant(kubectl, 'rt-hotloop', 'team-hotloop');
});
afterAll(async () => {
  if (tenant) await kubectl(['delete', 'namespace', tenant.ns, '--wait=false']);
});

describe('a RunnerTarget checkInterval written by a namespace user', () => {
  it.each(['0s', '1ms', '29s'])('%s is refused by kubectl apply, naming the field, the minimum and the fix', async (interval) => {
    const r = await applyAsTenant('hot', interval);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('spec.checkInterval');
    expect(r.stderr).toContain('checkInterval must be at least 30s');
    expect(r.stderr).toContain('set spec.checkInterval to 30s or more');
  });

  it('30s is taken, and a later patch down to 0s is refused', async () => {
    const r = await applyAsTenant('calm', '30s');
    expect(r.code).toBe(0);
    const patch = await tenant.kubectl(['patch', 'runnertarget', 'calm', '--type=merge', '-p', '{"spec":{"checkInterval":"0s"}}']);
    expect(patch.code).not.toBe(0);
    expect(patch.stderr).toContain('checkInterval must be at least 30s');
  });
});
