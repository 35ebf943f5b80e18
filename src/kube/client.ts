// API clients that count every request they send, so "a quiet cluster costs
// zero writes" is something a test and a dashboard can check.
import {
  KubeConfig,
  ServerConfiguration,
  createConfiguration,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import type { Metrics } from './metrics.js';

type ApiConstructor<T> = new (config: ReturnType<typeof createConfiguration>) => T;

export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}

export function makeCountingClient<T>(kc: KubeConfig, api: ApiConstructor<T>, metrics: Metrics, client = 'controller'): T {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster: set current-context or pass --kubeconfig');
  const config = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
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

/** The HTTP status of an error thrown by a client-node 1.x API call, if any. */
export function statusCode(err: unknown): number | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof (err as { code: unknown }).code === 'number') {
    return (err as { code: number }).code;
  }
  return undefined;
}

export const isConflict = (err: unknown) => statusCode(err) === 409;
export const isNotFound = (err: unknown) => statusCode(err) === 404;
