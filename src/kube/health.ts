// One HTTP port for /healthz, /readyz and /metrics.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface HealthChecks {
  /** Liveness: the process can still serve; false makes the kubelet restart it. */
  healthy(): boolean;
  /** Readiness: caches are synced. Followers are ready too; only the leader reconciles. */
  ready(): boolean;
}

export async function serveHealth(addr: string, checks: HealthChecks, registry: Registry): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (code: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
    if (path === '/healthz') return reply(checks.healthy() ? 200 : 500, checks.healthy() ? 'ok' : 'unhealthy');
    if (path === '/readyz') return reply(checks.ready() ? 200 : 503, checks.ready() ? 'ok' : 'informers not synced');
    if (path === '/metrics') {
      registry.metrics().then((m) => reply(200, m, registry.contentType), (err) => reply(500, String(err)));
      return;
    }
    reply(404, 'not found');
  });
  const { host, port } = parseAddr(addr);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

export function boundPort(server: Server): number {
  return (server.address() as AddressInfo).port;
}

function parseAddr(addr: string): { host?: string; port: number } {
  const i = addr.lastIndexOf(':');
  const host = i > 0 ? addr.slice(0, i).replace(/^\[|\]$/g, '') : undefined;
  const port = Number(addr.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--metrics-addr ${JSON.stringify(addr)} is not host:port; use e.g. :8080 or 127.0.0.1:0`);
  }
  return { host, port };
}
