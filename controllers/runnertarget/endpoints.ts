// Where a target's credentials may go. spec.github.apiURL and spec.gce.endpoint
// are written by whoever may write the RunnerTarget; the GitHub token (or the
// App's signed JWT) and the Compute Engine token are only sent to endpoints an
// admin listed.
import type { RunnerTarget } from '../../src/api/index.js';
import { checkEndpoint, type EndpointPolicy } from '../../src/providers/endpoints.js';
import { TargetSpecError } from './specerror.js';

/** The admin's allow-lists for RunnerTargets (--allowed-github-endpoints, --allowed-gce-endpoints, --allow-loopback-endpoints). */
export interface TargetEndpointPolicy {
  github: EndpointPolicy;
  gce: EndpointPolicy;
}

export const ENDPOINT_NOT_ALLOWED = 'EndpointNotAllowed';

/** Why the target names an endpoint its credentials may not go to; undefined when both are allowed. */
export function endpointRefusal(spec: Pick<RunnerTarget['spec'], 'github' | 'gce'>, policy: TargetEndpointPolicy): TargetSpecError | undefined {
  const checks = [
    checkEndpoint(spec.github.apiURL, policy.github, 'spec.github.apiURL', 'runnerTarget.allowedEndpoints.github (--allowed-github-endpoints)'),
    checkEndpoint(spec.gce.endpoint, policy.gce, 'spec.gce.endpoint', 'runnerTarget.allowedEndpoints.gce (--allowed-gce-endpoints)'),
  ];
  const reasons = checks.flatMap((c) => (c.allowed ? [] : [c.reason]));
  return reasons.length > 0 ? new TargetSpecError(reasons.join('; '), ENDPOINT_NOT_ALLOWED) : undefined;
}
