// One check of one RunnerTarget: the check machine (../machine.ts) stepped
// with what happened, and its effects run here. Status is the intent: the
// receipt of each provider change is written (with the resourceVersion the
// check read) before the change, through the DurabilityGuard; once a write
// fails, conflicts or stays unknown, no provider call is made for the rest
// of the check. A dry run takes no lease, writes no receipt and changes
// nothing: its plan goes to status.plan and an event.
import { RUNNERTARGET_RESOURCE, type Receipt, type RunnerTarget, type RunnerTargetStatus } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { errorText } from '../../../src/kube/errors.js';
import { isProviderError } from '../../../src/providers/errors.js';
import { sleep, realClock } from '../../../src/kube/clock.js';
import { fitsBudget } from '../policy/budget.js';
import type { ChangeOutcome } from './changecontext.js';
import { runChange } from './changes.js';
import { checkStatusConditions } from '../conditions.js';
import { DurabilityGuard, NotDurableError, writeReceiptStatus } from './durability.js';
import { restore, step, type CheckEffect, type CheckEvent, type CheckStep } from '../machine.js';
import type { Observation } from '../observation.js';
import { observePool, TargetSpecError, type TargetClients } from './providers.js';
import { probeHosts } from './probe.js';
import { planCheck, plannedStatus, type CheckPlan, type PlanEvent } from '../policy/plan.js';
import { receiptFor, settled, withReceipt } from '../policy/receipts.js';
import { sampleTiming } from '../policy/sample.js';
import { abandonLaunches, poolGone, teardownBlockedMessage, teardownPlan, teardownSpec } from '../policy/teardown.js';
import { afterDeregister } from '../policy/scaledown.js';
import { checkLeaseName, type HeldLease } from './checklease.js';
import { isRateLimited, mayStartCheck, retryAtAfter } from '../policy/ratelimit.js';
import type { CheckHistory, CheckResult } from '../checkresult.js';
import { groupRef } from './runnergroupids.js';
import type { CheckDeps } from './checkdeps.js';

export class CheckRun {
  private readonly guard = new DurabilityGuard();
  private readonly key: string;
  private lease?: HeldLease;
  private clients?: TargetClients;
  private observation?: Observation;
  private plan?: CheckPlan;
  private receipt?: Receipt;
  private outcome?: ChangeOutcome;
  private status: RunnerTargetStatus;
  private waited = false;
  private released = false;
  private lastNow = 0;
  private wroteFirst = false;
  /** Prices of the hosts this check launched, judged with the plan's budget by every later launch. */
  private launched: number[] = [];
  private retryAfterMs?: number;
  private limited?: { until: number; message: string };
  private githubAtStart?: number;
  private readonly configured: string[] = [];
  private last!: CheckStep;

  constructor(
    private readonly deps: CheckDeps,
    private target: RunnerTarget,
    private readonly history: CheckHistory = {},
    /** Aborted when the controller stops and the shutdown grace has passed: the check ends where it is, as on a lost lease. */
    private readonly shutdown?: AbortSignal,
  ) {
    this.key = `${target.metadata!.namespace}/${target.metadata!.name}`;
    this.status = target.status ?? {};
  }

  /** Strictly increasing within the check, so that two receipts of one host never share an ID. */
  private now(): number {
    this.lastNow = Math.max((this.deps.now ?? Date.now)(), this.lastNow + 1);
    return this.lastNow;
  }

