// What a launch refused by an organisation policy, or by a host service
// account the target may not act as, tells the user: the reason of the
// check's Ready condition and a message naming the constraint, the spec
// field to change and how. A policy refusal is not capacity: another zone
// or machine type would be refused the same way, so nothing else is tried
// and the next check (or a spec change) tries again. The cloud's text is
// untrusted: only the constraint's name (taken by a strict pattern) and a
// bounded, printable excerpt reach the message.
import type { RunnerTargetSpec } from '../../../src/api/index.js';
import type { PolicyRefusalKind } from '../../../src/providers/gce/errors.js';

export type PolicyRefusalReason = 'OrgPolicyRefused' | 'ServiceAccountNotAllowed';

export interface PolicyRefusalCondition {
  reason: PolicyRefusalReason;
  /** The spec field whose change can end the refusal. */
  field: string;
  message: string;
}

/** The most of Compute Engine's own words a message carries. */
export const CLOUD_EXCERPT_CHARS = 200;
const MESSAGE_CHARS = 1000;

/** Printable ASCII only, whitespace folded, at most CLOUD_EXCERPT_CHARS. */
export function cloudExcerpt(text: string): string {
  const flat = text.replace(/[^\x20-\x7e]+/g, ' ').replace(/\s+/g, ' ').trim();
  return flat.length > CLOUD_EXCERPT_CHARS ? `${flat.slice(0, CLOUD_EXCERPT_CHARS - 1)}…` : flat;
}

/** The field to change and the fix, by constraint. */
function constraintFix(constraint: string, spec: RunnerTargetSpec): { field: string; fix: string } {
  const project = spec.gce.project;
  switch (constraint) {
    case 'constraints/compute.vmExternalIpAccess':
      return {
        field: 'spec.gce.externalIP',
        fix: 'set spec.gce.externalIP: false so that hosts get no external IP (the controller then reaches them at their internal address, so it must run in their VPC, and they need Cloud NAT to reach GitHub), or have an organisation policy admin allow these VMs an external IP',
      };
    case 'constraints/compute.requireOsLogin':
      return {
        field: 'spec.gce.project',
        fix: `hosts admit only this target's own SSH key from instance metadata, with OS Login off (enable-oslogin=FALSE), which this constraint forbids; have an organisation policy admin exempt project ${project} from it, or set spec.gce.project to a project where it is not enforced`,
      };
    case 'constraints/compute.trustedImageProjects':
    case 'constraints/compute.requireShieldedVm':
      return { field: 'spec.gce.image', fix: 'set spec.gce.image to an image the policy allows (from a trusted image project, Shielded VM capable), or have an organisation policy admin allow the current one' };
    case 'constraints/gcp.resourceLocations':
      return { field: 'spec.gce.zones', fix: 'set spec.gce.zones to zones the policy allows' };
    default:
      if (constraint.startsWith('constraints/iam.')) {
        return { field: 'spec.gce.serviceAccount', fix: 'set spec.gce.serviceAccount to a service account the policy allows, or have an organisation policy admin allow the current one' };
      }
      return { field: 'spec.gce.project', fix: `have an organisation policy admin allow these VMs in project ${project}, or set spec.gce.project to a project where the constraint is not enforced` };
  }
}

/** The condition a launch of `vm` refused with `refusal` ends its check with; `cloudText` is Compute Engine's message. */
export function policyRefusalCondition(refusal: PolicyRefusalKind, spec: RunnerTargetSpec, vm: string, cloudText: string): PolicyRefusalCondition {
  const said = cloudExcerpt(cloudText);
  if (refusal.kind === 'serviceAccount') {
    const account = spec.gce.serviceAccount;
    const message = `Compute Engine refused to attach service account ${account} (spec.gce.serviceAccount) to VM ${vm}: the identity this target calls Compute Engine with (the key of spec.gce.credentialsSecretRef, or the controller's own) may not act as it. Grant that identity roles/iam.serviceAccountUser on ${account}, or set spec.gce.serviceAccount to an account it may act as; no VM was left, the next check tries again (Compute Engine said: ${said})`;
    return { reason: 'ServiceAccountNotAllowed', field: 'spec.gce.serviceAccount', message: message.slice(0, MESSAGE_CHARS) };
  }
  const { field, fix } = constraintFix(refusal.constraint, spec);
  const message = `the organisation policy ${refusal.constraint} refused VM ${vm} in project ${spec.gce.project}: ${fix} (${field}); no VM was left and no other zone was tried, the next check tries again (Compute Engine said: ${said})`;
  return { reason: 'OrgPolicyRefused', field, message: message.slice(0, MESSAGE_CHARS) };
}
