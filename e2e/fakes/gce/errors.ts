// Compute Engine's error shapes: the JSON error of a failed request
// ({error: {code, message, errors: [{message, domain, reason}], status}}) and
// the error of a failed Operation (error.errors[].code, httpErrorStatusCode,
// httpErrorMessage), with the capacity and quota errors as Google returns them.
import type { ErrorStyle } from '../kit/api.js';
import type { Reply } from '../kit/http.js';
import type { CapacityCode } from './types.js';

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ALREADY_EXISTS',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};

/** The reason an error without its own carries, by status. */
function reasonFor(status: number): string {
  switch (status) {
    case 400:
      return 'invalid';
    case 401:
      return 'authError';
    case 403:
      return 'forbidden';
    case 404:
      return 'notFound';
    case 405:
      return 'methodNotAllowed';
    case 409:
      return 'alreadyExists';
    case 429:
      return 'rateLimitExceeded';
    default:
      return 'backendError';
  }
}

export function googleError(status: number, reason: string, message: string, extra: { domain?: string; details?: unknown[] } = {}): Reply {
  return {
    status,
    body: {
      error: {
        code: status,
        message,
        errors: [{ message, domain: extra.domain ?? 'global', reason }],
        ...(STATUS_NAMES[status] ? { status: STATUS_NAMES[status] } : {}),
        ...(extra.details ? { details: extra.details } : {}),
      },
    },
  };
}

export const GOOGLE_ERRORS: ErrorStyle = {
  body: (reason, message, _suggestion, status) => googleError(status, reason, message).body,
  code: reasonFor,
  unauthorized: {
    message: 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
  },
};

/** What a capacity or quota refusal says, for the zone and machine type of the insert. */
export function capacityError(code: CapacityCode, project: string, zone: string, machineType: string) {
  const region = zone.replace(/-[a-z]$/, '');
  if (code === 'RESOURCE_OPERATION_RATE_EXCEEDED') {
    return {
      httpStatus: 429,
      httpMessage: 'TOO MANY REQUESTS',
      message: `Operation rate exceeded for resource 'projects/${project}/zones/${zone}/instances'. Too frequent operations from the source resource.`,
      details: [] as unknown[],
      reason: 'RESOURCE_OPERATION_RATE_EXCEEDED',
      domain: 'global',
    };
  }
  if (code === 'QUOTA_EXCEEDED') {
    return {
      httpStatus: 403,
      httpMessage: 'FORBIDDEN',
      message: `Quota 'CPUS' exceeded.  Limit: 24.0 in region ${region}.`,
      details: [{ quotaInfo: { metricName: 'compute.googleapis.com/cpus', limitName: 'CPUS-per-project-region', dimensions: { region }, limit: 24 } }],
      reason: 'quotaExceeded',
      domain: 'usageLimits',
    };
  }
  const detailed = code === 'ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS';
  return {
    httpStatus: 503,
    httpMessage: 'SERVICE UNAVAILABLE',
    message: detailed
      ? `The zone 'projects/${project}/zones/${zone}' does not have enough resources available to fulfill the request.  '(resource type:compute)'.`
      : `The zone 'projects/${project}/zones/${zone}' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.`,
    details: [
      { help: { links: [{ description: 'Troubleshooting documentation', url: 'https://cloud.google.com/compute/docs/resource-error' }] } },
      ...(detailed
        ? [
            { localizedMessage: { locale: 'en-US', message: `A ${machineType} VM instance is currently unavailable in the ${zone} zone.` } },
            { errorInfo: { domain: 'compute.googleapis.com', reason: 'resource_availability', metadatas: { zone, vmType: machineType } } },
          ]
        : []),
    ],
    reason: code,
    domain: 'global',
  };
}

/** The refusal as the insert's own HTTP answer. */
export function capacityReply(code: CapacityCode, project: string, zone: string, machineType: string): Reply {
  const e = capacityError(code, project, zone, machineType);
  return googleError(e.httpStatus, e.reason, e.message, {
    domain: e.domain,
    details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: code, domain: 'compute.googleapis.com', metadata: { zone, vmType: machineType } }],
  });
}
