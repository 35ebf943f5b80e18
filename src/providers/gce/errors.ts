// Compute Engine's failures as typed errors: a zone out of capacity and a
// quota reached are what a launch moves on from (next zone, next machine
// type), so they carry the zone and machine type; everything else is a
// GceApiError with Google's reason.
import { ProviderError, type ProviderErrorKind } from '../errors.js';
import { RateLimitedError } from '../ratelimit.js';
import { retryAfterMs, sanitize } from '../rest.js';

export const CAPACITY_CODES = ['ZONE_RESOURCE_POOL_EXHAUSTED', 'ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS'] as const;
export const QUOTA_CODES = ['QUOTA_EXCEEDED', 'quotaExceeded'] as const;
/** Throttling, as a request's reason or inside a DONE Operation (RESOURCE_OPERATION_RATE_EXCEEDED: too many operations at once); the same call later succeeds. */
export const RATE_CODES = ['rateLimitExceeded', 'userRateLimitExceeded', 'RATE_LIMIT_EXCEEDED', 'RESOURCE_OPERATION_RATE_EXCEEDED', 'OPERATION_RATE_EXCEEDED'];

/** Where a launch was refused, for the capacity and quota errors. */
export interface Placement {
  zone: string;
  machineType: string;
}

export class GceApiError extends ProviderError {
  constructor(
    kind: ProviderErrorKind,
    message: string,
    /** The HTTP status (of the request, or the Operation's httpErrorStatusCode). */
    readonly status: number,
    /** Google's reason or Operation error code ("notFound", "alreadyExists", "ZONE_RESOURCE_POOL_EXHAUSTED"). */
    readonly reason: string | undefined,
    opts: { retryable?: boolean; answerLost?: boolean } = {},
  ) {
    super(kind, message, opts);
  }
}

/** The zone has no capacity for the machine type now: try another zone or type. */
export class CapacityExhausted extends GceApiError {
  constructor(message: string, status: number, reason: string, readonly placement: Placement) {
    super('InsufficientCapacity', message, status, reason);
  }
}

/** A project quota (CPUs in the region, instances) stops the launch: another zone of the region will not help. */
export class QuotaExceeded extends GceApiError {
  constructor(message: string, status: number, reason: string, readonly placement: Placement) {
    super('InsufficientCapacity', message, status, reason);
  }
}

/** The name is taken (409 alreadyExists): for an insert, a VM of that name exists already (perhaps this very insert, sent again after its requestId was forgotten). */
export class AlreadyExists extends GceApiError {
  constructor(message: string, status: number, reason: string) {
    super('InvalidRequest', message, status, reason);
  }
}

/**
 * An organisation policy constraint, or a missing grant on the host service
 * account, refuses the insert: the same request fails in every zone and on
 * every machine type until someone changes the spec or the policy.
 */
export class PolicyRefused extends GceApiError {
  constructor(
    message: string,
    status: number,
    reason: string | undefined,
    readonly refusal: PolicyRefusalKind,
    /** The refusal came in a DONE Operation: the instance may have been made, and is looked for. */
    readonly inOperation: boolean,
  ) {
    super('InvalidRequest', message, status, reason);
  }
}

/** What refused: a named constraint ("constraints/compute.vmExternalIpAccess"), or acting as the host service account. */
export type PolicyRefusalKind = { kind: 'constraint'; constraint: string } | { kind: 'serviceAccount' };

/** A constraint's name as Google writes it; nothing else of the cloud's text is taken as a name. */
const CONSTRAINT = /\bconstraints\/([a-z][A-Za-z0-9]{0,40}(?:\.[A-Za-z][A-Za-z0-9]{0,60}){1,3})\b/;
const SERVICE_ACCOUNT_REFUSAL = /does not have access to service account|iam\.serviceAccounts\.actAs|iam\.serviceAccountUser/i;

/**
 * Whether an error (HTTP status or Operation httpErrorStatusCode, reasons or
 * codes, message) is a policy refusal, and of what. A constraint counts when
 * the answer says a condition was not met (412, conditionNotMet,
 * CONDITION_NOT_MET) or a request was refused (400, 403) and the message
 * names it; acting as the service account when the message says so.
 */
