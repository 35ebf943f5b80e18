// Where a target's credentials may go. spec.github.apiURL and spec.gce.endpoint
// are written by whoever may write the RunnerTarget, and so is the token_uri
// inside the service account key it names; the GitHub token (or the App's
// signed JWT), the key's signed assertion and the Compute Engine token are
// only sent to endpoints an admin listed. A refusal is a TargetSpecError,
// the kind of problem the user fixes in the spec (or a Secret it names),
// defined here as the lowest file that makes one.
import type { RunnerTarget } from '../../../src/api/index.js';
import { checkEndpoint, type EndpointPolicy } from '../../../src/providers/endpoints.js';

/** A problem the user fixes in the RunnerTarget's spec or a Secret it names; `reason` becomes the Ready condition's. */
export class TargetSpecError extends Error {
  override readonly name: string = 'TargetSpecError';

  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}

/** The admin's allow-lists for RunnerTargets (--allowed-github-endpoints, --allowed-gce-endpoints, --allowed-gce-token-endpoints, --allow-loopback-endpoints). */
export interface TargetEndpointPolicy {
  github: EndpointPolicy;
  gce: EndpointPolicy;
  /** OAuth token endpoints a service account key's token_uri may name. */
  gceToken: EndpointPolicy;
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

/**
 * Why the token endpoint a service account key names (token_uri, Google's
 * when absent) may not be sent the key's signed assertion; undefined when it
 * is allowed. Read from the key, so decided after that one Secret is read.
 */
export function tokenEndpointRefusal(tokenUrl: string, policy: TargetEndpointPolicy): TargetSpecError | undefined {
  const c = checkEndpoint(tokenUrl, policy.gceToken, 'the token_uri of the key in spec.gce.credentialsSecretRef', 'runnerTarget.allowedEndpoints.gceToken (--allowed-gce-token-endpoints)');
  return c.allowed ? undefined : new TargetSpecError(c.reason, ENDPOINT_NOT_ALLOWED);
}
