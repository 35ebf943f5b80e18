// The peer queue on a real peer API server: batch/v1 Jobs in one namespace,
// reached with the PeerFleet's origin, bearer token and CA: the probe that
// readiness needs, and the whole PeerQueue interface (claims, releases,
// refusals and status write-back, each checked on a real peer). Every
// failure becomes a typed PeerQueueError, so that the verdict can tell a
// refused token (fix the credential) from a peer that is down (wait) from an
// origin or CA that is wrong (fix the spec).
import { Observable, PatchStrategy, ResponseContext, setHeaderOptions, type BatchV1Api, type ConfigurationOptions, type RequestContext, type V1Job } from '@kubernetes/client-node';
import { BoundedAnswerError, boundedHttpLibrary } from '../../kube/boundedhttp.js';
import { statusCode } from '../../kube/client.js';
import { clusterClients, remoteKubeConfig, type RemoteCluster } from '../../kube/clients.js';
import { DEFAULT_LIST_WATCH_LIMITS } from '../../kube/listwatch.js';
import type { Metrics } from '../../kube/metrics.js';
import { errorForStatus, errorForTransport, isPeerQueueError, PeerQueueError } from './errors.js';
import { checkPeerJob } from './schema.js';
import { CLAIMED_BY_ANNOTATION, LENDABLE_LABEL, REFUSED_ANNOTATION, type ClaimResult, type PeerQueue, type StatusWrite } from './types.js';

/** How long one request to the peer may take before the peer counts as down. */
export const PEER_REQUEST_TIMEOUT_MS = 10_000;

export interface KubePeerQueueOptions extends RemoteCluster {
  /** The peer namespace that holds the queue. */
  namespace: string;
  metrics: Metrics;
  timeoutMs?: number;
  /** The most one answer from the peer may hold; default the informer's list page limit. */
  answerBytes?: number;
}

export class KubePeerQueue implements PeerQueue {
  private readonly batch: BatchV1Api;
  private readonly timeoutMs: number;
  private readonly metrics: Metrics;
  private readonly cluster: string;
  readonly namespace: string;

  constructor(opts: KubePeerQueueOptions) {
    this.namespace = opts.namespace;
    this.timeoutMs = opts.timeoutMs ?? PEER_REQUEST_TIMEOUT_MS;
    this.metrics = opts.metrics;
    this.cluster = opts.name;
    let kubeConfig;
    try {
      kubeConfig = remoteKubeConfig(opts);
    } catch (err) {
      throw new PeerQueueError('Unreachable', `the origin ${opts.server} is not a usable URL: ${String(err)}`, 'config', { cause: err });
    }
    // The peer's API server is another party's: no redirect is followed with
    // our token on it, and no answer is read past the limit.
    this.batch = clusterClients(opts.name, kubeConfig, opts.metrics, 'peer', boundedHttpLibrary(opts.answerBytes ?? DEFAULT_LIST_WATCH_LIMITS.listBodyBytes)).batch;
  }

  /**
   * One namespaced list of lendable Jobs with limit=1: the cheapest request
   * that proves the peer answers, trusts our token and lets it read the queue.
   */
  async probe(signal?: AbortSignal): Promise<void> {
    await this.call((o) => this.batch.listNamespacedJob({ namespace: this.namespace, labelSelector: `${LENDABLE_LABEL}=true`, limit: 1 }, o), signal);
  }

  async listQueued(signal?: AbortSignal): Promise<V1Job[]> {
    return (await this.lendable(signal)).filter((job) => {
      const ann = job.metadata?.annotations ?? {};
      return !ann[CLAIMED_BY_ANNOTATION] && !ann[REFUSED_ANNOTATION] && !finished(job);
    });
  }

  async listClaimed(prefix: string, signal?: AbortSignal): Promise<V1Job[]> {
    return (await this.lendable(signal)).filter((job) => job.metadata?.annotations?.[CLAIMED_BY_ANNOTATION]?.startsWith(prefix));
  }

  async get(name: string, signal?: AbortSignal): Promise<V1Job> {
    return this.call((o) => this.batch.readNamespacedJob({ name, namespace: this.namespace }, o), signal);
  }

  /**
   * The claim is a merge patch that carries the resourceVersion the caller
   * read the Job at (unclaimed, from listQueued): the API server refuses it
   * with 409 if anything, another lender's claim included, wrote the Job since.
   */
  async claim(name: string, resourceVersion: string, by: string, signal?: AbortSignal): Promise<ClaimResult> {
    return this.swap(name, resourceVersion, { [CLAIMED_BY_ANNOTATION]: by }, signal);
  }

  async release(name: string, resourceVersion: string, by: string, signal?: AbortSignal): Promise<ClaimResult> {
    const job = await this.get(name, signal);
    const holder = job.metadata?.annotations?.[CLAIMED_BY_ANNOTATION];
    if (holder !== by) return { kind: 'conflict', message: `Job ${name} is claimed by ${holder ?? 'no one'}, not ${by}` };
    return this.swap(name, resourceVersion, { [CLAIMED_BY_ANNOTATION]: null }, signal);
  }

  async refuse(name: string, resourceVersion: string, reason: string, signal?: AbortSignal): Promise<ClaimResult> {
    return this.swap(name, resourceVersion, { [REFUSED_ANNOTATION]: reason }, signal);
  }

