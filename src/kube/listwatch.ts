// How an informer reaches the API server: paginated lists and a watch stream
// of one resource path, and the API errors that decide between watching
// again and listing afresh.
import http from 'node:http';
import https from 'node:https';
import { finished } from 'node:stream/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { errorText } from './errors.js';

const MiB = 1024 * 1024;

/**
 * Size limits on what an API server sends us. A peer fleet's API server is
 * another party's: without a bound, one endless line or body would hold our
 * memory until the process dies, and every informer of ours with it.
 */
export interface ListWatchLimits {
  /** One watch event: one JSON line holding one object. */
  watchLineBytes: number;
  /** One list page's body. */
  listBodyBytes: number;
}

export const DEFAULT_LIST_WATCH_LIMITS: ListWatchLimits = {
  // The API server refuses objects above 1.5 MiB (etcd's request limit); its
  // JSON in a watch event stays well below 4 MiB.
  watchLineBytes: 4 * MiB,
  // A page holds at most 500 objects (the informer's limit); ordinary objects
  // are a few KiB, so 64 MiB is far beyond any real page and still bounded.
  listBodyBytes: 64 * MiB,
};

/** Error bodies are Status objects: a few hundred bytes. */
const ERROR_BODY_BYTES = 64 * 1024;

export type InputLimitReason = 'watch_line_too_large' | 'list_body_too_large' | 'too_many_pages';

/** An answer that passed one of our size limits; `reason` names the limit for metrics. */
export class InputLimitError extends Error {
  constructor(
    readonly reason: InputLimitReason,
    message: string,
  ) {
    super(message);
    this.name = 'InputLimitError';
  }
}

export function formatBytes(n: number): string {
  return n >= MiB && n % MiB === 0 ? `${n / MiB} MiB` : n >= 1024 && n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;
}

export interface ListPage<T> {
  items: T[];
  /** The list's kind (e.g. `NodeList`) and apiVersion; list items often lack their own. */
  kind?: string;
  apiVersion?: string;
  resourceVersion: string;
  continue?: string;
}

export interface RawWatchEvent {
  type: string;
  object: unknown;
}

/** How the informer reaches the API: list pages and a watch stream of one resource path. */
export interface ListWatchTransport<T> {
  list(query: Record<string, string>, signal: AbortSignal): Promise<ListPage<T>>;
  /** Streams events to `onEvent`; resolves when the server ends the stream, rejects on an error. */
  watch(query: Record<string, string>, onEvent: (event: RawWatchEvent) => void, signal: AbortSignal): Promise<void>;
}

/** A non-2xx answer from the API server, or an ERROR event in a watch stream. */
export class ApiStatusError extends Error {
  constructor(
    readonly statusCode: number,
    readonly reason: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'ApiStatusError';
  }
}

/** Whether the resourceVersion we list or watch from is gone: only a fresh list recovers. */
export function isResourceVersionExpired(err: unknown): boolean {
  if (!(err instanceof ApiStatusError)) return false;
  return err.statusCode === 410 || err.reason === 'Expired' || err.reason === 'Gone' || /too (old|large) resource version/i.test(err.message);
}

/** An ERROR event's Status; from another cluster it may be anything, so only well-typed fields are kept, and its text is bounded. */
export function statusFromObject(object: unknown): ApiStatusError {
  const s = (typeof object === 'object' && object !== null ? object : {}) as { code?: unknown; reason?: unknown; message?: unknown };
  const text = (v: unknown) => (typeof v === 'string' ? v.replace(/[\x00-\x1f\x7f]+/g, ' ').slice(0, 300) : undefined);
  return new ApiStatusError(typeof s.code === 'number' ? s.code : 500, text(s.reason), text(s.message) ?? 'watch ERROR event');
}

/**
 * List and watch over plain node:http(s), with the TLS agent, credentials and
 * proxy from the KubeConfig. client-node's Watch would do for the stream, but
 * it creates its AbortController only after the response headers arrive, so a
 * request that hangs before them could be neither timed out nor stopped.
 */
export class KubeListWatch<T> implements ListWatchTransport<T> {
  private readonly limits: ListWatchLimits;

  constructor(
    private readonly kc: KubeConfig,
    private readonly path: string,
    limits: Partial<ListWatchLimits> = {},
  ) {
    this.limits = { ...DEFAULT_LIST_WATCH_LIMITS, ...limits };
  }

