// Organisation policy and IAM refusals of an insert, as Compute Engine
// answers them: a constraint the instance would violate is a 412
// conditionNotMet whose message names the constraint
// ("Constraint constraints/compute.vmExternalIpAccess violated for project
// N. …"); a host service account the caller may not act as is a 400
// badRequest "The user does not have access to service account …". Either
// can come as the insert's own answer or inside its DONE Operation.
import type { OrgPolicy } from './types.js';

export interface PolicyRefusal {
  /** The insert's HTTP status, or the Operation's httpErrorStatusCode. */
  status: number;
  httpMessage: string;
  /** The request error's reason. */
  reason: string;
  /** The Operation error's code. */
  code: string;
  message: string;
}

export const DEFAULT_ORG_POLICY: OrgPolicy = { forbidExternalIp: false, requireOsLogin: false, deniedServiceAccounts: [], refuseAs: 'http' };

/** The project number Google puts in constraint messages, stable per project ID. */
export function projectNumber(project: string): string {
  let n = 0n;
  for (const c of project) n = (n * 131n + BigInt(c.charCodeAt(0))) % 900_000_000_000n;
  return String(100_000_000_000n + n);
}

const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
const list = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? v.map(obj) : []);

/** Whether the insert asks for an external address: an access config on any network interface. */
export function asksExternalIp(body: Record<string, unknown>): boolean {
  return list(body.networkInterfaces).some((nic) => list(nic.accessConfigs).length > 0);
}

/** Whether the instance metadata turns OS Login off (enable-oslogin with a false value; Google reads TRUE/FALSE case-insensitively). */
export function disablesOsLogin(body: Record<string, unknown>): boolean {
  return list(obj(body.metadata).items).some((m) => m.key === 'enable-oslogin' && /^(false|0|n|no)$/i.test(String(m.value ?? '').trim()));
}

const conditionNotMet = (message: string): PolicyRefusal => ({ status: 412, httpMessage: 'PRECONDITION FAILED', reason: 'conditionNotMet', code: 'CONDITION_NOT_MET', message });

/** The refusal `policy` makes of an insert of `name` in `zone` with `body`, from the caller `caller`; undefined when the insert may go on. */
export function policyRefusal(policy: OrgPolicy, project: string, zone: string, name: string, body: Record<string, unknown>, caller: string): PolicyRefusal | undefined {
  const number = projectNumber(project);
  if (policy.forbidExternalIp && asksExternalIp(body)) {
    return conditionNotMet(`Constraint constraints/compute.vmExternalIpAccess violated for project ${number}. Add instance projects/${project}/zones/${zone}/instances/${name} to the constraint to use external IP with it.`);
  }
  if (policy.requireOsLogin && disablesOsLogin(body)) {
    return conditionNotMet(`Constraint constraints/compute.requireOsLogin violated for project ${number}. Metadata enable-oslogin cannot be set to false on instance projects/${project}/zones/${zone}/instances/${name}.`);
  }
  const denied = list(body.serviceAccounts)
    .map((s) => String(s.email ?? ''))
    .find((e) => policy.deniedServiceAccounts.includes(e));
  if (denied) {
    return {
      status: 400,
      httpMessage: 'BAD REQUEST',
      reason: 'badRequest',
      code: 'SERVICE_ACCOUNT_ACCESS_DENIED',
      message: `The user does not have access to service account '${denied}'.  User: '${caller}'.  Ask a project owner to grant you the iam.serviceAccountUser role on the service account`,
    };
  }
  return undefined;
}
