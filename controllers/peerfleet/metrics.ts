// PeerFleet metrics, on the manager's registry. Labels are bounded: the
// PeerFleet (an admin's object, few of them), a host state, a drain reason
// or an outcome; never a node or a peer Job. Gauges are read from the
// informer's PeerFleets at scrape time, so they are what status says.
import { Counter, Gauge, type Registry } from 'prom-client';
import { HOST_STATES, type PeerFleet } from '../../src/api/index.js';
import type { FleetPass } from './policy/lending.js';
import type { EffectResult } from './effects.js';

type Labels = 'namespace' | 'peerfleet';

const labelsOf = (f: PeerFleet) => ({ namespace: f.metadata?.namespace ?? '', peerfleet: f.metadata?.name ?? '' });

export class PeerFleetMetrics {
  readonly hosts: Gauge<Labels | 'state'>;
  readonly lentGPUSeconds: Gauge<Labels>;
  readonly lentAmount: Gauge<Labels>;
  readonly unmeasured: Gauge<Labels>;
  readonly ledgerGPUSeconds: Gauge<Labels>;
  readonly ledgerAmount: Gauge<Labels>;
  readonly mismatched: Gauge<Labels>;
  readonly sessions: Counter<Labels>;
  readonly claims: Counter<Labels | 'outcome'>;
  readonly drains: Counter<Labels | 'reason'>;
  readonly writebacks: Counter<Labels | 'outcome'>;
  readonly forged: Gauge<Labels>;

  constructor(registry: Registry, source: () => readonly PeerFleet[]) {
    const registers = [registry];
    const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[], fill: (g: Gauge<L>, f: PeerFleet) => void): Gauge<L> => {
      const g: Gauge<L> = new Gauge<L>({
        name,
        help,
        labelNames,
        registers,
        collect: () => {
          g.reset();
          for (const f of source()) fill(g, f);
        },
      });
      return g;
    };
    this.hosts = gauge('leasehold_peerfleet_hosts', 'Lendable nodes of a PeerFleet by state, from its status.', ['namespace', 'peerfleet', 'state'] as const, (g, f) => {
      for (const state of HOST_STATES) g.set({ ...labelsOf(f), state }, (f.status?.hosts ?? []).filter((h) => h.state === state).length);
    });
    this.lentGPUSeconds = gauge('leasehold_peerfleet_lent_gpu_seconds', 'GPU-seconds of peer Jobs our nodes ran, from the peer Job records.', ['namespace', 'peerfleet'] as const, (g, f) => {
      if (f.status?.accounting) g.set(labelsOf(f), f.status.accounting.gpuSeconds);
    });
    this.lentAmount = gauge('leasehold_peerfleet_lent_amount_usd', 'US dollars earned: lent GPU-seconds at pricePerGPUHour.', ['namespace', 'peerfleet'] as const, (g, f) => {
      if (f.status?.accounting) g.set(labelsOf(f), f.status.accounting.amountUSD);
    });
    this.unmeasured = gauge('leasehold_peerfleet_unmeasured_jobs', 'Peer Jobs our nodes ran whose records cannot be measured.', ['namespace', 'peerfleet'] as const, (g, f) => {
      if (f.status?.accounting) g.set(labelsOf(f), f.status.accounting.unmeasured ?? 0);
    });
    this.ledgerGPUSeconds = gauge('leasehold_peerfleet_ledger_gpu_seconds', 'GPU-seconds of peer Jobs our nodes ran, from our own ledger of the mirror Jobs.', ['namespace', 'peerfleet'] as const, (g, f) => {
      if (f.status?.accounting?.ledger) g.set(labelsOf(f), f.status.accounting.ledger.gpuSeconds);
    });
    this.ledgerAmount = gauge('leasehold_peerfleet_ledger_amount_usd', 'US dollars by our own ledger: its GPU-seconds at pricePerGPUHour.', ['namespace', 'peerfleet'] as const, (g, f) => {
      if (f.status?.accounting?.ledger) g.set(labelsOf(f), f.status.accounting.ledger.amountUSD);
    });
    this.mismatched = gauge('leasehold_peerfleet_ledger_mismatched_jobs', 'Peer Jobs whose record differs from our ledger, or is gone.', ['namespace', 'peerfleet'] as const, (g, f) => {
      if (f.status?.accounting) g.set(labelsOf(f), f.status.accounting.mismatched ?? 0);
    });
    this.sessions = new Counter({ name: 'leasehold_peerfleet_sessions_total', help: 'Lending sessions started.', labelNames: ['namespace', 'peerfleet'] as const, registers });
    this.claims = new Counter({ name: 'leasehold_peerfleet_claims_total', help: 'Claims of peer Jobs, by outcome (claimed, conflict: another lender or the peer wrote first, refused: unsafe template).', labelNames: ['namespace', 'peerfleet', 'outcome'] as const, registers });
    this.drains = new Counter({ name: 'leasehold_peerfleet_drains_total', help: 'Lending sessions that began draining, by reason.', labelNames: ['namespace', 'peerfleet', 'reason'] as const, registers });
    this.forged = new Gauge({ name: 'leasehold_peerfleet_forged_claims', help: 'Peer Jobs that carry a claim in our name our record never made, at the last pass; they are not run.', labelNames: ['namespace', 'peerfleet'] as const, registers });
    this.writebacks = new Counter({ name: 'leasehold_peerfleet_writebacks_total', help: 'Status write-backs to peer Jobs, by outcome.', labelNames: ['namespace', 'peerfleet', 'outcome'] as const, registers });
  }

  observe(fleet: PeerFleet, pass: FleetPass, results: readonly EffectResult[]): void {
    const l = labelsOf(fleet);
    if (pass.sessionsStarted > 0) this.sessions.inc(l, pass.sessionsStarted);
    this.forged.set(l, pass.forged);
    for (const reason of pass.drains) this.drains.inc({ ...l, reason });
    for (const r of results) {
      if (r.effect.kind === 'claim' && (r.outcome === 'claimed' || r.outcome === 'conflict' || r.outcome === 'refused')) this.claims.inc({ ...l, outcome: r.outcome });
      if (r.effect.kind === 'writeBack') this.writebacks.inc({ ...l, outcome: r.outcome === 'error' ? 'error' : 'ok' });
    }
  }
}
