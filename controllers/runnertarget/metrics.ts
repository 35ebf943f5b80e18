// RunnerTarget metrics, on the manager's registry. Labels are bounded: the
// RunnerTarget (an admin's object), a host state, an action, an outcome, a
// zone of the spec; never a host or a job. Pool gauges are read from the
// informer's RunnerTargets at scrape time, so they are what status says.
import { Counter, Gauge, type Registry } from 'prom-client';
import { RUNNER_HOST_STATES, type Receipt, type RunnerTarget } from '../../src/api/index.js';
import type { ChangeOutcome } from './checkrun/changecontext.js';
import type { CheckState } from './machine.js';
import type { PlanEvent } from './policy/plan.js';

const labelsOf = (t: RunnerTarget) => ({ namespace: t.metadata?.namespace ?? '', runnertarget: t.metadata?.name ?? '' });
const TARGET = ['namespace', 'runnertarget'] as const;

export class RunnerTargetMetrics {
  readonly checks: Counter<'namespace' | 'runnertarget' | 'result'>;
  readonly changes: Counter<'namespace' | 'runnertarget' | 'action' | 'outcome'>;
  readonly launches: Counter<'namespace' | 'runnertarget' | 'zone' | 'outcome'>;
  readonly preemptions: Counter<'namespace' | 'runnertarget'>;
  readonly preemptedJobs: Counter<'namespace' | 'runnertarget'>;

  constructor(registry: Registry, source: () => readonly RunnerTarget[]) {
    const registers = [registry];
    const pool = new Gauge({
      name: 'leasehold_runnertarget_hosts',
      help: 'Hosts of a RunnerTarget by state, from its status.',
      labelNames: [...TARGET, 'state'] as const,
      registers,
      collect: () => {
        pool.reset();
        for (const t of source()) for (const state of RUNNER_HOST_STATES) pool.set({ ...labelsOf(t), state }, (t.status?.hosts ?? []).filter((h) => h.state === state).length);
      },
    });
    const queued = new Gauge({
      name: 'leasehold_runnertarget_queued_jobs',
      help: 'Queued jobs the runners of a RunnerTarget could take, at its last check.',
      labelNames: TARGET,
      registers,
      collect: () => {
        queued.reset();
        for (const t of source()) if (t.status?.counts) queued.set(labelsOf(t), t.status.counts.queued);
      },
    });
    const spend = new Gauge({
      name: 'leasehold_runnertarget_spend_today_usd',
      help: 'Estimated spend of a RunnerTarget in the current UTC day, in US dollars.',
      labelNames: TARGET,
      registers,
      collect: () => {
        spend.reset();
        for (const t of source()) if (t.status?.spendTodayUSD !== undefined) spend.set(labelsOf(t), t.status.spendTodayUSD);
      },
    });
    const budget = new Gauge({
      name: 'leasehold_runnertarget_daily_budget_usd',
      help: 'spec.dailyBudgetUSD of a RunnerTarget, to draw beside its spend.',
      labelNames: TARGET,
      registers,
      collect: () => {
        budget.reset();
        for (const t of source()) if (t.spec?.dailyBudgetUSD !== undefined) budget.set(labelsOf(t), t.spec.dailyBudgetUSD);
      },
    });
    this.preemptions = new Counter({ name: 'leasehold_runnertarget_preemptions_total', help: 'Hosts a check found preempted (spot VM gone or TERMINATED).', labelNames: TARGET, registers });
    this.preemptedJobs = new Counter({ name: 'leasehold_runnertarget_preempted_jobs_total', help: 'Jobs a check found running on a host whose spot VM was preempted.', labelNames: TARGET, registers });
    this.checks = new Counter({ name: 'leasehold_runnertarget_checks_total', help: 'Checks by how they ended (Done, Held, NotDurable, DryRun, Failed).', labelNames: [...TARGET, 'result'] as const, registers });
    this.changes = new Counter({ name: 'leasehold_runnertarget_changes_total', help: 'Provider changes by receipt action and outcome (ok, failed).', labelNames: [...TARGET, 'action', 'outcome'] as const, registers });
    this.launches = new Counter({ name: 'leasehold_runnertarget_launches_total', help: 'VM inserts by zone and outcome (ok, failed).', labelNames: [...TARGET, 'zone', 'outcome'] as const, registers });
  }

  check(target: RunnerTarget, state: CheckState): void {
    this.checks.inc({ ...labelsOf(target), result: state });
  }

  /** Counts the hosts a live check found preempted and the jobs that cut (plan events Preempted and PreemptedJob). */
  found(target: RunnerTarget, events: readonly PlanEvent[]): void {
    const preempted = events.filter((e) => e.reason === 'Preempted').length;
    if (preempted > 0) this.preemptions.inc(labelsOf(target), preempted);
    const cut = events.filter((e) => e.reason === 'PreemptedJob').length;
    if (cut > 0) this.preemptedJobs.inc(labelsOf(target), cut);
  }

  change(target: RunnerTarget, receipt: Receipt, outcome: ChangeOutcome): void {
    const result = outcome.ok ? 'ok' : 'failed';
    this.changes.inc({ ...labelsOf(target), action: receipt.action, outcome: result });
    if (receipt.action === 'Launch' && receipt.zone) this.launches.inc({ ...labelsOf(target), zone: receipt.zone, outcome: result });
  }
}
