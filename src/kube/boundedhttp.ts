// client-node's requests to another party's API server (a peer fleet's).
// The library client-node ships with follows redirects, headers and bearer
// token included, and reads any answer whole into memory. This one sends
// each request once over node:http(s) with the agent the KubeConfig made
// (so the peer's CA still pins TLS), never follows a redirect, and drops an
// answer that passes a size limit before it is parsed.
import http from 'node:http';
import https from 'node:https';
import { ResponseContext, wrapHttpLibrary, type HttpLibrary, type RequestContext } from '@kubernetes/client-node';
import { formatBytes, readBody } from './listwatch.js';

/** Why a request to another cluster was not answered with something we read. */
export class BoundedAnswerError extends Error {
  constructor(
    readonly reason: 'redirect' | 'answer_too_large',
    message: string,
  ) {
    super(message);
    this.name = 'BoundedAnswerError';
  }
}

/** The origin and path of a URL, for messages: no query string, never a credential. */
function place(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

export function boundedHttpLibrary(answerBytes: number): HttpLibrary {
  return wrapHttpLibrary({
    async send(ctx: RequestContext): Promise<ResponseContext> {
      const url = new URL(ctx.getUrl());
      const body = ctx.getBody();
      if (body !== undefined && typeof body !== 'string') throw new Error(`${place(url)}: only string request bodies are sent to another cluster`);
      const agent = ctx.getAgent();
      const options: https.RequestOptions = {
        method: ctx.getHttpMethod(),
        headers: ctx.getHeaders(),
        ...(agent ? { agent } : {}),
        ...(ctx.getSignal() ? { signal: ctx.getSignal() } : {}),
      };
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const req = (url.protocol === 'https:' ? https : http).request(url, options, resolve);
        req.on('error', reject);
        req.end(body);
      });
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) {
        res.destroy();
        const location = res.headers.location;
        let to = '(no Location header)';
        if (typeof location === 'string') {
          try {
            to = place(new URL(location, url));
          } catch {
            to = '(an unparseable Location header)';
          }
        }
        throw new BoundedAnswerError('redirect', `${place(url)} answered HTTP ${status}, a redirect to ${to}; redirects are not followed, since the request carries the peer token: set the origin to the URL that answers directly`);
      }
      const text = await readBody(res, answerBytes, () => new BoundedAnswerError('answer_too_large', `${place(url)} answered with more than ${formatBytes(answerBytes)}, the limit on one answer from another cluster; it was dropped unread`));
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      return new ResponseContext(status, headers, { text: async () => text, binary: async () => Buffer.from(text, 'utf8') });
    },
  });
}
