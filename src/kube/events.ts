// Kubernetes Events, as `kubectl describe` shows them. A repeat of the same
// event for the same object updates the count of the existing Event instead
// of creating another, the way client-go's recorder aggregates.
import { CoreV1Api, PatchStrategy, setHeaderOptions, type CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Object } from './resource.js';

export type EventType = 'Normal' | 'Warning';

export interface EventSink {
  create(namespace: string, event: CoreV1Event): Promise<void>;
  updateCount(namespace: string, name: string, count: number, lastTimestamp: Date): Promise<void>;
}

export class KubeEventSink implements EventSink {
  constructor(private readonly api: CoreV1Api) {}
  async create(namespace: string, body: CoreV1Event): Promise<void> {
    await this.api.createNamespacedEvent({ namespace, body });
  }
  async updateCount(namespace: string, name: string, count: number, lastTimestamp: Date): Promise<void> {
    await this.api.patchNamespacedEvent(
      { namespace, name, body: { count, lastTimestamp: lastTimestamp.toISOString() } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

interface Seen {
  namespace: string;
  name: string;
  count: number;
}

const MAX_SEEN = 4096;
const MAX_MESSAGE = 1024;

export class EventRecorder {
  private readonly seen = new Map<string, Seen>();

  constructor(
    private readonly sink: EventSink,
    private readonly component: string,
    private readonly log: Logger,
    /** Namespace for events about cluster-scoped objects. */
    private readonly clusterNamespace = 'default',
  ) {}

  /** Records an event; failures are logged, never thrown: an event is not worth failing a reconcile. */
  async record(obj: Object, type: EventType, reason: string, message: string): Promise<void> {
    const meta = obj.metadata ?? {};
    const namespace = meta.namespace ?? this.clusterNamespace;
    const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
    const key = `${meta.uid}\u0000${type}\u0000${reason}\u0000${text}`;
    const now = new Date();
    try {
      const prev = this.seen.get(key);
      if (prev) {
        prev.count++;
        this.touch(key, prev);
        await this.sink.updateCount(prev.namespace, prev.name, prev.count, now);
        return;
      }
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
      this.touch(key, { namespace, name, count: 1 });
    } catch (err) {
      this.seen.delete(key);
      this.log.warn({ err: String(err), reason }, 'could not record event');
    }
  }

  private touch(key: string, value: Seen): void {
    this.seen.delete(key);
    this.seen.set(key, value);
    if (this.seen.size > MAX_SEEN) this.seen.delete(this.seen.keys().next().value!);
  }
}