  /**
   * One PATCH of the status subresource, the annotations that describe the
   * status (host, exit code) beside it: a Job's status subresource resets
   * only the spec, so the API server keeps both. Should a peer's API server
   * drop the annotations, a second PATCH writes them.
   */
  async writeStatus(name: string, write: StatusWrite, signal?: AbortSignal): Promise<V1Job> {
    const body = { metadata: { annotations: write.annotations }, status: write.status };
    let job = await this.call((o) => this.batch.patchNamespacedJobStatus({ name, namespace: this.namespace, body }, mergePatch(o)), signal);
    const have = job.metadata?.annotations ?? {};
    if (Object.entries(write.annotations).some(([k, v]) => have[k] !== v)) {
      job = await this.call((o) => this.batch.patchNamespacedJob({ name, namespace: this.namespace, body: { metadata: { annotations: write.annotations } } }, mergePatch(o)), signal);
    }
    return job;
  }

  private async lendable(signal?: AbortSignal): Promise<V1Job[]> {
    return (await this.call((o) => this.batch.listNamespacedJob({ namespace: this.namespace, labelSelector: `${LENDABLE_LABEL}=true` }, o), signal)).items;
  }

  private async swap(name: string, resourceVersion: string, annotations: Record<string, string | null>, signal?: AbortSignal): Promise<ClaimResult> {
    const body = { metadata: { resourceVersion, annotations } };
    try {
      return { kind: 'claimed', job: await this.call((o) => this.batch.patchNamespacedJob({ name, namespace: this.namespace, body }, mergePatch(o)), signal) };
    } catch (err) {
      if (isPeerQueueError(err, 'Conflict')) return { kind: 'conflict', message: `Job ${name} changed since resourceVersion ${resourceVersion}` };
      throw err;
    }
  }

  private async call<T>(request: (options: ConfigurationOptions) => Promise<T>, caller?: AbortSignal): Promise<T> {
    // client-node has no deadline of its own: a peer that never answers must
    // still end the request (and free its socket), and it then counts as down.
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const signal = caller ? AbortSignal.any([caller, deadline]) : deadline;
    const options: ConfigurationOptions = {
      middleware: [
        {
          pre: (ctx: RequestContext) => {
            ctx.setSignal(signal);
            return new Observable(Promise.resolve(ctx));
          },
          post: (res: ResponseContext) => new Observable(this.checked(res)),
        },
      ],
      middlewareMergeStrategy: 'append',
    };
    try {
      return await request(options);
    } catch (err) {
      if (deadline.aborted) throw errorForTransport('ETIMEDOUT', `no answer within ${this.timeoutMs} ms`, err);
      throw peerError(err);
    }
  }

  /**
   * The peer's answer checked before client-node reads it (its deserializer
   * reshapes a wrongly typed field rather than refusing it): a listed Job that
   * fails the peer Job check is left out, as the queue's informer leaves it
   * out; a single Job that fails it is an error naming the field.
   */
  private async checked(res: ResponseContext): Promise<ResponseContext> {
    if (res.httpStatusCode < 200 || res.httpStatusCode >= 300) return res;
    let body: unknown;
    try {
      body = JSON.parse(await res.body.text());
    } catch {
      throw new PeerQueueError('Unknown', `the peer answered HTTP ${res.httpStatusCode} with a body that is not JSON`);
    }
    const o = (typeof body === 'object' && body !== null ? body : {}) as { kind?: unknown; items?: unknown };
    const dropped = () => this.metrics.objectsDropped.inc({ cluster: this.cluster, reason: 'invalid_object' });
    if (o.kind === 'Job') {
      const bad = checkPeerJob(body);
      if (!bad) return res;
      dropped();
      throw new PeerQueueError('Unknown', `the peer answered a Job that fails the check at ${bad.field}: ${bad.message}`);
    }
    if (o.kind !== 'JobList') return res;
    if (!Array.isArray(o.items)) throw new PeerQueueError('Unknown', 'the peer answered a JobList whose items are not a list');
    const items = o.items.filter((job) => {
      const bad = checkPeerJob(job);
      if (bad) dropped();
      return !bad;
    });
    if (items.length === o.items.length) return res;
    const text = JSON.stringify({ ...o, items });
    return new ResponseContext(res.httpStatusCode, res.headers, { text: async () => text, binary: async () => Buffer.from(text) });
  }
}

const finished = (job: V1Job) => (job.status?.conditions ?? []).some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');

/** Patches to the peer are JSON merge patches, which client-node does not pick by itself. */
const mergePatch = (o: ConfigurationOptions) => setHeaderOptions('Content-Type', PatchStrategy.MergePatch, o);

/** A client-node failure as a typed peer queue error. */
export function peerError(err: unknown): PeerQueueError {
  if (isPeerQueueError(err)) return err;
  const bounded = boundedCause(err);
  // A redirect is the origin's fault (set it to the URL that answers); an
  // answer past the limit is the peer's.
  if (bounded) return new PeerQueueError(bounded.reason === 'redirect' ? 'Unreachable' : 'Unknown', bounded.message, bounded.reason === 'redirect' ? 'config' : undefined, { cause: err });
  const code = statusCode(err);
  if (code !== undefined) return errorForStatus(code, `HTTP ${code}${reasonOf(err)}`);
  const cause = transportCause(err);
  return errorForTransport(cause.code, cause.message, err);
}

function boundedCause(err: unknown): BoundedAnswerError | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 4 && e; depth++) {
    if (e instanceof BoundedAnswerError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
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
