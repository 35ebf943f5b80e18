// Kubernetes Events, as `kubectl describe` shows them. A repeat of the same
// event for the same object counts on the existing Event instead of creating
// another, as the API server's event series do, and the count is written at
// most once an interval.
import { CoreV1Api, PatchStrategy, setHeaderOptions, type CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Object } from './resource.js';

export type EventType = 'Normal' | 'Warning';

export interface EventSink {
  create(namespace: string, event: CoreV1Event): Promise<void>;
  updateCount(namespace: string, name: string, count: number, lastTimestamp: Date, message?: string): Promise<void>;
}

export class KubeEventSink implements EventSink {
  constructor(private readonly api: CoreV1Api) {}
  async create(namespace: string, body: CoreV1Event): Promise<void> {
    await this.api.createNamespacedEvent({ namespace, body });
  }
  async updateCount(namespace: string, name: string, count: number, lastTimestamp: Date, message?: string): Promise<void> {
    await this.api.patchNamespacedEvent(
      { namespace, name, body: { count, lastTimestamp: lastTimestamp.toISOString(), ...(message === undefined ? {} : { message }) } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

/** A run of events on one Event: its count, the latest message, and what was last written. */
interface Series {
  namespace: string;
  name: string;
  count: number;
  /** When the Event was last written, and the count it holds there. */
  writtenAt: number;
  written: number;
  message: string;
  lastAt: Date;
  flush?: ReturnType<typeof setTimeout> | undefined;
}

const MAX_SEEN = 4096;
const MAX_MESSAGE = 1024;
/** As the API server's event series: a repeat within this long of the last one counts on the same Event. */
const SERIES_MS = 6 * 60_000;
/** A series' Event is written at most this often; the count kept meanwhile goes in the next write. */
export const SERIES_WRITE_MS = 30_000;

export class EventRecorder {
  private readonly series = new Map<string, Series>();

  constructor(
    private readonly sink: EventSink,
    private readonly component: string,
    private readonly log: Logger,
    /** Namespace for events about cluster-scoped objects. */
    private readonly clusterNamespace = 'default',
    private readonly seriesWriteMs = SERIES_WRITE_MS,
  ) {}

  /**
   * Records an event. A repeat (same object, type, reason and message)
   * within SERIES_MS of the last counts on the first one's Event, as the API
   * server's event series do; the count is written at most every
   * SERIES_WRITE_MS, so an object that says the same thing on every pass
   * costs one write an interval, not one a pass. Failures are logged, never
   * thrown: an event is not worth failing a reconcile.
   */
  async record(obj: Object, type: EventType, reason: string, message: string): Promise<void> {
    const text = clip(message);
    return this.count(`m\u0000${obj.metadata?.uid}\u0000${type}\u0000${reason}\u0000${text}`, obj, type, reason, text);
  }

  /**
   * Records an event that recurs with changing messages (one per Job a
   * controller starts, say): repeats with the same object, type and reason
   * count on one Event, whatever their messages, and the latest message is
   * written with the count. Otherwise as record.
   */
  async recordSeries(obj: Object, type: EventType, reason: string, message: string): Promise<void> {
    const text = clip(message);
    return this.count(`s\u0000${obj.metadata?.uid}\u0000${type}\u0000${reason}`, obj, type, reason, text);
  }

  /** The first event of a run creates its Event; repeats count on it, written at most once an interval. A run that stops for SERIES_MS starts a new Event. */
  private async count(key: string, obj: Object, type: EventType, reason: string, text: string): Promise<void> {
    const now = new Date();
    const run = this.series.get(key);
    if (run && now.getTime() - run.lastAt.getTime() < SERIES_MS) {
      Object.assign(run, { count: run.count + 1, message: text, lastAt: now });
      if (run.flush) return;
      const wait = run.writtenAt + this.seriesWriteMs - now.getTime();
      if (wait <= 0) return this.writeSeries(key, run, reason);
      run.flush = setTimeout(() => void this.writeSeries(key, run, reason), wait);
      run.flush.unref?.();
      return;
    }
    if (run?.flush) clearTimeout(run.flush);
    const namespace = obj.metadata?.namespace ?? this.clusterNamespace;
    try {
      const name = await this.create(obj, namespace, type, reason, text, now);
      this.series.delete(key);
      this.series.set(key, { namespace, name, count: 1, written: 1, writtenAt: now.getTime(), message: text, lastAt: now });
      if (this.series.size > MAX_SEEN) this.series.delete(this.series.keys().next().value!);
    } catch (err) {
      this.series.delete(key);
      this.log.warn({ err: String(err), reason }, 'could not record event');
    }
  }

  private async writeSeries(key: string, run: Series, reason: string): Promise<void> {
    run.flush = undefined;
    if (run.count === run.written) return;
    const count = run.count;
    run.writtenAt = Date.now();
    try {
      await this.sink.updateCount(run.namespace, run.name, count, run.lastAt, run.message);
      run.written = count;
    } catch (err) {
      this.series.delete(key);
      this.log.warn({ err: String(err), reason }, 'could not record event');
    }
  }

  private async create(obj: Object, namespace: string, type: EventType, reason: string, text: string, now: Date): Promise<string> {
    const meta = obj.metadata ?? {};
    const name = `${meta.name}.${now.getTime().toString(16)}${Math.floor(Math.random() * 0xfff).toString(16)}`;
    await this.sink.create(namespace, {
      metadata: { name, namespace },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resourceVersion: meta.resourceVersion,
      },
      type,
      reason,
      message: text,
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: this.component },
      reportingComponent: this.component,
    });
    return name;
  }
}

const clip = (message: string) => (message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message);
