// Lease metrics, on the manager's registry. Labels are bounded: phase, Offer
// name (an admin's object, few of them) and provider kind, never a Lease.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { ACTIVE_PHASES, type Lease } from '../../src/api/index.js';

type LeaseView = Pick<Lease, 'status'> | { status?: undefined };

export class LeaseMetrics {
  readonly leases: Gauge<'phase' | 'offer'>;
  readonly spendRate: Gauge<'offer'>;
  readonly launchDuration: Histogram<'provider' | 'result'>;
  readonly timeToReady: Histogram<'provider'>;
  readonly releaseFailures: Counter<'provider'>;

  /** `source` is read at scrape time: the informer's cache of Leases. */
  constructor(registry: Registry, source: () => readonly LeaseView[]) {
    const registers = [registry];
    this.leases = new Gauge({
      name: 'leasehold_leases',
      help: 'Leases in the cache, by phase and Offer.',
      labelNames: ['phase', 'offer'] as const,
      registers,
      collect: () => {
        this.leases.reset();
        const counts = new Map<string, { phase: string; offer: string; n: number }>();
        for (const l of source()) {
          const phase = l.status?.phase ?? 'Pending';
          const offer = l.status?.offer ?? '';
          const k = JSON.stringify([phase, offer]);
          const c = counts.get(k) ?? { phase, offer, n: 0 };
          c.n++;
          counts.set(k, c);
        }
        for (const c of counts.values()) this.leases.set({ phase: c.phase, offer: c.offer }, c.n);
      },
    });
    this.spendRate = new Gauge({
      name: 'leasehold_spend_rate_dollars_per_hour',
      help: 'Sum of the hourly price of active Leases (Launching, Ready, Idle, Releasing), by Offer.',
      labelNames: ['offer'] as const,
      registers,
      collect: () => {
        this.spendRate.reset();
        const spend = new Map<string, number>();
        for (const l of source()) {
          if (!ACTIVE_PHASES.includes(l.status?.phase ?? 'Pending')) continue;
          const offer = l.status?.offer ?? '';
          spend.set(offer, (spend.get(offer) ?? 0) + (l.status?.pricePerHour ?? 0));
        }
        for (const [offer, v] of spend) this.spendRate.set({ offer }, v);
      },
    });
    this.launchDuration = new Histogram({
      name: 'leasehold_launch_duration_seconds',
      help: 'Time the provider took to launch a machine (acquire), by provider and result.',
      labelNames: ['provider', 'result'] as const,
      buckets: [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 900],
      registers,
    });
    this.timeToReady = new Histogram({
      name: 'leasehold_time_to_ready_seconds',
      help: 'Time from a Lease being created to its machine being Ready, by provider.',
      labelNames: ['provider'] as const,
      buckets: [1, 2, 5, 10, 30, 60, 120, 300, 600, 900, 1800],
      registers,
    });
    this.releaseFailures = new Counter({
      name: 'leasehold_release_failures_total',
      help: 'Release attempts that failed and will be retried, by provider.',
      labelNames: ['provider'] as const,
      registers,
    });
  }
}