export function policyRefusalOf(status: number, reasons: readonly string[], message: string): PolicyRefusalKind | undefined {
  const refusal = status === 400 || status === 403 || status === 412 || reasons.some((r) => /^(conditionNotMet|CONDITION_NOT_MET|badRequest|forbidden|SERVICE_ACCOUNT_ACCESS_DENIED)$/.test(r));
  if (!refusal) return undefined;
  const constraint = CONSTRAINT.exec(message);
  if (constraint) return { kind: 'constraint', constraint: `constraints/${constraint[1]}` };
  if (SERVICE_ACCOUNT_REFUSAL.test(message)) return { kind: 'serviceAccount' };
  return undefined;
}

interface GoogleErrorBody {
  code?: number;
  message?: string;
  errors?: { reason?: string; code?: string; message?: string }[];
  details?: { reason?: string }[];
}

function googleError(json: unknown): GoogleErrorBody | undefined {
  const e = (json as { error?: unknown } | undefined)?.error;
  return e && typeof e === 'object' ? (e as GoogleErrorBody) : undefined;
}

/** An error answer of the API as a typed error; `what` says which call, `placement` is set for inserts. */
export function errorForAnswer(what: string, status: number, json: unknown, headers: Headers, placement?: Placement): ProviderError {
  const e = googleError(json);
  const reasons = [...(e?.errors ?? []).map((x) => x.reason ?? x.code), ...(e?.details ?? []).map((d) => d.reason)].filter((r): r is string => typeof r === 'string');
  const message = e?.message ?? e?.errors?.[0]?.message ?? `HTTP ${status}`;
  return classify(what, status, reasons, message, placement, headers.get('retry-after'), false);
}

/** A DONE Operation's error as a typed error. */
export function errorForOperation(what: string, op: { error?: { errors?: { code?: string; message?: string }[] }; httpErrorStatusCode?: number }, placement?: Placement): ProviderError {
  const errors = op.error?.errors ?? [];
  const codes = errors.map((x) => x.code).filter((c): c is string => typeof c === 'string');
  return classify(what, op.httpErrorStatusCode ?? 0, codes, errors.map((x) => x.message).filter(Boolean).join(' ') || 'the operation failed', placement, null, true);
}

function classify(what: string, status: number, reasons: string[], message: string, placement: Placement | undefined, retryAfter: string | null, inOperation: boolean): ProviderError {
  const reason = reasons[0];
  const text = `Compute Engine ${what}: ${status ? `HTTP ${status} ` : ''}${reason ?? ''}: ${sanitize(message)}`.replace(/ : /, ': ');
  const capacity = reasons.find((r) => (CAPACITY_CODES as readonly string[]).includes(r));
  if (capacity) return new CapacityExhausted(text, status, capacity, placement ?? { zone: '', machineType: '' });
  const quota = reasons.find((r) => (QUOTA_CODES as readonly string[]).includes(r));
  if (quota) return new QuotaExceeded(text, status, quota, placement ?? { zone: '', machineType: '' });
  if (status === 429 || reasons.some((r) => RATE_CODES.includes(r))) {
    const after = retryAfterMs(retryAfter);
    return new RateLimitedError(text, after === undefined ? undefined : new Date(Date.now() + after));
  }
  // Only for inserts: elsewhere a 400 or 403 naming a constraint is not a launch's refusal.
  const policy = placement ? policyRefusalOf(status, reasons, message) : undefined;
  if (policy) return new PolicyRefused(text, status, reason, policy, inOperation);
  if (reasons.includes('alreadyExists') || reasons.includes('RESOURCE_ALREADY_EXISTS')) return new AlreadyExists(text, status, reasons.includes('alreadyExists') ? 'alreadyExists' : 'RESOURCE_ALREADY_EXISTS');
  if (status === 401 || status === 403) return new GceApiError('Unauthorized', text, status, reason);
  if (status === 404) return new GceApiError('NotFound', text, status, reason);
  if (status >= 500) return new GceApiError('Unknown', text, status, reason, { answerLost: true });
  return new GceApiError('InvalidRequest', text, status, reason);
}
