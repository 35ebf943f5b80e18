// One JSON request over fetch with a per-request timeout, for the REST
// clients (Compute Engine, GitHub): an answer that never came or was cut off
// becomes a ProviderError marked answerLost, since the server may have acted
// on it; anything that came back is handed to the caller to judge. Redirects
// are never followed: the request carries a credential, and a server that
// answers 3xx must not choose where that credential goes next.
import { ProviderError } from './errors.js';

/**
 * The most of one answer we read. Endpoints may be chosen by a tenant (a
 * RunnerTarget's GitHub or Compute Engine URL), so an answer is read as a
 * stream and dropped past this: the largest real ones (a zone's instance
 * list, 500 per page; a page of runners) are well under 1 MiB.
 */
const MiB = 1024 * 1024;
export const MAX_REST_ANSWER_BYTES = 8 * MiB;

export interface RestAnswer {
  status: number;
  headers: Headers;
  /** The parsed body; undefined when it was empty or not JSON. */
  json: unknown;
}

export interface RestRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** A JSON body, or a string sent as is (form bodies). */
  body?: unknown;
  /** Says what the request was in errors ("Compute Engine POST /instances"): never a token, key or query string. */
  what: string;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  fetch?: typeof fetch;
  /** Default MAX_REST_ANSWER_BYTES. */
  maxAnswerBytes?: number;
}

export async function sendRest(r: RestRequest): Promise<RestAnswer> {
  const timeout = AbortSignal.timeout(r.timeoutMs);
  const signal = r.signal ? AbortSignal.any([r.signal, timeout]) : timeout;
  const json = r.body !== undefined && typeof r.body !== 'string';
  let res: Response;
  try {
    res = await (r.fetch ?? fetch)(r.url, {
      method: r.method,
      headers: { accept: 'application/json', ...(json ? { 'content-type': 'application/json' } : {}), ...r.headers },
      ...(r.body === undefined ? {} : { body: json ? JSON.stringify(r.body) : (r.body as string) }),
      signal,
      redirect: 'manual',
    });
  } catch (err) {
    if (timeout.aborted) throw new ProviderError('Timeout', `${r.what}: no answer within ${Math.round(r.timeoutMs / 1000)}s`, { answerLost: true, cause: err });
    if (r.signal?.aborted) throw new ProviderError('Timeout', `${r.what}: cancelled`, { answerLost: true, cause: err });
    throw new ProviderError('Unknown', `${r.what}: the connection failed before an answer came back (${causeText(err)})`, { answerLost: true, cause: err });
  }
  refuseRedirect(res, r.url, r.what);
  const text = await readAnswer(res, r.what, r.url, r.maxAnswerBytes);
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, json: parsed };
}

/**
 * The body of `res` as text, read no further than `limit` bytes. An answer
 * cut off or over the limit is a ProviderError marked answerLost: the server
 * may have acted on the request all the same.
 */
export async function readAnswer(res: Response, what: string, url: string, limit = MAX_REST_ANSWER_BYTES): Promise<string> {
  try {
    return await readLimited(res, limit);
  } catch (err) {
    if (err instanceof AnswerTooLarge) {
      throw new ProviderError('Unknown', `${what}: the answer passed ${limit % MiB === 0 ? `${limit / MiB} MiB` : `${limit} bytes`}, the limit on one answer (HTTP ${res.status} from ${place(url)}); it was dropped unread`, { answerLost: true });
    }
    throw new ProviderError('Unknown', `${what}: the answer was cut off (${causeText(err)})`, { answerLost: true, cause: err });
  }
}

class AnswerTooLarge extends Error {}

async function readLimited(res: Response, limit: number): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel().catch(() => undefined);
    throw new AnswerTooLarge();
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new AnswerTooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Where a URL points, without its query string (which may carry anything the caller put there). */
function place(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return url.slice(0, 200);
  }
}

/**
 * Throws when `res` (fetched with redirect: 'manual') is a redirect: the
 * request is not repeated at the new place, so no credential goes there.
 */
export function refuseRedirect(res: Response, url: string, what: string): void {
  const location = res.headers.get('location');
  if (res.status < 300 || res.status > 399 || location === null) return;
  void res.body?.cancel().catch(() => undefined);
  let to: string;
  try {
    to = place(new URL(location, url).toString());
  } catch {
    to = location.slice(0, 200);
  }
  throw new ProviderError(
    'InvalidTarget',
    sanitize(`${what}: ${place(url)} answered HTTP ${res.status}, a redirect to ${to}; redirects are not followed, since the request carries a credential: set the endpoint to the URL that answers directly`),
    { retryable: false },
  );
}

function causeText(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}

/** Error text from a provider, made safe for events and status: one line, bounded. */
export function sanitize(s: string): string {
  return s.replace(/[\x00-\x1f\x7f]+/g, ' ').slice(0, 512);
}

/** Retry-After (seconds, or an HTTP date) in milliseconds from now. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