  async run(): Promise<CheckResult> {
    let snapshot = restore();
    let event: CheckEvent | undefined = { type: 'START', dryRun: this.target.spec.dryRun, message: `check of ${this.key} started` };
    try {
      while (event) {
        if (this.lease?.signal.aborted && !this.released && snapshot.can({ type: 'LEASE_LOST', message: '' })) {
          event = { type: 'LEASE_LOST', message: `the check lease was lost (${errorText(this.lease.signal.reason)}); the check stopped where it was` };
        } else if (this.shutdown?.aborted && snapshot.can({ type: 'LEASE_LOST', message: '' })) {
          event = { type: 'LEASE_LOST', message: 'the controller stopped past its shutdown grace; the check stopped where it was and the next check continues it' };
        }
        const s = step(snapshot, event);
        if (!s.accepted) {
          this.deps.log?.error({ target: this.key, state: s.state, event: event.type }, 'check machine refused an event');
          break;
        }
        this.last = s;
        snapshot = restore(s.state, s.context);
        let next: CheckEvent | undefined;
        for (const effect of s.effects) next = (await this.effect(effect, event)) ?? next;
        event = s.final ? undefined : next;
      }
    } finally {
      await this.releaseLease();
    }
    this.deps.metrics?.check(this.target, this.last.state);
    const gone = (this.last.state === 'Done' || this.last.state === 'DryRun') && this.observation !== undefined && poolGone(this.observation, this.status.receipts);
    const used = this.githubAtStart === undefined ? undefined : (this.clients?.github.usage?.requests ?? this.githubAtStart) - this.githubAtStart;
    return {
      state: this.last.state,
      poolGone: gone,
      target: this.target,
      ...(this.retryAfterMs !== undefined ? { retryAfterMs: this.retryAfterMs } : {}),
      ...(this.limited ? { limitedUntil: this.limited.until } : {}),
      ...(used !== undefined ? { githubRequests: used } : {}),
      ...(this.configured.length ? { configured: this.configured } : {}),
    };
  }

  /** The check stops for a GitHub rate limit: nothing more is asked of GitHub before `until`. */
  private rateLimited(until: number, message: string): CheckEvent {
    this.limited = { until, message };
    this.retryAfterMs = Math.max(1000, until - (this.deps.now ?? Date.now)());
    return { type: 'FAILED', reason: 'RateLimited', message: `${message}; the check stopped and is tried again at ${new Date(until).toISOString()}`.slice(0, 1000) };
  }

  private async effect(effect: CheckEffect, event: CheckEvent): Promise<CheckEvent | undefined> {
    try {
      switch (effect) {
        case 'acquireLease':
          return await this.acquireLease();
        case 'observe':
          return await this.observe();
        case 'waitForSample':
          await sleep(realClock, event.type === 'SAMPLE_EARLY' ? event.waitMs : 0, this.signal);
          return { type: 'SAMPLE_DUE', message: 'the sample window opened; reading the runners again' };
        case 'plan':
          return await this.makePlan();
        case 'recordIntent':
          return await this.recordIntent();
        case 'callProvider':
          return await this.callProvider();
        case 'settleReceipt':
          return await this.settleReceipt();
        case 'writePlan':
        case 'writeStatus':
          await this.finalWrite();
          return undefined;
        case 'releaseLease':
          await this.releaseLease();
          return undefined;
        case 'announce':
          await this.announce();
          return undefined;
      }
    } catch (err) {
      this.deps.log?.warn({ target: this.key, effect, err: errorText(err) }, 'check step failed');
      if (isRateLimited(err)) return this.rateLimited(retryAtAfter(err, (this.deps.now ?? Date.now)()), `${effect}: ${errorText(err)}`);
      const reason = err instanceof TargetSpecError ? err.reason : 'CheckError';
      const problem = `${effect}: ${errorText(err)}`;
      // A deleted target refused its credentials or endpoint cannot tear its pool down: its status says what holds the deletion.
      const blocksTeardown = !!this.target.metadata?.deletionTimestamp && (err instanceof TargetSpecError || isProviderError(err, 'Unauthorized'));
      return { type: 'FAILED', reason, message: (blocksTeardown ? teardownBlockedMessage(this.status, problem) : problem).slice(0, 1000) };
    }
  }

  private async acquireLease(): Promise<CheckEvent> {
    const uid = this.target.metadata!.uid!;
    const got = await this.deps.leases.acquire(checkLeaseName(uid), { 'leasehold.dev/runnertarget': this.key });
    if (got.held) {
      this.lease = got.lease;
      return { type: 'LEASE_ACQUIRED', message: `${this.deps.identity} holds the check lease` };
    }
    this.retryAfterMs = got.retryAfterMs;
    return { type: 'LEASE_HELD', holder: got.holder, message: `the check lease of ${this.key} is held by ${got.holder}; this check changed nothing` };
  }

