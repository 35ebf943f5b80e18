// Launches an organisation policy refuses: the condition names the
// constraint and the spec field to change, a pure function of the refusal
// and the spec, and the cloud's words in it are bounded and cleaned. The
// launch itself against the Compute Engine emulator is in
// checkrun/orgpolicy.emulator.test.ts.
import { describe, expect, it } from '@jest/globals';
import { hostAddress } from '../checkrun/providers.js';
import { CLOUD_EXCERPT_CHARS, cloudExcerpt, policyRefusalCondition } from './orgpolicy.js';
import { spec } from '../testing/pool.js';

const EXTERNAL_IP = 'constraints/compute.vmExternalIpAccess';

describe('policyRefusalCondition', () => {
  it.each([
    [EXTERNAL_IP, 'OrgPolicyRefused', 'spec.gce.externalIP', /set spec\.gce\.externalIP: false/],
    ['constraints/compute.requireOsLogin', 'OrgPolicyRefused', 'spec.gce.project', /exempt project my-project/],
    ['constraints/compute.trustedImageProjects', 'OrgPolicyRefused', 'spec.gce.image', /set spec\.gce\.image/],
    ['constraints/compute.requireShieldedVm', 'OrgPolicyRefused', 'spec.gce.image', /set spec\.gce\.image/],
    ['constraints/gcp.resourceLocations', 'OrgPolicyRefused', 'spec.gce.zones', /set spec\.gce\.zones/],
    ['constraints/iam.managed.allowedPolicyMembers', 'OrgPolicyRefused', 'spec.gce.serviceAccount', /set spec\.gce\.serviceAccount/],
    ['constraints/compute.vmCanIpForward', 'OrgPolicyRefused', 'spec.gce.project', /set spec\.gce\.project/],
  ])('%s: %s naming %s', (constraint, reason, field, fix) => {
    const c = policyRefusalCondition({ kind: 'constraint', constraint }, spec, 'pool-1', 'Constraint violated');
    expect(c).toMatchObject({ reason, field });
    expect(c.message).toContain(constraint);
    expect(c.message).toContain(`(${field})`);
    expect(c.message).toMatch(fix);
  });

  it('a service account the target may not act as: ServiceAccountNotAllowed naming spec.gce.serviceAccount and the role to grant', () => {
    const c = policyRefusalCondition({ kind: 'serviceAccount' }, spec, 'pool-1', "The user does not have access to service account 'x'");
    expect(c).toMatchObject({ reason: 'ServiceAccountNotAllowed', field: 'spec.gce.serviceAccount' });
    expect(c.message).toContain(spec.gce.serviceAccount);
    expect(c.message).toContain('roles/iam.serviceAccountUser');
  });

  it("bounds and cleans the cloud's words: control characters and non-ASCII go, at most CLOUD_EXCERPT_CHARS, the message at most 1000", () => {
    const hostile = `Constraint\u001b[31m violated\r\nSet-Cookie: x\u0000${'y'.repeat(5000)}`;
    expect(cloudExcerpt(hostile)).toMatch(/^Constraint \[31m violated Set-Cookie: x y+…$/);
    expect(cloudExcerpt(hostile).length).toBe(CLOUD_EXCERPT_CHARS);
    const c = policyRefusalCondition({ kind: 'constraint', constraint: EXTERNAL_IP }, spec, 'pool-1', hostile);
    expect(c.message.length).toBeLessThanOrEqual(1000);
    expect(c.message).not.toMatch(/[\x00-\x1f]/);
  });
});

describe('hostAddress', () => {
  const both = { address: '34.1.1.1', internalAddress: '10.0.0.5', externalAddress: '34.1.1.1' };
  it.each([
    ['external IP on: the external address', both, true, '34.1.1.1'],
    ['external IP off: the internal address, even if the VM has an external one', both, false, '10.0.0.5'],
    ['external IP on, the VM has none: the internal address', { address: '10.0.0.5', internalAddress: '10.0.0.5' }, true, '10.0.0.5'],
    ['nothing assigned yet', { address: undefined }, false, undefined],
  ])('%s', (_what, vm, external, want) => expect(hostAddress(vm, external)).toBe(want));
});
