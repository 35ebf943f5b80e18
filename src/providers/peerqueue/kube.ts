// The peer queue on a real peer API server: batch/v1 Jobs in one namespace,
// reached with the PeerFleet's origin, bearer token and CA. So far only what
// readiness needs: one namespaced list, and the list of queued Jobs. Every
// failure becomes a typed PeerQueueError, so that the verdict can tell a
// refused token (fix the credential) from a peer that is down (wait) from an
// origin or CA that is wrong (fix the spec).
import { Observable, type BatchV1Api, type ConfigurationOptions, type RequestContext, type ResponseContext, type V1Job } from '@kubernetes/client-node';
import { statusCode } from '../../kube/client.js';
import { clusterClients, remoteKubeConfig, type RemoteCluster } from '../../kube/clients.js';
import type { Metrics } from '../../kube/metrics.js';
import { errorForStatus, errorForTransport, isPeerQueueError, PeerQueueError } from './errors.js';
import { CLAIMED_BY_ANNOTATION, LENDABLE_LABEL, REFUSED_ANNOTATION } from './types.js';

/** How long one request to the peer may take before the peer counts as down. */
export const PEER_REQUEST_TIMEOUT_MS = 10_000;

export interface KubePeerQueueOptions extends RemoteCluster {
  /** The peer namespace that holds the queue. */
  namespace: string;
  metrics: Metrics;
  timeoutMs?: number;
}

export class KubePeerQueue {
  private readonly batch: BatchV1Api;
  private readonly timeoutMs: number;
  readonly namespace: string;

  constructor(opts: KubePeerQueueOptions) {
    this.namespace = opts.namespace;
    this.timeoutMs = opts.timeoutMs ?? PEER_REQUEST_TIMEOUT_MS;
    let kubeConfig;
    try {
      kubeConfig = remoteKubeConfig(opts);
    } catch (err) {
      throw new PeerQueueError('Unreachable', `the origin ${opts.server} is not a usable URL: ${String(err)}`, 'config', { cause: err });
    }
    this.batch = clusterClients(opts.name, kubeConfig, opts.metrics, 'peer').batch;
  }

  /**
   * One namespaced list of lendable Jobs with limit=1: the cheapest request
   * that proves the peer answers, trusts our token and lets it read the queue.
   */
  async probe(): Promise<void> {
    await this.call((o) => this.batch.listNamespacedJob({ namespace: this.namespace, labelSelector: `${LENDABLE_LABEL}=true`, limit: 1 }, o));
  }

  /** Lendable Jobs no one has claimed or refused and that have not finished. */
  async listQueued(): Promise<V1Job[]> {
    const list = await this.call((o) => this.batch.listNamespacedJob({ namespace: this.namespace, labelSelector: `${LENDABLE_LABEL}=true` }, o));
    return list.items.filter((job) => {
      const ann = job.metadata?.annotations ?? {};
      if (ann[CLAIMED_BY_ANNOTATION] || ann[REFUSED_ANNOTATION]) return false;
      return !(job.status?.conditions ?? []).some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    });
  }

  private async call<T>(request: (options: ConfigurationOptions) => Promise<T>): Promise<T> {
    // client-node has no deadline of its own: a peer that never answers must
    // still end the request (and free its socket), and it then counts as down.
    const signal = AbortSignal.timeout(this.timeoutMs);
    const options: ConfigurationOptions = {
      middleware: [
        {
          pre: (ctx: RequestContext) => {
            ctx.setSignal(signal);
            return new Observable(Promise.resolve(ctx));
          },
          post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
        },
      ],
      middlewareMergeStrategy: 'append',
    };
    try {
      return await request(options);
    } catch (err) {
      if (signal.aborted) throw errorForTransport('ETIMEDOUT', `no answer within ${this.timeoutMs} ms`, err);
      throw peerError(err);
    }
  }
}

/** A client-node failure as a typed peer queue error. */
export function peerError(err: unknown): PeerQueueError {
  if (isPeerQueueError(err)) return err;
  const code = statusCode(err);
  if (code !== undefined) return errorForStatus(code, `HTTP ${code}${reasonOf(err)}`);
  const cause = transportCause(err);
  return errorForTransport(cause.code, cause.message, err);
}

function reasonOf(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  try {
    const parsed = typeof body === 'string' ? JSON.parse(body) : body;
    const reason = (parsed as { reason?: unknown } | undefined)?.reason;
    return typeof reason === 'string' ? ` ${reason}` : '';
  } catch {
    return '';
  }
}

/**
 * The Node.js error under a fetch failure: node-fetch copies the system
 * error's code; TLS failures carry OpenSSL's (ERR_SSL_*, CERT_*, ...).
 */
function transportCause(err: unknown): { code: string | undefined; message: string } {
  let e: unknown = err;
  for (let depth = 0; depth < 4 && e; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') {
      const message = messageOf(e);
      // An https origin that answers in plain HTTP fails the handshake in
      // OpenSSL ("wrong version number"), which Node reports as EPROTO.
      if (code === 'EPROTO' && /SSL routines|wrong version number/i.test(message)) return { code: 'ERR_SSL_HANDSHAKE', message };
      return { code, message };
    }
    e = (e as { cause?: unknown }).cause;
  }
  const message = messageOf(err);
  if (/invalid url|only absolute urls/i.test(message)) return { code: 'ERR_INVALID_URL', message };
  return { code: undefined, message };
}

function messageOf(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  // A failed request's message names the URL, which carries no secret; the
  // token travels in a header and never reaches a message.
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
}