  /** What ends the check's provider calls: a lost lease, or the controller's shutdown past its grace. */
  private get signal(): AbortSignal | undefined {
    const signals = [this.lease?.signal, this.shutdown].filter((x): x is AbortSignal => x !== undefined);
    return signals.length > 1 ? AbortSignal.any(signals) : signals[0];
  }

  /** Once per check; a lost lease is not ours to release. */
  private async releaseLease(): Promise<void> {
    const lease = this.lease;
    if (!lease || this.released) return;
    this.released = true;
    if (!lease.signal.aborted) await lease.release();
  }

  private async observe(): Promise<CheckEvent> {
    // The latest object, not the cache: the receipts are written over exactly what this check read.
    const fresh = await this.deps.read(this.target.metadata!.namespace!, this.target.metadata!.name!);
    if (!fresh) return { type: 'FAILED', reason: 'TargetGone', message: `RunnerTarget ${this.key} is gone` };
    this.target = fresh;
    this.status = fresh.status ?? {};
    this.clients ??= await this.deps.providers.clients(fresh);
    const github = this.clients.github;
    if (!this.waited) {
      this.githubAtStart = github.usage?.requests;
      // Before any request: a check that would run into a limit is not started.
      const gate = mayStartCheck({
        now: (this.deps.now ?? Date.now)(),
        blockedUntil: github.blockedUntil?.getTime(),
        rateLimit: github.rateLimit ? { remaining: github.rateLimit.remaining, resetAt: github.rateLimit.resetAt.getTime() } : undefined,
        lastCheckRequests: this.history.lastGitHubRequests,
      });
      if (!gate.start) return this.rateLimited(gate.until, gate.message);
    }
    const seen = await observePool(fresh, this.clients, this.deps.installationID, this.signal, this.deps.runnerGroups);
    this.observation = { ...seen, probes: await probeHosts(this.status.hosts ?? [], seen, this.clients, await this.deps.hostAccess(fresh), this.signal) };
    const timing = sampleTiming(this.status.lastSample?.at, this.observation.at, this.deps.settings?.window);
    if (timing.kind === 'wait' && !this.waited && !this.history.requested) {
      this.waited = true;
      return { type: 'SAMPLE_EARLY', waitMs: timing.waitMs, message: `the sample window opens in ${Math.ceil(timing.waitMs / 1000)} s; waiting for it` };
    }
    return { type: 'OBSERVED', message: `${this.observation.vms.length} VMs, ${this.observation.runners.length} runners, ${this.observation.jobs.length} jobs` };
  }

  private async makePlan(): Promise<CheckEvent> {
    const { metadata, spec } = this.target;
    const deleting = !!metadata?.deletionTimestamp;
    let abandoned: PlanEvent[] = [];
    if (deleting) {
      // Settled before planning, so that the plan drains or deletes these hosts; written with the plan's status.
      const a = abandonLaunches(this.status.receipts, this.observation!, new Date(metadata!.deletionTimestamp as unknown as string | Date).getTime());
      this.status = { ...this.status, receipts: a.receipts };
      abandoned = a.events;
    }
    const planned = planCheck({ name: metadata!.name!, spec: deleting ? teardownSpec(spec) : spec, status: this.status, observation: this.observation!, settings: this.deps.settings });
    this.plan = deleting ? teardownPlan(planned, this.observation!) : planned;
    // What the check found (a preempted host, an orphan VM, a tier change), said before anything is done about it.
    for (const e of [...abandoned, ...this.plan.events]) await this.event(e);
    // A dry run leaves the preempted host in status, so the next one would count it again.
    if (!spec.dryRun) this.deps.metrics?.found(this.target, this.plan.events);
    return { type: 'PLANNED', changes: this.plan.changes.length, message: this.plan.plan.reason };
  }

