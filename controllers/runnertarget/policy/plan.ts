// The Plan step of a check: every policy beside this file applied to one
// observation, giving the next status and the ordered provider changes.
// Receipts a dead check left Intended come first, so its change is finished
// (or found done) before anything new; then what removes cost or clutter
// (ghost runners, orphan and preempted VMs, drained hosts); then
// deregistrations; launches last, since each may wait for a boot.
import type { RunnerHost, RunnerTargetPlan, RunnerTargetSample, RunnerTargetSpec, RunnerTargetStatus } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { affordableLaunches, budgetCondition, LAUNCH_HORIZON_MS, spendToday, type Affordability, type EndedHost, type LaunchBudget, type Spend } from './budget.js';
import { busyRunners, demand, type Demand } from './demand.js';
import { observeHosts } from './hosts.js';
import { hostNames, namePrefix } from './naming.js';
import { vmPhase, type Observation } from '../observation.js';
import { lifetimeDrains } from './lifetime.js';
import { BOOT_GRACE_MS, findOrphans } from './orphans.js';
import { placementOrder, type Placement } from './placement.js';
import { poolPressure, PRESSURE_THRESHOLDS, TIER_RULE, tierStep, type PressureEvidence, type PressureThresholds, type TierRule, type TierStep } from './pressure.js';
import { cutJobMessage, cutJobs, rerunIntents } from './preemption.js';
import { launchingHosts, openReceipts, receiptFor, withReceipt, type Intent, type Receipt } from './receipts.js';
import { reuseHosts } from './reuse.js';
import { SAMPLE_WINDOW, sampleTiming, type SampleTiming, type SampleWindow } from './sample.js';
import { BUSY_FLAG_LAG_MS, drainStep, OFFLINE_GRACE_MS, offlineDrains, pickDrains } from './scaledown.js';

export interface PlanSettings {
  window: SampleWindow;
  bootGraceMs: number;
  busyLagMs: number;
  /** How long a runner that was online may be offline before its host is drained (--runner-offline-grace). */
  offlineGraceMs: number;
  launchHorizonMs: number;
  tierRule: TierRule;
  thresholds: PressureThresholds;
  /** spec.gce.maxRunDuration as the controller reads it, times this (--runner-lifetime-scale; below 1 only for tests). */
  lifetimeScale: number;
}

export const PLAN_SETTINGS: PlanSettings = {
  window: SAMPLE_WINDOW,
  bootGraceMs: BOOT_GRACE_MS,
  busyLagMs: BUSY_FLAG_LAG_MS,
  offlineGraceMs: OFFLINE_GRACE_MS,
  launchHorizonMs: LAUNCH_HORIZON_MS,
  tierRule: TIER_RULE,
  thresholds: PRESSURE_THRESHOLDS,
  lifetimeScale: 1,
};

/** One provider change, with the receipt it needs first (a resumed one already has its receipt). */
export type Change =
  | { kind: 'resume'; receipt: Receipt }
  | { kind: 'removeRunner'; intent: Intent; runnerID: number }
  | { kind: 'delete'; intent: Intent; reason: 'Orphan' | 'Preempted' | 'Drained' }
  | { kind: 'deregister'; intent: Intent; runnerID: number }
  /** `finishedRunnerID`: a reused host's last runner, listed offline after its job: removed before the new one is made. */
  | { kind: 'register'; intent: Intent; finishedRunnerID?: number }
  /**
   * The intent names the first placement; should it fail, its receipt is
   * settled Failed and the next placement (nextPlacement) gets a new one.
   */
  | { kind: 'launch'; intent: Intent; placements: Placement[] };

export interface PlanEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface PlanInput {
  /** metadata.name of the RunnerTarget. */
  name: string;
  spec: RunnerTargetSpec;
  status: RunnerTargetStatus;
  observation: Observation;
  settings?: Partial<PlanSettings>;
}

export interface CheckPlan {
  /** status.hosts before any change: observed, marked, with ended hosts removed and launches added as Launching. */
  hosts: RunnerHost[];
  changes: Change[];
  /** Hosts that left (preempted, or deleted and gone), counted into spend. */
  ended: EndedHost[];
  spend: Spend;
  budget: Affordability;
  /** What each launch of this check is judged against (budget.ts fitsBudget). */
  launchBudget: LaunchBudget;
  budgetCondition: ReturnType<typeof budgetCondition>;
  demand: Demand;
  timing: SampleTiming;
  tier: TierStep;
  /** Jobs this check found cut by a preemption: added to status.preemptedJobs. */
  preemptedJobs: number;
  /** Rerun receipts for the runs of those jobs, Intended, written with the plan's status. */
  reruns: Receipt[];
  /** status.lastSample: the new sample when it counts, else the previous one. */
  lastSample?: RunnerTargetSample | undefined;
  counts: NonNullable<RunnerTargetStatus['counts']>;
  plan: RunnerTargetPlan;
  events: PlanEvent[];
}

