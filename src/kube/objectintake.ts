// What an informer takes in from an API server before it caches anything.
// Each received object is checked against a schema, then passes through a
// transform; by default it drops the bookkeeping no controller reads (see
// stripManagedFields). An object that fails the check or the transform is
// dropped and reported, never thrown: another cluster's API server may send
// anything, and nothing it sends may stop an informer, or the process. The
// warnings are rate-limited, so a server that sends garbage cannot flood the
// log.
import type { Logger } from 'pino';
import { errorText } from './errors.js';
import type { InputLimitReason } from './listwatch.js';
import type { ObjectCheck } from './objectschema.js';
import type { Clock } from './clock.js';

/** Why an informer dropped something it received: an object or event that failed its check, or an answer over a size limit. */
export type DropReason = 'invalid_object' | 'invalid_event' | 'transform_failed' | InputLimitReason;

/** At most one warning line per informer this often; the drops between are counted in it. */
const DROP_LOG_INTERVAL_MS = 10_000;

export interface ObjectIntakeOptions<T> {
  /** The informer's path, named in every log line. */
  path: string;
  check: ObjectCheck;
  transform: (object: T) => T;
  clock: Clock;
  log?: Logger | undefined;
  onDrop(reason: DropReason): void;
}

export class ObjectIntake<T> {
  private dropLog = { at: -Infinity, suppressed: 0 };

  constructor(private readonly opts: ObjectIntakeOptions<T>) {}

  /** The object as the cache stores it, or undefined when it failed the check or the transform (dropped, logged and counted). */
  admit(received: unknown, fill?: (object: T) => void): T | undefined {
    const problem = this.opts.check(received);
    if (problem) {
      this.drop('invalid_object', { object: describe(received), field: problem.field, problem: problem.message }, 'dropped an object that failed the schema check');
      return undefined;
    }
    try {
      const object = received as T;
      fill?.(object);
      return this.opts.transform(object);
    } catch (err) {
      this.drop('transform_failed', { object: describe(received), err: errorText(err).slice(0, 200) }, 'dropped an object the cache transform failed on');
      return undefined;
    }
  }

  drop(reason: DropReason, fields: Record<string, string>, message: string): void {
    this.opts.onDrop(reason);
    const now = this.opts.clock.now();
    if (now - this.dropLog.at < DROP_LOG_INTERVAL_MS) {
      this.dropLog.suppressed++;
      return;
    }
    this.opts.log?.warn({ path: this.opts.path, reason, ...fields, droppedSinceLastLine: this.dropLog.suppressed }, message);
    this.dropLog = { at: now, suppressed: 0 };
  }
}

/** namespace/name of a received object for a log line, when they are strings; bounded. */
function describe(received: unknown): string {
  const meta = (received as { metadata?: { name?: unknown; namespace?: unknown } } | null | undefined)?.metadata;
  const part = (v: unknown) => (typeof v === 'string' ? v.replace(/[\x00-\x1f\x7f]+/g, ' ').slice(0, 253) : '?');
  return typeof meta === 'object' && meta !== null ? `${typeof meta.namespace === 'string' ? `${part(meta.namespace)}/` : ''}${part(meta.name)}` : '?';
}
