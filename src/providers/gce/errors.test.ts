// Which Compute Engine answers are policy refusals: a constraint named in a
// refused request or a failed Operation, and the host service account the
// caller may not act as; nothing else of the cloud's text becomes a name.
import { describe, expect, it } from '@jest/globals';
import { RateLimitedError } from '../ratelimit.js';
import { CapacityExhausted, errorForAnswer, errorForOperation, PolicyRefused, policyRefusalOf } from './errors.js';

const EXTERNAL_IP = 'Constraint constraints/compute.vmExternalIpAccess violated for project 123456789. Add instance projects/p/zones/us-central1-a/instances/vm-1 to the constraint to use external IP with it.';

describe('policyRefusalOf', () => {
  it.each([
    ['412 conditionNotMet naming vmExternalIpAccess', 412, ['conditionNotMet'], EXTERNAL_IP, { kind: 'constraint', constraint: 'constraints/compute.vmExternalIpAccess' }],
    ['an Operation CONDITION_NOT_MET with no HTTP status', 0, ['CONDITION_NOT_MET'], `Instance 'vm-1' creation failed: ${EXTERNAL_IP}`, { kind: 'constraint', constraint: 'constraints/compute.vmExternalIpAccess' }],
    ['requireOsLogin', 412, ['conditionNotMet'], 'Constraint constraints/compute.requireOsLogin violated for project 1.', { kind: 'constraint', constraint: 'constraints/compute.requireOsLogin' }],
    ['requireShieldedVm', 412, ['conditionNotMet'], "Constraint constraints/compute.requireShieldedVm violated for project projects/p. The boot disk's 'initialize_params.source_image' field specifies a non-Shielded image", { kind: 'constraint', constraint: 'constraints/compute.requireShieldedVm' }],
    ['the service account the caller may not act as (400 badRequest)', 400, ['badRequest'], "The user does not have access to service account 'h@p.iam.gserviceaccount.com'.  User: 'c@p.iam.gserviceaccount.com'.  Ask a project owner to grant you the iam.serviceAccountUser role on the service account", { kind: 'serviceAccount' }],
    ['actAs denied (403)', 403, ['forbidden'], "Permission 'iam.serviceAccounts.actAs' denied on service account h@p.iam.gserviceaccount.com (or it may not exist).", { kind: 'serviceAccount' }],
    ['a constraint name with markup after it is cut at the name', 412, ['conditionNotMet'], 'Constraint constraints/compute.vmExternalIpAccess<script>alert(1)</script> violated', { kind: 'constraint', constraint: 'constraints/compute.vmExternalIpAccess' }],
    ['a 503 that mentions a constraint is no refusal', 503, ['backendError'], EXTERNAL_IP, undefined],
    ['a 400 without a constraint or service account is no refusal', 400, ['invalid'], "Invalid value for field 'resource.name'", undefined],
    ['a malformed constraint name is no constraint', 412, ['conditionNotMet'], 'Constraint constraints/ violated', undefined],
  ] as const)('%s', (_what, status, reasons, message, want) => {
    expect(policyRefusalOf(status, reasons, message)).toEqual(want);
  });
});

describe('classifying insert errors', () => {
  const placement = { zone: 'us-central1-a', machineType: 'e2-standard-4' };
  const answer = (status: number, reason: string, message: string) => ({ error: { code: status, message, errors: [{ reason, message, domain: 'global' }] } });

  it('a refused insert naming a constraint is PolicyRefused, not InvalidRequest alone', () => {
    const e = errorForAnswer('insert us-central1-a/vm-1', 412, answer(412, 'conditionNotMet', EXTERNAL_IP), new Headers(), placement);
    expect(e).toBeInstanceOf(PolicyRefused);
    expect(e).toMatchObject({ kind: 'InvalidRequest', retryable: false, inOperation: false });
  });

  it('a DONE insert Operation naming a constraint is PolicyRefused from the Operation', () => {
    const e = errorForOperation('insert us-central1-a/vm-1', { error: { errors: [{ code: 'CONDITION_NOT_MET', message: EXTERNAL_IP }] }, httpErrorStatusCode: 412 }, placement);
    expect(e).toMatchObject({ inOperation: true, refusal: { constraint: 'constraints/compute.vmExternalIpAccess' } });
  });

  it('capacity and throttling keep their own types when the answer also names a constraint', () => {
    expect(errorForOperation('insert', { error: { errors: [{ code: 'ZONE_RESOURCE_POOL_EXHAUSTED', message: 'no room' }, { code: 'CONDITION_NOT_MET', message: EXTERNAL_IP }] }, httpErrorStatusCode: 503 }, placement)).toBeInstanceOf(CapacityExhausted);
    expect(errorForOperation('insert', { error: { errors: [{ code: 'RESOURCE_OPERATION_RATE_EXCEEDED', message: 'slow down' }] }, httpErrorStatusCode: 429 }, placement)).toBeInstanceOf(RateLimitedError);
  });

  it('a call other than an insert is never a policy refusal', () => {
    expect(errorForAnswer('delete us-central1-a/vm-1', 412, answer(412, 'conditionNotMet', EXTERNAL_IP), new Headers())).not.toBeInstanceOf(PolicyRefused);
  });
});
