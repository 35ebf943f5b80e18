// How an informer reaches the API server: paginated lists and a watch stream
// of one resource path, and the API errors that decide between watching
// again and listing afresh.
import http from 'node:http';
import https from 'node:https';
import { finished } from 'node:stream/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { errorText } from './errors.js';

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

export function statusFromObject(object: unknown): ApiStatusError {
  const s = (object ?? {}) as { code?: number; reason?: string; message?: string };
  return new ApiStatusError(s.code ?? 500, s.reason, s.message ?? 'watch ERROR event');
}

/**
 * List and watch over plain node:http(s), with the TLS agent, credentials and
 * proxy from the KubeConfig. client-node's Watch would do for the stream, but
 * it creates its AbortController only after the response headers arrive, so a
 * request that hangs before them could be neither timed out nor stopped.
 */
export class KubeListWatch<T> implements ListWatchTransport<T> {
  constructor(
    private readonly kc: KubeConfig,
    private readonly path: string,
  ) {}

  async list(query: Record<string, string>, signal: AbortSignal): Promise<ListPage<T>> {
    const res = await this.get(query, signal);
    const body = JSON.parse(await readBody(res)) as { kind?: string; apiVersion?: string; items?: T[] | null; metadata?: { resourceVersion?: string; continue?: string } };
    return {
      items: body.items ?? [],
      kind: body.kind,
      apiVersion: body.apiVersion,
      resourceVersion: body.metadata?.resourceVersion ?? '',
      continue: body.metadata?.continue || undefined,
    };
  }

  async watch(query: Record<string, string>, onEvent: (event: RawWatchEvent) => void, signal: AbortSignal): Promise<void> {
    const res = await this.get({ ...query, watch: 'true' }, signal);
    res.setEncoding('utf8');
    let buffered = '';
    res.on('data', (chunk: string) => {
      buffered += chunk;
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (!line) continue;
        let event: RawWatchEvent;
        try {
          event = JSON.parse(line) as RawWatchEvent;
        } catch {
          res.destroy(new Error(`unparseable watch event from ${this.path}: ${line.slice(0, 200)}`));
          return;
        }
        onEvent(event);
      }
    });
    try {
      await finished(res);
    } catch (err) {
      if (signal.aborted) throw err;
      throw new Error(`watch of ${this.path} broke off: ${errorText(err)}`);
    }
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
      const text = await readBody(res).catch(() => '');
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

async function readBody(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