  /** Items come back unchecked: the informer checks each against its schema. */
  async list(query: Record<string, string>, signal: AbortSignal): Promise<ListPage<T>> {
    const res = await this.get(query, signal);
    const limit = this.limits.listBodyBytes;
    const text = await readBody(res, limit, () => new InputLimitError('list_body_too_large', `a list of ${this.where()} passed ${formatBytes(limit)}, the limit on one list page's body; the list was dropped`));
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`a list of ${this.where()} is not JSON`);
    }
    const b = (typeof body === 'object' && body !== null ? body : {}) as { kind?: unknown; apiVersion?: unknown; items?: unknown; metadata?: { resourceVersion?: unknown; continue?: unknown } };
    if (b.items !== undefined && b.items !== null && !Array.isArray(b.items)) throw new Error(`a list of ${this.where()} has items that are not an array`);
    const meta = typeof b.metadata === 'object' && b.metadata !== null ? b.metadata : {};
    const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
    return {
      items: (b.items ?? []) as T[],
      kind: str(b.kind),
      apiVersion: str(b.apiVersion),
      resourceVersion: str(meta.resourceVersion) ?? '',
      continue: str(meta.continue) || undefined,
    };
  }

  async watch(query: Record<string, string>, onEvent: (event: RawWatchEvent) => void, signal: AbortSignal): Promise<void> {
    const res = await this.get({ ...query, watch: 'true' }, signal);
    const limit = this.limits.watchLineBytes;
    // Lines are cut on the newline byte, which never occurs inside a UTF-8
    // sequence, and a line is only decoded once whole.
    let parts: Buffer[] = [];
    let size = 0;
    const deliver = (line: string) => {
      if (!line) return;
      let event: RawWatchEvent;
      try {
        event = JSON.parse(line) as RawWatchEvent;
      } catch {
        throw new Error(`unparseable watch event from ${this.where()}: ${line.slice(0, 200).replace(/[\x00-\x1f\x7f]+/g, ' ')}`);
      }
      if (typeof event !== 'object' || event === null || typeof event.type !== 'string') throw new Error(`a watch event from ${this.where()} has no type`);
      onEvent(event);
    };
    const tooLarge = () => new InputLimitError('watch_line_too_large', `a watch event from ${this.where()} passed ${formatBytes(limit)} without ending, the limit on one watch event; the watch was dropped`);
    // An exception in a stream's listener would be uncaught; each one ends the stream instead, and the informer watches again after a backoff.
    res.on('data', (chunk: Buffer) => {
      try {
        let start = 0;
        for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
          const piece = chunk.subarray(start, nl);
          if (size + piece.length > limit) throw tooLarge();
          parts.push(piece);
          const line = Buffer.concat(parts).toString('utf8').trim();
          parts = [];
          size = 0;
          start = nl + 1;
          deliver(line);
        }
        const rest = chunk.subarray(start);
        size += rest.length;
        if (size > limit) throw tooLarge();
        if (rest.length > 0) parts.push(rest);
      } catch (err) {
        parts = [];
        res.destroy(err instanceof Error ? err : new Error(String(err)));
      }
    });
    try {
      await finished(res);
    } catch (err) {
      if (signal.aborted || err instanceof InputLimitError) throw err;
      throw new Error(`watch of ${this.where()} broke off: ${errorText(err)}`);
    }
  }

  /** The resource and the server it came from, for errors: no query string, no credential. */
  private where(): string {
    const server = this.kc.getCurrentCluster()?.server ?? '';
    let origin = server;
    try {
      origin = new URL(server).origin;
    } catch {
      // Not a URL: get() has already refused it.
    }
    return `${this.path} on ${origin}`;
  }

  private async get(query: Record<string, string>, signal: AbortSignal): Promise<http.IncomingMessage> {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster: set current-context or pass --kubeconfig');
    const url = new URL(cluster.server.replace(/\/+$/, '') + this.path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const options: https.RequestOptions = { method: 'GET', headers: { Accept: 'application/json' } };
    await this.kc.applyToHTTPSOptions(options);
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = (url.protocol === 'https:' ? https : http).request(url, { ...options, signal }, resolve);
      req.on('error', reject);
      req.end();
    });
    if (res.statusCode !== 200) {
      const text = await readBody(res, ERROR_BODY_BYTES, () => new Error('error body too large')).catch(() => '');
      let status: { reason?: string; message?: string } = {};
      try {
        status = JSON.parse(text) as typeof status;
      } catch {
        // Not a Status object (a proxy's page, say): keep the raw text.
      }
      throw new ApiStatusError(res.statusCode ?? 0, status.reason, `${url.pathname}: HTTP ${res.statusCode}: ${status.message ?? text.slice(0, 200)}`);
    }
    return res;
  }
}

/** The whole body, or `tooLarge()` as soon as it passes `limit` bytes (the connection is then closed). */
export async function readBody(res: http.IncomingMessage, limit: number, tooLarge: () => Error): Promise<string> {
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    res.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      res.destroy();
      throw tooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
