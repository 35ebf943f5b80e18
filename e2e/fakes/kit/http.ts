// HTTP plumbing every emulator shares: JSON answers, bounded request bodies,
// the credential a request carries, and a server on loopback that routes by
// path prefix.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** An answer: status, JSON body (or a TextBody), extra headers. */
export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/**
 * A body sent as it is instead of as JSON: what a proxy in front of an API
 * answers on its behalf (a CDN's plain-text rate-limit page), so that clients
 * meet the body they will get from the real service.
 */
export class TextBody {
  constructor(
    readonly text: string,
    readonly contentType = 'text/plain; charset=UTF-8',
  ) {}
}

/**
 * An error a route (or the kit) answers with. `code` is the API's own error
 * code; the kit leaves it undefined for errors it raises itself and the
 * emulator's error style fills it in from the status.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
    readonly suggestion?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

export const DEFAULT_MAX_BODY = 2 * 1024 * 1024;

/** The request body as text; a body over `maxBytes` is a 400 and the socket is closed. */
export function readBody(req: IncomingMessage, maxBytes = DEFAULT_MAX_BODY): Promise<string> {
  return new Promise((resolveBody, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) {
        reject(new HttpError(400, undefined, 'Request body too large.'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolveBody(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The body as JSON; an empty body is undefined, anything unparsable a 400. */
export function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, undefined, 'The request body is not valid JSON.');
  }
}

export function sendJson(res: ServerResponse, reply: Reply): void {
  // A 304 has no body (RFC 9110 15.4.5): only its headers go.
  if (reply.status === 304) {
    res.writeHead(304, reply.headers ?? {});
    res.end();
    return;
  }
  const raw = reply.body instanceof TextBody ? reply.body : undefined;
  const text = raw ? raw.text : JSON.stringify(reply.body);
  res.writeHead(reply.status, { 'content-type': raw ? raw.contentType : 'application/json', 'content-length': Buffer.byteLength(text), ...(reply.headers ?? {}) });
  res.end(text);
}

/** Compares secrets in constant time, so that a test of auth does not leak a key by timing. */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * The credentials an Authorization header may carry, most likely first:
 * `Bearer <token>`; or basic auth with the credential as user name, or as the
 * bare (not base64 user:password) value.
 */
export function credentialsOf(header: string | undefined): string[] {
  if (!header) return [];
  const [scheme, value = ''] = header.trim().split(/\s+/, 2);
  if (!scheme) return [];
  if (scheme.toLowerCase() === 'bearer') return value ? [value] : [];
  if (scheme.toLowerCase() !== 'basic' || !value) return [];
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  return decoded.includes(':') ? [decoded.slice(0, decoded.indexOf(':')), value] : [value];
}

/** Part of the URL space served by one handler; `path` is what follows the prefix ("/" for the prefix itself). */
export interface Mount {
  prefix: string;
  serve(req: IncomingMessage, res: ServerResponse, path: string, url: URL): void;
}

export interface ListenOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default: any free port. */
  port?: number;
  mounts: readonly Mount[];
  /** The answer to a path under no mount. */
  unmounted: Reply;
}

export interface ListeningServer {
  /** "http://HOST:PORT". */
  readonly origin: string;
  readonly port: number;
  /** Cuts every open connection (hung requests included) and resolves once the server is closed. */
  close(): Promise<void>;
}

/** Serves the mounts; trailing slashes of a path are ignored. */
export async function listen(opts: ListenOptions): Promise<ListeningServer> {
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://emulator');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const mount = opts.mounts.find((m) => path === m.prefix || path.startsWith(`${m.prefix}/`));
    if (mount) {
      mount.serve(req, res, path.slice(mount.prefix.length) || '/', url);
      return;
    }
    req.resume();
    sendJson(res, opts.unmounted);
  });
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolveListen());
  });
  const addr = server.address();
  if (!addr || typeof addr !== 'object') throw new Error('the emulator has no address');
  return {
    origin: `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`,
    port: addr.port,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
