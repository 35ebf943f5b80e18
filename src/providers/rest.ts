// One JSON request over fetch with a per-request timeout, for the REST
// clients (Compute Engine, GitHub): an answer that never came or was cut off
// becomes a ProviderError marked answerLost, since the server may have acted
// on it; anything that came back is handed to the caller to judge. Redirects
// are never followed: the request carries a credential, and a server that
// answers 3xx must not choose where that credential goes next.
import { ProviderError } from './errors.js';

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
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    throw new ProviderError('Unknown', `${r.what}: the answer was cut off (${causeText(err)})`, { answerLost: true, cause: err });
  }
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, json: parsed };
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
