// The HTTP server GitHub delivers webhooks to (--github-webhook-port), on
// its own port apart from /metrics and the probes: any path, POST only,
// with the body bounded before it is read whole. What is answered is
// receiver.ts's; each delivery is counted by result.
import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { DELIVERY_RESULTS, receiveDelivery, refuseBeforeBody, type Answer, type DeliveryResult, type ReceiverDeps } from './receiver.js';

/** GitHub caps payloads at 25 MB; workflow_job deliveries are a few KiB. */
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

export interface WebhookServerOptions extends ReceiverDeps {
  port: number;
  host?: string | undefined;
  bodyLimitBytes?: number;
  registry?: Registry;
}

export function deliveriesCounter(registry: Registry): Counter<'result'> {
  const counter = new Counter({
    name: 'leasehold_github_webhook_deliveries_total',
    help: 'GitHub webhook deliveries the controller answered, by result (accepted, coalesced, ignored, ping, unauthorized, malformed, too_large, unsupported_media_type, method_not_allowed, not_leader, error).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of DELIVERY_RESULTS) counter.inc({ result }, 0);
  return counter;
}

export async function startWebhookServer(opts: WebhookServerOptions): Promise<Server> {
  const limit = opts.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const counter = opts.registry ? deliveriesCounter(opts.registry) : undefined;
  const server = createServer((req, res) => {
    const reply = (a: Answer, close = false) => {
      counter?.inc({ result: a.result as DeliveryResult });
      res.writeHead(a.status, { 'content-type': 'application/json', ...(a.headers ?? {}), ...(close ? { connection: 'close' } : {}) });
      res.end(JSON.stringify({ message: a.message }));
    };
    const early = refuseBeforeBody(req.method, req.headers, opts.leader());
    if (early) {
      req.resume();
      return reply(early);
    }
    const tooLarge: Answer = { status: 413, result: 'too_large', message: `the body is over ${limit} bytes` };
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      return reply(tooLarge, true);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on('data', (chunk: Buffer) => {
      if (refused) return;
      size += chunk.length;
      if (size > limit) {
        refused = true;
        chunks.length = 0;
        reply(tooLarge, true);
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', () => undefined);
    req.on('end', () => {
      if (refused) return;
      receiveDelivery(req.headers, Buffer.concat(chunks), opts).then(
        (a) => reply(a),
        (err) => {
          opts.log?.error({ err: String(err).slice(0, 300) }, 'answering a webhook delivery failed');
          reply({ status: 500, result: 'error', message: 'the delivery could not be handled' });
        },
      );
    });
  });
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return server;
}
