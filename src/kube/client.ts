// API clients that count every request they send, so "a quiet cluster costs
// zero writes" is something a test and a dashboard can check.
import {
  KubeConfig,
  ServerConfiguration,
  createConfiguration,
  type HttpLibrary,
  type RequestContext,
  type ResponseContext,
  type SecurityAuthentication,
} from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Metrics } from './metrics.js';

export type ApiConstructor<T> = new (config: ReturnType<typeof createConfiguration>) => T;

export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}

/**
 * How long a kept-alive connection may sit idle before we close it.
 * kube-apiserver closes idle connections after 90 s; closing ours first
 * means no request is written to a connection the server is closing.
 */
export const IDLE_CONNECTION_MS = 60_000;

export function makeCountingClient<T>(kc: KubeConfig, api: ApiConstructor<T>, metrics: Metrics, client = 'controller', idleConnectionMs = IDLE_CONNECTION_MS, httpApi?: HttpLibrary): T {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster: set current-context or pass --kubeconfig');
  const config = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    ...(httpApi ? { httpApi } : {}),
    authMethods: { default: reusingConnections(kc, idleConnectionMs) },
    promiseMiddleware: [
      {
        pre: async (ctx: RequestContext) => {
          metrics.kubeRequests.inc({ client, verb: ctx.getHttpMethod() });
          return ctx;
        },
        post: async (res: ResponseContext) => {
          metrics.kubeResponses.inc({ code: String(res.httpStatusCode) });
          return res;
        },
      },
    ],
  });
  return new api(config);
}

export { isConflict, isNotFound, statusCode } from './errors.js';

/**
 * KubeConfig's authentication builds a new Agent for every request, so every
 * API call opened (and closed) its own TLS connection: a handshake per write,
 * and the TLS buffers of thousands of short-lived connections in the
 * process's memory. This keeps one keep-alive Agent per KubeConfig and TLS
 * material, and hands it to each request instead. The material is compared on
 * every request because KubeConfig re-reads it each time: a client
 * certificate that an exec plugin rotates gets a new Agent. Proxy agents are
 * left as KubeConfig makes them.
 */
function reusingConnections(kc: KubeConfig, idleMs: number): SecurityAuthentication {
  let reused: { key: string; agent: http.Agent } | undefined;
  return {
    getName: () => kc.getName(),
    async applySecurityAuthentication(ctx: RequestContext) {
      await kc.applySecurityAuthentication(ctx);
      const made = ctx.getAgent();
      if (!made || (made.constructor !== https.Agent && made.constructor !== http.Agent)) return;
      const options = (made as http.Agent & { options: https.AgentOptions }).options;
      const key = tlsKey(made.constructor === https.Agent, options);
      if (reused?.key !== key) {
        const kept = { ...options, keepAlive: true, timeout: idleMs };
        reused = { key, agent: made.constructor === https.Agent ? new https.Agent(kept) : new http.Agent(kept) };
      }
      ctx.setAgent(reused.agent);
    },
  };
}

function tlsKey(secure: boolean, options: https.AgentOptions): string {
  const hash = createHash('sha256').update(String(secure));
  for (const [name, value] of Object.entries(options).sort(([a], [b]) => a.localeCompare(b))) {
    if (value === undefined || typeof value === 'function') continue;
    hash.update(`\0${name}\0`);
    for (const part of [value].flat()) hash.update(Buffer.isBuffer(part) ? part : typeof part === 'object' && part !== null ? JSON.stringify(part) : String(part));
  }
  return hash.digest('hex');
}