export function planCheck({ name, spec, status, observation, settings: over }: PlanInput): CheckPlan {
  const settings = { ...PLAN_SETTINGS, ...over };
  const now = observation.at;
  const at = rfc3339(new Date(now));
  const events: PlanEvent[] = [];
  const receipts = status.receipts ?? [];
  const open = openReceipts(receipts);
  // A Rerun names hosts that are gone already: it holds back nothing done about them.
  const resuming = new Set(open.filter((r) => r.action !== 'Rerun').flatMap((r) => r.hosts));
  const changes: Change[] = open.map((receipt) => ({ kind: 'resume', receipt }));

  const vms = new Map(observation.vms.map((v) => [v.name, v]));
  const launching = launchingHosts(receipts);
  // A Launching host with no VM and no open Launch receipt was never launched (the check
  // ended before its receipt, or every placement failed): it costs nothing and is no capacity.
  // Unless its zone could not be listed: then its VM is unseen, not absent (its runner may
  // already be online and its receipt settled), and dropping it would launch a second host.
  const unseenZones = new Set(observation.unreachableZones ?? []);
  const planned = (status.hosts ?? []).filter((h) => h.state !== 'Launching' || vms.has(h.name) || launching.has(h.name) || unseenZones.has(h.zone));
  let hosts = observeHosts(planned, observation, spec.gce.machineTypeTiers);
  const orphans = findOrphans({ hosts, vms: observation.vms, runners: observation.runners, launching, now, bootGraceMs: settings.bootGraceMs, unreachableZones: observation.unreachableZones });
  for (const zone of observation.unreachableZones ?? []) events.push({ type: 'Warning', reason: 'ZoneUnreachable', message: `Compute Engine could not list zone ${zone} this check; its VMs are treated as unseen, not gone` });
  for (const vm of observation.vms) {
    if (vmPhase(vm) === 'unknown') events.push({ type: 'Warning', reason: 'UnknownVMStatus', message: `VM ${vm.name} in ${vm.zone} shows status ${vm.reportedStatus ?? vm.status}, which this controller does not know: left alone, not counted as capacity` });
  }

  // Hosts that left: preempted, or deleted and now gone. Their hours of today stay in spend.
  const leaving = new Set([...orphans.preempted, ...hosts.filter((h) => h.state === 'Deleting' && !vms.has(h.name) && !resuming.has(h.name)).map((h) => h.name)]);
  const ended: EndedHost[] = hosts.filter((h) => leaving.has(h.name)).map((h) => ({ createdAt: h.createdAt, endedAt: at, pricePerHour: h.pricePerHour }));
  for (const h of orphans.preempted) events.push({ type: 'Warning', reason: 'Preempted', message: `host ${h} was preempted (its spot VM is gone or TERMINATED); it is replaced if jobs wait` });
  const cut = cutJobs(orphans.preempted, planned, observation.jobs);
  const reruns = rerunIntents(cut, spec, receipts).map((intent) => receiptFor(intent, now));
  for (const c of cut) events.push({ type: 'Warning', reason: 'PreemptedJob', message: cutJobMessage(c, spec.github.rerunPreemptedJobs && !!c.job) });
  hosts = hosts
    .filter((h) => !leaving.has(h.name))
    .map((h) => {
      if (orphans.mark.includes(h.name)) return { ...h, orphanSince: at, message: 'no runner registered after the boot grace; deleted at the next check unless it registers' };
      if (orphans.unmark.includes(h.name)) {
        const { orphanSince: _mark, ...rest } = h;
        return rest;
      }
      return h;
    });
  for (const n of orphans.mark) events.push({ type: 'Warning', reason: 'OrphanVM', message: `VM ${n} has no registered runner after its boot grace; it is deleted at the next check unless its runner registers` });

  for (const r of orphans.removeRunners) {
    if (resuming.has(r.name)) continue;
    changes.push({ kind: 'removeRunner', intent: { action: 'RemoveRunner', hosts: [r.name], message: r.message }, runnerID: r.id });
  }
  for (const d of orphans.deleteVMs) {
    const vm = vms.get(d.name)!;
    if (resuming.has(d.name)) continue;
    changes.push({ kind: 'delete', intent: { action: 'Delete', hosts: [d.name], zone: vm.zone, message: d.message }, reason: d.reason });
  }
  const deleting = new Set(orphans.deleteVMs.map((d) => d.name));

  // Deleting hosts whose VM still runs and whose receipt is not open: the delete is asked again (STOPPING is the delete under way).
  for (const h of hosts) {
    if (h.state !== 'Deleting' || deleting.has(h.name) || resuming.has(h.name) || vms.get(h.name)?.status !== 'RUNNING') continue;
    changes.push({ kind: 'delete', intent: { action: 'Delete', hosts: [h.name], zone: h.zone, message: 'the VM is still there' }, reason: 'Drained' });
    deleting.add(h.name);
  }

  const busy = busyRunners(observation.runners, observation.jobs);
  const timing = sampleTiming(status.lastSample?.at, now, settings.window);
  const busyEvidence: PressureEvidence[] = hosts.filter((h) => h.state === 'Busy').flatMap((h) => observation.probes.get(h.name)?.pressure ?? []);
  const pressure = poolPressure(busyEvidence, settings.thresholds);
  const tier = tierStep(status.tier, spec.gce.machineTypeTiers, pressure.level, timing.kind, now, settings.tierRule);
  const nextTier = Math.max(0, spec.gce.machineTypeTiers.findIndex((t) => t.machineType === tier.tier.machineType));
  if (tier.change) events.push({ type: 'Normal', reason: tier.change === 'up' ? 'TierUp' : 'TierDown', message: tier.reason });

  const runners = new Map(observation.runners.map((r) => [r.name, r]));
  // A VM being deleted still costs and still counts against maxHosts, but is no capacity.
  hosts = hosts.map((h) => (deleting.has(h.name) ? { ...h, state: 'Deleting' } : h));
  // Offline past the grace: drained like a broken host, by the drain steps below, in this same check.
  const offline = new Map(offlineDrains(hosts.filter((h) => !resuming.has(h.name)), now, settings.offlineGraceMs).map((d) => [d.host, d.reason]));
  for (const [h, reason] of offline) events.push({ type: 'Warning', reason: 'RunnerOffline', message: `${reason}; a new host replaces it if jobs need one` });
  hosts = hosts.map((h) => (offline.has(h.name) ? { ...h, state: 'Draining', message: offline.get(h.name)! } : h));
  let live = [...hosts];
  const spend = spendToday(status, live, ended, now);
  const order = placementOrder(spec.gce, nextTier);
  const launchBudget: LaunchBudget = { todayUSD: spend.todayUSD, livePricesPerHour: live.map((h) => h.pricePerHour), dailyBudgetUSD: spec.dailyBudgetUSD, now, horizonMs: settings.launchHorizonMs };
  const budget = affordableLaunches(spend, launchBudget.livePricesPerHour, order[0]!.pricePerHour, spec.dailyBudgetUSD, now, settings.launchHorizonMs);
  // Ghost runners (their VM is gone) take no jobs, whatever their busy flag says.
  const ghosts = new Set(orphans.removeRunners.map((r) => r.name));
  const pooled = { jobs: observation.jobs, runners: observation.runners.filter((r) => !ghosts.has(r.name)) };
  // Before demand: a reused host is capacity coming up, so the jobs it takes launch no VM.
  const reuse = reuseHosts({ spec, before: planned, hosts: live, observation, now, projectedUSD: budget.projectedUSD, held: resuming, lifetimeScale: settings.lifetimeScale });
  const reused = new Map(reuse.reuse.map((r) => [r.host, r.reason]));
  const asReused = (h: RunnerHost): RunnerHost => {
    if (!reused.has(h.name)) return h;
    const { runnerID: _old, idleSince: _idle, offlineSince: _offline, ...rest } = h;
    return { ...rest, state: 'Registering', message: reused.get(h.name)! };
  };
  hosts = hosts.map(asReused);
  live = live.map(asReused);
  for (const r of reuse.reuse) events.push({ type: 'Normal', reason: 'HostReused', message: r.reason });
  for (const r of reuse.drain) if (!r.saidBefore) events.push({ type: 'Normal', reason: 'HostNotReused', message: r.reason });
  const want = demand({ spec, hosts: live, observation: pooled, affordableLaunches: budget.launches });

  const drain: string[] = [];
  for (const h of live) {
    if (h.state !== 'Draining' || resuming.has(h.name)) continue;
    const next = drainStep(h, runners.get(h.name), busy.has(h.name), observation.probes.get(h.name), want.queued);
    if (next.action === 'delete') {
      changes.push({ kind: 'delete', intent: { action: 'Delete', hosts: [h.name], zone: h.zone, message: next.reason }, reason: 'Drained' });
      deleting.add(h.name);
    } else if (next.action === 'deregister') {
      changes.push({ kind: 'deregister', intent: { action: 'Deregister', hosts: [h.name], message: next.reason }, runnerID: runners.get(h.name)!.id });
    } else if (next.action === 'reregister') {
      changes.push({ kind: 'register', intent: { action: 'Register', hosts: [h.name], message: next.reason } });
      events.push({ type: 'Warning', reason: 'JobFoundOnDrain', message: next.reason });
    } else {
      events.push({ type: 'Warning', reason: next.action === 'leave' ? 'JobFoundOnDrain' : 'DrainUnconfirmed', message: next.reason });
    }
  }

  const picked = pickDrains(live.filter((h) => !resuming.has(h.name)), observation.runners, busy, want.surplus, tier.tier.machineType, now, settings.busyLagMs);
  for (const n of picked.drain) {
    changes.push({ kind: 'deregister', intent: { action: 'Deregister', hosts: [n], message: 'more hosts than the jobs need' }, runnerID: runners.get(n)!.id });
    drain.push(n);
  }
  // Idle hosts near the lifetime Compute Engine enforces go now, while idle; the next check's demand replaces them.
  for (const old of lifetimeDrains(live.filter((h) => !resuming.has(h.name) && !drain.includes(h.name)), observation.runners, busy, spec, now, { lagMs: settings.busyLagMs, scale: settings.lifetimeScale })) {
    changes.push({ kind: 'deregister', intent: { action: 'Deregister', hosts: [old.name], message: old.reason }, runnerID: runners.get(old.name)!.id });
    drain.push(old.name);
    events.push({ type: 'Normal', reason: 'HostRenewed', message: old.reason });
  }

  // The runner keeps the host's name, so the Register receipt names which host gets which runner before GitHub makes it.
  for (const r of reuse.reuse) changes.push({ kind: 'register', intent: { action: 'Register', hosts: [r.host], message: r.reason }, ...(r.finishedRunnerID !== undefined ? { finishedRunnerID: r.finishedRunnerID } : {}) });

  hosts = hosts.map((h) => (deleting.has(h.name) && h.state !== 'Deleting' ? { ...h, state: 'Deleting' } : h));
  const names = hostNames(namePrefix(name, spec.gce.namePrefix), `${name}/${now}`, want.launch, new Set([...hosts.map((h) => h.name), ...vms.keys()]));
  const first = order[0]!;
  for (const n of names) {
    changes.push({ kind: 'launch', intent: { action: 'Launch', hosts: [n], zone: first.zone, machineType: first.machineType, provisioningModel: first.provisioningModel }, placements: order });
    hosts.push({ name: n, zone: first.zone, machineType: first.machineType, provisioningModel: first.provisioningModel, pricePerHour: first.pricePerHour, state: 'Launching', createdAt: at });
  }

  const counted = timing.kind === 'count' || timing.kind === 'restart';
  const lastSample: RunnerTargetSample | undefined = counted
    ? { at, queued: want.queued, running: want.running, idleRunners: want.idle, busyRunners: want.busy, ...(pressure.summary.hosts > 0 ? { pressure: pressure.summary } : {}) }
    : status.lastSample;
  const budgetNote = want.heldByBudget > 0 ? `; ${budget.message}` : '';
  return {
    hosts,
    changes,
    ended,
    spend,
    budget,
    launchBudget,
    budgetCondition: budgetCondition(budget),
    demand: want,
    timing,
    tier,
    preemptedJobs: cut.length,
    reruns,
    lastSample,
    counts: { hosts: hosts.length, busy: hosts.filter((h) => h.state === 'Busy').length, idle: hosts.filter((h) => h.state === 'Idle').length, queued: want.queued },
    plan: {
      at,
      dryRun: spec.dryRun,
      desired: want.desired,
      launch: names.length,
      drain,
      delete: [...deleting],
      removeRunners: orphans.removeRunners.map((r) => r.name),
      machineType: tier.tier.machineType,
      reason: `${want.reason}${budgetNote}; ${tier.reason}`,
    },
    events,
  };
}

/**
 * The status a check writes with its first receipt (or alone, when nothing
 * changes): everything the plan observed and decided. Receipts and
 * conditions are the reconciler's, written as it goes.
 */
export function plannedStatus(status: RunnerTargetStatus, plan: CheckPlan): RunnerTargetStatus {
  return {
    ...status,
    hosts: plan.hosts,
    counts: plan.counts,
    // Counted and intended in the write that removes the preempted hosts, so a check that dies after it does neither again.
    ...(plan.preemptedJobs > 0 ? { preemptedJobs: (status.preemptedJobs ?? 0) + plan.preemptedJobs } : {}),
    ...(plan.reruns.length > 0 ? { receipts: plan.reruns.reduce<Receipt[]>((list, r) => withReceipt(list, r), [...(status.receipts ?? [])]) } : {}),
    ...(plan.lastSample ? { lastSample: plan.lastSample } : {}),
    tier: plan.tier.tier,
    plan: plan.plan,
    spendTodayUSD: plan.spend.todayUSD,
    spendEndedUSD: plan.spend.endedUSD,
    spendDay: plan.spend.day,
  };
}
