// Controller metrics. Label values are bounded: controller names, results,
// verbs and status codes, never object names.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

const ACTIVE_PHASES = new Set(['Launching', 'Ready', 'Idle', 'Releasing']);

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

  // ---- Leases and providers ----
  readonly leases = new Gauge({
    name: 'leasehold_leases',
    help: 'Leases in the cache, by phase and Offer.',
    labelNames: ['phase', 'offer'] as const,
    registers: [this.registry],
    collect: () => this.collectLeases(),
  });
  readonly spendRate = new Gauge({
    name: 'leasehold_spend_rate_dollars_per_hour',
    help: 'Sum of the hourly price of active Leases (Launching, Ready, Idle, Releasing), by Offer.',
    labelNames: ['offer'] as const,
    registers: [this.registry],
    collect: () => this.collectSpend(),
  });
  readonly launchDuration = new Histogram({
    name: 'leasehold_launch_duration_seconds',
    help: 'Time the provider took to launch a machine (acquire), by provider and result.',
    labelNames: ['provider', 'result'] as const,
    buckets: [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 900],
    registers: [this.registry],
  });
  readonly timeToReady = new Histogram({
    name: 'leasehold_time_to_ready_seconds',
    help: 'Time from a Lease being created to its machine being Ready, by provider.',
    labelNames: ['provider'] as const,
    buckets: [1, 2, 5, 10, 30, 60, 120, 300, 600, 900, 1800],
    registers: [this.registry],
  });
  readonly releaseFailures = new Counter({
    name: 'leasehold_release_failures_total',
    help: 'Release attempts that failed and will be retried, by provider.',
    labelNames: ['provider'] as const,
    registers: [this.registry],
  });
  readonly providerRequests = new Counter({
    name: 'leasehold_provider_requests_total',
    help: 'Calls to machine providers, by provider, operation and result code (HTTP status for Lambda; ok, error or timeout for commands).',
    labelNames: ['provider', 'operation', 'code'] as const,
    registers: [this.registry],
  });

  /** Where leasehold_leases and the spend rate read Leases from at scrape time. */
  leaseSource: () => readonly { status?: { phase?: string; offer?: string; pricePerHour?: number } }[] = () => [];

  private collectLeases(): void {
    this.leases.reset();
    const counts = new Map<string, { phase: string; offer: string; n: number }>();
    for (const l of this.leaseSource()) {
      const phase = l.status?.phase ?? 'Pending';
      const offer = l.status?.offer ?? '';
      const k = JSON.stringify([phase, offer]);
      const c = counts.get(k) ?? { phase, offer, n: 0 };
      c.n++;
      counts.set(k, c);
    }
    for (const c of counts.values()) this.leases.set({ phase: c.phase, offer: c.offer }, c.n);
  }

  private collectSpend(): void {
    this.spendRate.reset();
    const spend = new Map<string, number>();
    for (const l of this.leaseSource()) {
      const phase = l.status?.phase ?? 'Pending';
      if (!ACTIVE_PHASES.has(phase)) continue;
      const offer = l.status?.offer ?? '';
      spend.set(offer, (spend.get(offer) ?? 0) + (l.status?.pricePerHour ?? 0));
    }
    for (const [offer, v] of spend) this.spendRate.set({ offer }, v);
  }

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'leasehold_' });
  }
}
