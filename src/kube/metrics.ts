// Controller metrics. Label values are bounded: controller names, results,
// verbs and status codes, never object names.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  readonly reconcileTotal = new Counter({
    name: 'leasehold_reconcile_total',
    help: 'Reconciles by controller and result (success, error, requeue).',
    labelNames: ['controller', 'result'] as const,
    registers: [this.registry],
  });
  readonly reconcileDuration = new Histogram({
    name: 'leasehold_reconcile_duration_seconds',
    help: 'Time one reconcile took, by controller.',
    labelNames: ['controller'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'leasehold_workqueue_depth',
    help: 'Keys waiting in the work queue, by controller.',
    labelNames: ['controller'] as const,
    registers: [this.registry],
  });
  readonly unfinishedWork = new Gauge({
    name: 'leasehold_workqueue_unfinished_work_seconds',
    help: 'Seconds of work in progress that has not finished, summed over keys being reconciled, by controller (a value that grows means stuck reconciles).',
    labelNames: ['controller'] as const,
    registers: [this.registry],
  });
  readonly longestRunning = new Gauge({
    name: 'leasehold_workqueue_longest_running_processor_seconds',
    help: 'Seconds the longest-running reconcile has been in progress, by controller.',
    labelNames: ['controller'] as const,
    registers: [this.registry],
  });
  readonly effectsInFlight = new Gauge({
    name: 'leasehold_effects_in_flight',
    help: 'Long effects (acquire, probe, release) running off the reconcile workers, by controller and kind.',
    labelNames: ['controller', 'kind'] as const,
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: 'leasehold_leader',
    help: '1 while this replica holds the leader election lease, else 0.',
    registers: [this.registry],
  });
  readonly kubeRequests = new Counter({
    name: 'leasehold_kube_requests_total',
    help: 'Requests this controller sent to the Kubernetes API, by client (controller, leader-election) and HTTP verb.',
    labelNames: ['client', 'verb'] as const,
    registers: [this.registry],
  });
  readonly kubeResponses = new Counter({
    name: 'leasehold_kube_responses_total',
    help: 'Responses from the Kubernetes API, by status code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly informerRestarts = new Counter({
    name: 'leasehold_informer_restarts_total',
    help: 'Watch restarts after an error, close or watchdog timeout, by resource.',
    labelNames: ['resource', 'reason'] as const,
    registers: [this.registry],
  });
  readonly objectsDropped = new Counter({
    name: 'leasehold_objects_dropped_total',
    help: 'Objects, watch events and whole list or watch answers an informer dropped before they reached its cache: ones that failed the schema check (invalid_object, invalid_event, transform_failed) or answers over a size limit (watch_line_too_large, list_body_too_large, too_many_pages), by cluster (local, or peer:<namespace>/<PeerFleet>) and reason.',
    labelNames: ['cluster', 'reason'] as const,
    registers: [this.registry],
  });
  readonly informerHandlerErrors = new Counter({
    name: 'leasehold_informer_handler_errors_total',
    help: 'Informer event handlers that threw or rejected, by resource; the informer goes on with the next handler and event.',
    labelNames: ['resource'] as const,
    registers: [this.registry],
  });
  readonly unhandledRejections = new Counter({
    name: 'leasehold_unhandled_rejections_total',
    help: 'Promise rejections no code handled; each was logged and the process went on.',
    registers: [this.registry],
  });

  // ---- providers (every kind's) ----
  readonly providerRequests = new Counter({
    name: 'leasehold_provider_requests_total',
    help: 'Calls to machine providers, by provider, operation and result code (HTTP status for Lambda; ok, error or timeout for commands).',
    labelNames: ['provider', 'operation', 'code'] as const,
    registers: [this.registry],
  });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'leasehold_' });
  }
}