  private conditions(): RunnerTargetStatus['conditions'] {
    return checkStatusConditions(this.status.conditions, {
      step: this.last,
      facts: { holder: this.deps.identity, durable: this.guard.condition(), ...(this.plan ? { budget: this.plan.budgetCondition } : {}) },
      limited: this.limited,
      observation: this.observation,
      generation: this.target.metadata?.generation,
      now: () => new Date(this.now()),
    });
  }

  /** The first write of a check carries the plan's status with its first receipt. */
  private base(): RunnerTargetStatus {
    if (this.wroteFirst || !this.plan) return this.status;
    this.wroteFirst = true;
    return { ...plannedStatus(this.status, this.plan), observedGeneration: this.target.metadata?.generation };
  }

  private async recordIntent(): Promise<CheckEvent> {
    const change = this.plan!.changes[this.last.context.done]!;
    this.outcome = undefined;
    this.receipt = change.kind === 'resume' ? change.receipt : receiptFor(change.intent, this.now(), this.target.metadata!.uid!);
    const base = this.base();
    const status = { ...base, receipts: withReceipt(base.receipts, this.receipt), conditions: this.conditions() };
    const ok = await this.write(status, this.receipt);
    return ok ? { type: 'INTENT_WRITTEN', message: `receipt ${this.receipt.id} recorded` } : this.notDurable();
  }

  private notDurable(): CheckEvent {
    const c = this.guard.condition();
    return { type: 'WRITE_NOT_DURABLE', reason: c.reason as 'StatusConflict', message: c.message };
  }

  private async callProvider(): Promise<CheckEvent> {
    const change = this.plan!.changes[this.last.context.done]!;
    const receipt = this.receipt!;
    const plan = this.plan!;
    const affordable = (price: number) => fitsBudget(plan.launchBudget, this.launched, price);
    let price = change.kind === 'launch' ? change.placements[0]?.pricePerHour : undefined;
    try {
      this.outcome = await runChange(change, receipt, {
        target: this.target,
        clients: this.clients!,
        observation: this.observation!,
        installationID: this.deps.installationID,
        host: await this.deps.hostAccess(this.target),
        guard: this.guard,
        signal: this.signal,
        now: () => this.now(),
        affordable,
        runnerGroupGone: (id) => this.deps.runnerGroups?.forget(groupRef(this.target.spec.github), id),
        record: async (r, host) => {
          this.receipt = r;
          if (host?.pricePerHour !== undefined) price = host.pricePerHour;
          const hosts = host ? (this.status.hosts ?? []).map((h) => (r.hosts.includes(h.name) ? { ...h, ...host } : h)) : this.status.hosts;
          return this.write({ ...this.status, hosts, receipts: withReceipt(this.status.receipts, r) }, r);
        },
        settle: async (id, phase, message) => this.write({ ...this.status, receipts: settled(this.status.receipts, id, phase, message) ?? this.status.receipts }, { id, phase }),
      });
    } catch (err) {
      const refused = err instanceof NotDurableError;
      const message = refused ? err.message : `${change.kind} ${receipt.hosts.join(',')}: ${errorText(err)}`;
      this.outcome = { ok: false, receiptID: this.receipt!.id, message, event: { type: 'Warning', reason: refused ? 'NotDurable' : 'ChangeFailed', message } };
    }
    if (this.outcome.ok && price !== undefined) this.launched.push(price);
    if (this.outcome.configOnHost) this.configured.push(this.outcome.receiptID);
    this.deps.metrics?.change(this.target, receipt, this.outcome);
    return { type: 'PROVIDER_ANSWERED', ok: this.outcome.ok, message: this.outcome.message };
  }

  private async settleReceipt(): Promise<CheckEvent> {
    const settled = await this.settleOutcome();
    if (settled.type !== 'SETTLED') return settled;
    // A launch an organisation policy refused ends the check: every later launch would be refused the same way.
    const ends = this.outcome!.endsCheck;
    if (ends) return { type: 'FAILED', reason: ends.reason, message: ends.message };
    // A change that met a GitHub limit ends the check: the changes after it would only be refused too.
    const blocked = this.clients?.github.blockedUntil?.getTime();
    if (blocked !== undefined && blocked > (this.deps.now ?? Date.now)()) return this.rateLimited(blocked, `GitHub answered a rate limit during the check's changes (${this.outcome!.message})`);
    return settled;
  }

