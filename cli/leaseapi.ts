// The few Lease and Offer calls the CLI's commands make, whichever client
// makes them (kube-http.ts or kube-client-node.ts), and how a call's answer
// is waited for and its errors read. Every write that depends on what was
// read carries the resourceVersion it was read at.
import type { Lease } from '../src/api/lease.js';
import type { Offer } from '../src/api/offer.js';
import { statusCode } from '../src/kube/errors.js';

/** How long one API call may take before its answer counts as lost. */
export const API_TIMEOUT_MS = 30_000;

export class AnswerLostError extends Error {
  override readonly name = 'AnswerLostError';
}

export interface Cluster {
  namespace: string;
  leases: LeaseAPI;
}

export interface LeaseAPI {
  /** The Lease; undefined when there is none. */
  get(namespace: string, name: string): Promise<Lease | undefined>;
  /** The namespace's Leases, or every namespace's when undefined. */
  list(namespace: string | undefined): Promise<Lease[]>;
  create(lease: Lease): Promise<Lease>;
  /** A merge patch; include metadata.resourceVersion in `body` to make it conditional (409 when the Lease changed). */
  patch(namespace: string, name: string, body: unknown): Promise<Lease>;
  /**
   * Deletes the Lease; false when it was already gone. The controller
   * releases its machine first (finalizer). With `resourceVersion`, only
   * the Lease as it was then (409 when it changed since).
   */
  delete(namespace: string, name: string, resourceVersion?: string): Promise<boolean>;
  offers(): Promise<Offer[]>;
}

export function timed<T>(call: Promise<T>, ms = API_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const lost = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AnswerLostError(`the API server did not answer within ${ms / 1000}s`)), ms);
  });
  return Promise.race([call, lost]).finally(() => clearTimeout(timer));
}

/** Whether an error means the request may or may not have been applied: no HTTP answer came back. */
export function answerLost(err: unknown): boolean {
  return err instanceof AnswerLostError || (statusCode(err) === undefined && !(err instanceof TypeError && /Invalid URL/.test(err.message)));
}

/** An API error as one line for people: what was refused and why, with the fix when it is RBAC. */
export function apiErrorText(err: unknown, what: string): string {
  const code = statusCode(err);
  const body = (err as { body?: unknown }).body;
  let reason = err instanceof Error ? err.message : String(err);
  if (typeof body === 'string') {
    try {
      reason = (JSON.parse(body) as { message?: string }).message ?? reason;
    } catch {
      // not JSON: keep the error's own message
    }
  }
  if (code === 403) {
    return `${what}: forbidden (${reason}); Leases need the leasehold-lease-editor role in the namespace (edit or admin include it), listing Offers a ClusterRoleBinding to leasehold-lease-viewer (see docs/cli.md, "RBAC")`;
  }
  if (code === undefined) return `${what}: ${reason}`;
  return `${what}: ${reason} (HTTP ${code})`;
}
