// JSON logs with pino. Secret-looking fields are redacted at the top level and
// one level down, as a backstop: code never logs secret values on purpose.
import { pino, type DestinationStream, type Logger } from 'pino';
import type { KubernetesObject } from '@kubernetes/client-node';

const SECRET_KEYS = ['apiKey', 'token', 'bearerToken', 'password', 'privateKey', 'authorization', 'Authorization', 'credentials'];

// Each key redacted at the top level and one level down: a logged object, or
// an object nested in one (`{lease: {...}}`, `{err: {...}}`).
const REDACT = [...SECRET_KEYS.flatMap((k) => [k, `*.${k}`]), 'headers.authorization', '*.headers.authorization', 'secret.data', '*.secret.data', 'stringData', '*.stringData'];

export function createLogger(opts: { level?: string; destination?: DestinationStream } = {}): Logger {
  const options = {
    level: opts.level ?? 'info',
    base: { component: 'leasehold' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT, censor: '[redacted]' },
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A child logger naming the object a line is about. */
export function forObject(log: Logger, obj: KubernetesObject): Logger {
  return log.child({ kind: obj.kind, namespace: obj.metadata?.namespace, name: obj.metadata?.name });
}