  private async settleOutcome(): Promise<CheckEvent> {
    const outcome = this.outcome!;
    await this.event(outcome.event);
    if (!this.guard.durable) return this.notDurable();
    if (!outcome.phase) return { type: 'SETTLED', message: outcome.message };
    let hosts = this.status.hosts;
    const name = this.receipt?.hosts[0];
    if (outcome.deregistered && this.receipt?.action === 'Deregister') {
      hosts = hosts?.map((h) => (h.name === name ? { ...h, ...afterDeregister(h, outcome.deregistered!) } : h));
    }
    if (outcome.runnerLeft) hosts = hosts?.map((h) => (h.name === name ? { ...h, state: 'Draining', message: outcome.message.slice(0, 1000) } : h));
    const receipts = settled(this.status.receipts, outcome.receiptID, outcome.phase, outcome.message.slice(0, 4000)) ?? this.status.receipts;
    const ok = await this.write({ ...this.status, hosts, receipts }, { id: outcome.receiptID, phase: outcome.phase });
    return ok ? { type: 'SETTLED', message: outcome.message } : this.notDurable();
  }

  /** The status a finished check (or a dry run) leaves: the plan, the conditions, when it ran. */
  private async finalWrite(): Promise<void> {
    const at = rfc3339(new Date(this.now()));
    let status: RunnerTargetStatus;
    if (this.last.context.dryRun) {
      const p = this.plan!;
      status = { ...this.status, plan: p.plan, counts: p.counts, observedGeneration: this.target.metadata?.generation, lastCheckAt: at };
    } else {
      status = { ...this.base(), lastCheckAt: at };
    }
    status.conditions = this.conditions();
    await this.writeResult(this.target, status, 'writing the check result failed');
  }

  private async announce(): Promise<void> {
    const { state, context } = this.last;
    if (state === 'DryRun') {
      await this.event({ type: 'Normal', reason: 'DryRunPlan', message: `dry run, nothing changed; plan: ${JSON.stringify(this.plan!.plan)}` });
      return;
    }
    // Held elsewhere is the lease doing its job; a lease lost mid-check is worth a warning.
    if (state === 'Held') return this.event({ type: context.reason === 'LeaseLost' ? 'Warning' : 'Normal', reason: context.reason, message: context.message });
    await this.event({ type: 'Warning', reason: context.reason, message: context.message });
    // An ended check says why on a fresh read: never over the object a conflicting writer moved.
    const fresh = await this.deps.read(this.target.metadata!.namespace!, this.target.metadata!.name!).catch(() => undefined);
    if (!fresh) return;
    this.target = fresh;
    this.status = fresh.status ?? {};
    await this.writeResult(fresh, { ...this.status, conditions: this.conditions() }, "writing the failed check's conditions failed");
  }

  /**
   * An unguarded status write of what a check found: nothing depends on it
   * (the next check computes it again), so a failure is logged, not raised.
   * Receipts never go this way: they go through write(), whose outcome the
   * guard keeps.
   */
  private async writeResult(over: RunnerTarget, status: RunnerTargetStatus, failed: string): Promise<void> {
    try {
      this.target = await this.deps.status.write(RUNNERTARGET_RESOURCE, over, status);
    } catch (err) {
      this.deps.log?.info({ target: this.key, err: errorText(err) }, failed);
    }
  }

  private async event(e: PlanEvent): Promise<void> {
    await this.deps.events.record(this.target, e.type, e.reason, e.message);
  }

  /** A guarded status write: its outcome goes to the guard, read back when the answer was lost. */
  private async write(status: RunnerTargetStatus, receipt: Pick<Receipt, 'id' | 'phase'>): Promise<boolean> {
    this.status = status;
    const { outcome, target } = await writeReceiptStatus(this.deps, this.target, status, receipt);
    this.target = target;
    this.guard.record(outcome);
    return outcome.kind === 'written';
  }
}
