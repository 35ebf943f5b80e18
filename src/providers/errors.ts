// The typed errors every provider throws, and the questions a caller asks of
// them: which kind, worth repeating, or "gone already" (Karpenter's
// cloudprovider errors and their Is…/Ignore… helpers are the model).

export const PROVIDER_ERROR_KINDS = [
  'InsufficientCapacity',
  'RateLimited',
  'NotFound',
  'Unauthorized',
  'InvalidTarget',
  'InvalidRequest',
  'OverPriceCap',
  'Timeout',
  'Unknown',
] as const;
export type ProviderErrorKind = (typeof PROVIDER_ERROR_KINDS)[number];

/** Whether trying the same call again later can succeed without anyone changing anything. */
const RETRYABLE_BY_DEFAULT: Record<ProviderErrorKind, boolean> = {
  InsufficientCapacity: true,
  RateLimited: true,
  NotFound: false,
  Unauthorized: false,
  InvalidTarget: false,
  InvalidRequest: false,
  OverPriceCap: false,
  Timeout: true,
  Unknown: true,
};

export interface ProviderErrorOptions {
  retryable?: boolean;
  /** For a failed launch: the state release should get (possibly ""). */
  state?: string;
  /** No answer came back: the provider may have carried the request out. */
  answerLost?: boolean;
  /** For a failed launch: refused before any request that could make a machine went out, so none exists. */
  nothingMade?: boolean;
  cause?: unknown;
}

export class ProviderError extends Error {
  override readonly name = 'ProviderError';
  readonly kind: ProviderErrorKind;
  readonly retryable: boolean;
  /** Set by a failed launch: what to hand release, since a machine may exist. */
  readonly state: string | undefined;
  /** True when no answer came back, so the request may have been carried out all the same. */
  readonly answerLost: boolean;
  /** True when a failed launch certainly made no machine. */
  readonly nothingMade: boolean;

  constructor(kind: ProviderErrorKind, message: string, opts: ProviderErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.kind = kind;
    this.retryable = opts.retryable ?? RETRYABLE_BY_DEFAULT[kind];
    this.state = opts.state;
    this.answerLost = opts.answerLost ?? false;
    this.nothingMade = opts.nothingMade ?? false;
  }
}

/** True for a ProviderError, and when `kind` is given, only for one of that kind. */
export function isProviderError(err: unknown, kind?: ProviderErrorKind): err is ProviderError {
  return err instanceof ProviderError && (kind === undefined || err.kind === kind);
}

/** Whether a failed provider call is worth repeating; errors from outside a provider count as transient. */
export function isRetryable(err: unknown): boolean {
  return isProviderError(err) ? err.retryable : true;
}

/** The call's result, or undefined when it failed because the thing asked about does not exist. */
export async function ignoreNotFound<T>(call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (err) {
    if (isProviderError(err, 'NotFound')) return undefined;
    throw err;
  }
}
