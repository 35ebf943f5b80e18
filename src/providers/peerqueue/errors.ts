// Typed errors of the peer queue, and the HTTP answers they come from, so a
// controller can tell "the peer refused our token" (fix the credential) from
// "the peer is down" (wait) from "our origin or CA is wrong" (fix the spec).

export const PEER_QUEUE_ERROR_KINDS = ['Unauthorized', 'Forbidden', 'Conflict', 'NotFound', 'Invalid', 'Unreachable', 'Unknown'] as const;
export type PeerQueueErrorKind = (typeof PEER_QUEUE_ERROR_KINDS)[number];

/**
 * Why the peer could not be reached: infra_down when it did not answer
 * (timeouts, refused or reset connections, 5xx), config when what we were
 * told to reach is wrong (TLS or CA errors, a bad origin).
 */
export type FailureClass = 'infra_down' | 'config';

export class PeerQueueError extends Error {
  override readonly name = 'PeerQueueError';
  constructor(
    readonly kind: PeerQueueErrorKind,
    message: string,
    readonly failureClass?: FailureClass,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export function isPeerQueueError(err: unknown, kind?: PeerQueueErrorKind): err is PeerQueueError {
  return err instanceof PeerQueueError && (kind === undefined || err.kind === kind);
}

/** The error an HTTP status from the peer API server stands for. */
export function errorForStatus(code: number, message: string): PeerQueueError {
  if (code === 401) return new PeerQueueError('Unauthorized', message);
  if (code === 403) return new PeerQueueError('Forbidden', message);
  if (code === 404) return new PeerQueueError('NotFound', message);
  if (code === 409) return new PeerQueueError('Conflict', message);
  if (code === 422) return new PeerQueueError('Invalid', message);
  if (code === 429 || code >= 500) return new PeerQueueError('Unreachable', message, 'infra_down');
  return new PeerQueueError('Unknown', message);
}

const CONFIG_CODES = /^(ERR_TLS_|ERR_SSL_|ERR_INVALID_URL|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|ENOTFOUND|ERR_INVALID_PROTOCOL)/;

/** A transport failure (no HTTP answer), classed by its Node.js error code. */
export function errorForTransport(code: string | undefined, message: string, cause?: unknown): PeerQueueError {
  // A name that does not resolve is a wrong origin until shown otherwise; a
  // timeout or refused connection is a peer that is down.
  const failureClass: FailureClass = code && CONFIG_CODES.test(code) ? 'config' : 'infra_down';
  return new PeerQueueError('Unreachable', message, failureClass, { cause });
}
