// The provider call of one planned Change, made only after its receipt is
// in status and only through the check's DurabilityGuard. A launch that a
// zone or tier refuses settles its receipt Failed and records a new one
// for the next placement before that insert: every insert has its own
// receipt and requestId. An answer that never came leaves the receipt
// Intended, so that the next check finds out what happened (../policy/resume.ts).
import type { Receipt } from '../../../src/api/index.js';
import { errorText } from '../../../src/kube/errors.js';
import { isProviderError, ProviderError } from '../../../src/providers/errors.js';
import { AlreadyExists, CAPACITY_CODES, CapacityExhausted, GceApiError, PolicyRefused, QuotaExceeded } from '../../../src/providers/gce/errors.js';
import { RunnerBusyError } from '../../../src/providers/github/errors.js';
import { RateLimitedError } from '../../../src/providers/ratelimit.js';
import type { ChangeContext, ChangeOutcome } from './changecontext.js';
import { deliverRunnerConfig } from './deliver.js';
import { maxRunDurationMs } from '../policy/lifetime.js';
import { DEFAULT_IMAGE, INSTALLATION_LABEL, TARGET_UID_LABEL, vmLabels } from './providers.js';
import { policyRefusalCondition } from '../policy/orgpolicy.js';
import { nextPlacement, type LaunchFailure, type Placement } from '../policy/placement.js';
import type { Change } from '../policy/plan.js';
import { rerunStep } from '../policy/preemption.js';
import { receiptFor } from '../policy/receipts.js';
import { resumeStep } from '../policy/resume.js';

/** How often one launch sends an insert again after Compute Engine throttled it, before leaving it to the next check. */
export const LAUNCH_THROTTLE_RETRIES = 3;
const MAX_THROTTLE_WAIT_MS = 30_000;

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });
}

const done = (receipt: Receipt, reason: string, message: string): ChangeOutcome => ({ ok: true, phase: 'Done', receiptID: receipt.id, message, event: { type: 'Normal', reason, message } });
/** A failed change; `open`: its receipt stays as it is (the answer was lost, or it was settled already). */
const failed = (receipt: Receipt, reason: string, message: string, open = false): ChangeOutcome => ({ ok: false, ...(open ? {} : { phase: 'Failed' as const }), receiptID: receipt.id, message, event: { type: 'Warning', reason, message } });

/** Runs `change` whose receipt `receipt` is written. Throws NotDurableError when the guard refuses the call. */
export async function runChange(change: Change, receipt: Receipt, ctx: ChangeContext): Promise<ChangeOutcome> {
  const name = receipt.hosts[0] ?? '';
  switch (change.kind) {
    case 'launch': {
      // The plan counted its launches at this price; a launch earlier in the check that fell over to a dearer
      // placement may have used up what was left, so the first try is judged like every fallback.
      const first = change.placements[0];
      if (first && !ctx.affordable(first.pricePerHour)) {
        return failed(receipt, 'OverBudget', `launching ${name}: ${first.pricePerHour} USD/h would pass dailyBudgetUSD with the hosts this check launched; raise spec.dailyBudgetUSD or wait for the next UTC day`);
      }
      return launch(name, receipt, change.placements, ctx);
    }
    case 'delete':
      return deleteVM(name, receipt, ctx);
    case 'removeRunner':
    case 'deregister':
      return removeRunner(name, change.runnerID, receipt, ctx);
    case 'register':
      return register(name, receipt, ctx, change.finishedRunnerID);
    case 'resume':
      return resume(receipt, ctx);
  }
}

async function resume(receipt: Receipt, ctx: ChangeContext): Promise<ChangeOutcome> {
  if (receipt.action === 'Rerun') return rerun(receipt, ctx);
  const name = receipt.hosts[0] ?? '';
  const next = resumeStep(receipt, ctx.observation);
  switch (next.step) {
    case 'done':
      return done(receipt, 'ReceiptResumed', next.message);
    case 'failed':
      return failed(receipt, 'ReceiptFailed', next.message);
    case 'waitForBoot':
      return { ok: true, receiptID: receipt.id, message: next.message, event: { type: 'Normal', reason: 'LaunchWaiting', message: next.message } };
    case 'wait':
      return { ok: true, receiptID: receipt.id, message: next.message, event: { type: 'Warning', reason: 'ReceiptWaiting', message: next.message } };
    case 'deliverConfig': {
      const zone = receipt.zone ?? ctx.observation.vms.find((v) => v.name === name)?.zone ?? '';
      return deliverRunnerConfig(name, zone, receipt.id, ctx, ctx.host, { stale: next.stale, replace: receipt.action === 'Register', resumed: true });
    }
    case 'repeat':
      break;
  }
  switch (receipt.action) {
    case 'Launch': {
      const placement: Placement = { zone: receipt.zone ?? '', machineType: receipt.machineType ?? '', tier: 0, provisioningModel: receipt.provisioningModel ?? 'SPOT', pricePerHour: 0 };
      return launch(name, receipt, [placement], ctx);
    }
    case 'Delete':
      return deleteVM(name, receipt, ctx);
    case 'Deregister':
    case 'RemoveRunner': {
      const runner = ctx.observation.runners.find((r) => r.name === name);
      return runner ? removeRunner(name, runner.id, receipt, ctx) : done(receipt, 'RunnerRemoved', `runner ${name} is gone`);
    }
    case 'Register':
      return register(name, receipt, ctx, undefined, true);
  }
}

/**
 * A Rerun receipt: the run is read first, so that a re-run whose answer was
 * lost (a later attempt exists) is never asked for again.
 */
async function rerun(receipt: Receipt, ctx: ChangeContext): Promise<ChangeOutcome> {
  const repo = receipt.repository ?? '';
  const runId = receipt.runId ?? 0;
  let run;
  try {
    run = await ctx.clients.github.getRun(repo, runId, ctx.signal);
  } catch (err) {
    if (!isProviderError(err, 'NotFound')) return failed(receipt, 'RerunUnknown', `reading workflow run ${runId} in ${repo} failed (${errorText(err)}); the next check looks again`, true);
  }
  const next = rerunStep(receipt, run, ctx.now());
  switch (next.step) {
    case 'wait':
      return { ok: true, receiptID: receipt.id, message: next.message, event: { type: 'Normal', reason: 'RerunWaiting', message: next.message } };
    case 'done':
      return done(receipt, 'RerunSettled', next.message);
    case 'giveUp':
      return failed(receipt, 'RerunGaveUp', next.message);
    case 'rerun':
      break;
  }
  ctx.guard.permit(`github.rerunFailedJobs ${repo}#${runId}`);
  try {
    await ctx.clients.github.rerunFailedJobs(repo, runId, ctx.signal);
    return done(receipt, 'JobsRerun', `the failed jobs of workflow run ${runId} in ${repo} were re-run (cut by the preemption of ${receipt.hosts.join(', ')})`);
  } catch (err) {
    // No answer, or a limit: the next check reads the run's attempt and asks again only if no re-run happened.
    if (isProviderError(err) && (err.answerLost || err.kind === 'RateLimited')) return failed(receipt, 'RerunUnknown', `re-running workflow run ${runId} in ${repo} got no answer (${errorText(err)}); the next check looks again`, true);
    return failed(receipt, 'RerunFailed', `GitHub refused to re-run the failed jobs of workflow run ${runId} in ${repo}: ${errorText(err)}; re-run it by hand if it is still wanted`);
  }
}

/** A host whose runner left (a drained host on which a job still runs, or a reused one) gets a new runner; the receipt settles once it is online. */
function register(name: string, receipt: Receipt, ctx: ChangeContext, finishedRunnerID?: number, resumed = false): Promise<ChangeOutcome> {
  const zone = ctx.observation.vms.find((v) => v.name === name)?.zone;
  if (!zone) return Promise.resolve(failed(receipt, 'RegisterFailed', `VM ${name} is gone; no runner to register`));
  return deliverRunnerConfig(name, zone, receipt.id, ctx, ctx.host, { replace: true, resumed, ...(finishedRunnerID !== undefined ? { finished: { id: finishedRunnerID } } : {}) });
}

async function launch(name: string, first: Receipt, placements: readonly Placement[], ctx: ChangeContext): Promise<ChangeOutcome> {
  const { target, clients, signal } = ctx;
  let receipt = first;
  let placement = placements[0]!;
  const failures: LaunchFailure[] = [];
  let throttled = 0;
  for (;;) {
    ctx.guard.permit(`compute.instances.insert ${placement.zone}/${name}`);
    try {
      const op = await clients.gce.insert(
        {
          zone: placement.zone,
          name,
          machineType: placement.machineType,
          spot: placement.provisioningModel === 'SPOT',
          image: target.spec.gce.image ?? DEFAULT_IMAGE,
          serviceAccountEmail: target.spec.gce.serviceAccount,
          sshUser: ctx.host.user,
          sshPublicKey: ctx.host.publicKey,
          labels: vmLabels(target, ctx.installationID),
          requestId: receipt.requestId ?? '',
          maxRunDurationSeconds: maxRunDurationMs(target.spec) / 1000,
          externalIP: target.spec.gce.externalIP !== false,
        },
        signal,
      );
      await clients.gce.waitOperation(op, signal);
      const message = `VM ${name} inserted in ${placement.zone} (${placement.machineType}, ${placement.provisioningModel}); its receipt stays Intended until its runner registers`;
      return { ok: true, receiptID: receipt.id, message, event: { type: 'Normal', reason: 'Launched', message } };
    } catch (err) {
      // The name is taken: most often this very insert, sent again after Compute Engine forgot its requestId
      // (a long outage). The VM is then ours and launched; only one that is not ours fails the launch.
      if (err instanceof AlreadyExists) return existing(name, placement, receipt, ctx);
      // No answer: the insert may have been made; the next check looks and repeats it with the same requestId.
      if (isProviderError(err) && err.answerLost) return failed(receipt, 'LaunchUnknown', `inserting VM ${name} got no answer (${errorText(err)}); the next check continues it`, true);
      if (!(err instanceof ProviderError)) throw err;
      // A policy refuses the same insert in every zone and tier: no fail-over, the check ends naming the fix.
      if (err instanceof PolicyRefused) return policyRefused(name, placement, receipt, err, ctx);
      // Throttled (a 429, or a DONE Operation whose errors include a rate code): nothing was made, and the same
      // placement is fine. Its requestId would only answer the same failed Operation again, so each try gets a new receipt.
      if (err instanceof RateLimitedError) {
        throttled++;
        const note = `${placement.zone} ${placement.machineType}: throttled (${throttled} of ${LAUNCH_THROTTLE_RETRIES + 1}): ${errorText(err)}`.slice(0, 4000);
        if (!(await ctx.settle(receipt.id, 'Failed', note))) return failed(receipt, 'LaunchFailed', `launching ${name} was throttled and its receipt could not be settled`, true);
        if (throttled > LAUNCH_THROTTLE_RETRIES) return failed(receipt, 'LaunchThrottled', `Compute Engine throttled the insert of ${name} ${throttled} times (${errorText(err)}); the next check launches again if jobs still wait`, true);
        const backoff = (ctx.throttleBackoffMs ?? 1000) * 2 ** (throttled - 1);
        const until = err.retryAt ? err.retryAt.getTime() - ctx.now() : 0;
        await pause(Math.min(MAX_THROTTLE_WAIT_MS, Math.max(backoff, until)), signal);
        if (signal?.aborted) return failed(receipt, 'LaunchThrottled', `launching ${name} was throttled and the check ended while waiting`, true);
        receipt = receiptFor({ action: 'Launch', hosts: [name], zone: placement.zone, machineType: placement.machineType, provisioningModel: placement.provisioningModel }, ctx.now(), target.metadata!.uid!);
        const host = { zone: placement.zone, machineType: placement.machineType, provisioningModel: placement.provisioningModel, pricePerHour: placement.pricePerHour };
        if (!(await ctx.record(receipt, host))) return failed(receipt, 'LaunchFailed', `the receipt of ${name}'s next try could not be written`, true);
        continue;
      }
      const code = launchCode(err);
      failures.push({ placement, code, message: errorText(err) });
      const choice = nextPlacement(placements, failures, ctx.affordable);
      if (!(await ctx.settle(receipt.id, 'Failed', `${placement.zone} ${placement.machineType}: ${code}: ${errorText(err)}`.slice(0, 4000)))) {
        return failed(receipt, 'LaunchFailed', `launching ${name} failed (${code}) and its receipt could not be settled`, true);
      }
      if (choice.kind === 'none') return failed(receipt, choice.reason, `launching ${name}: ${choice.message}`, true);
      placement = choice.placement;
      receipt = receiptFor({ action: 'Launch', hosts: [name], zone: placement.zone, machineType: placement.machineType, provisioningModel: placement.provisioningModel }, ctx.now(), target.metadata!.uid!);
      const host = { zone: placement.zone, machineType: placement.machineType, provisioningModel: placement.provisioningModel, pricePerHour: placement.pricePerHour };
      if (!(await ctx.record(receipt, host))) return failed(receipt, 'LaunchFailed', `the receipt of ${name}'s next placement could not be written`, true);
    }
  }
}

/**
 * A launch an organisation policy (or the host service account's grants)
 * refused: its receipt is settled Failed, and when the refusal came in the
 * DONE Operation the VM is looked for, and deleted behind a receipt of its
 * own if Compute Engine left it, so that nothing half-made stays. The check
 * then ends with the condition naming the fix.
 */
async function policyRefused(name: string, placement: Placement, receipt: Receipt, err: PolicyRefused, ctx: ChangeContext): Promise<ChangeOutcome> {
  const condition = policyRefusalCondition(err.refusal, ctx.target.spec, name, err.message);
  if (!(await ctx.settle(receipt.id, 'Failed', `${placement.zone} ${placement.machineType}: ${condition.reason}: ${condition.message}`.slice(0, 4000)))) {
    return failed(receipt, 'LaunchFailed', `launching ${name} was refused (${condition.reason}) and its receipt could not be settled`, true);
  }
  let left = '';
  if (err.inOperation) left = await removeRefused(name, placement.zone, ctx);
  const message = `${condition.message}${left}`.slice(0, 1000);
  return { ...failed(receipt, 'LaunchRefused', message, true), endsCheck: { reason: condition.reason, message } };
}

/** Looks for the VM of a refused insert; one Compute Engine left is deleted behind a Delete receipt. Returns what to add to the message. */
async function removeRefused(name: string, zone: string, ctx: ChangeContext): Promise<string> {
  let vm;
  try {
    vm = await ctx.clients.gce.get(zone, name, ctx.signal);
  } catch (err) {
    if (isProviderError(err, 'NotFound')) return '';
    return `; whether VM ${name} was left could not be read (${errorText(err).slice(0, 200)}), the next check's listing looks again`;
  }
  const mine = vmLabels(ctx.target, ctx.installationID);
  if (vm.labels[TARGET_UID_LABEL] !== mine[TARGET_UID_LABEL] || vm.labels[INSTALLATION_LABEL] !== mine[INSTALLATION_LABEL]) return '';
  const receipt = receiptFor({ action: 'Delete', hosts: [name], zone }, ctx.now(), ctx.target.metadata!.uid!);
  if (!(await ctx.record(receipt))) return `; VM ${name} was left by the refused insert and its delete could not be recorded, the next check deletes it`;
  const outcome = await deleteVM(name, receipt, ctx);
  if (outcome.phase) await ctx.settle(receipt.id, outcome.phase, outcome.message);
  return `; VM ${name}, left by the refused insert, ${outcome.ok ? 'is being deleted' : `could not be deleted (${outcome.message.slice(0, 200)})`}`;
}

/** An insert answered alreadyExists: the VM of that name is looked up, and is the launch when it carries this target's labels. */
async function existing(name: string, placement: Placement, receipt: Receipt, ctx: ChangeContext): Promise<ChangeOutcome> {
  let vm;
  try {
    vm = await ctx.clients.gce.get(placement.zone, name, ctx.signal);
  } catch (err) {
    // Gone again (deleted or preempted since), or not readable now: the receipt stays open and the next check looks.
    return failed(receipt, 'LaunchUnknown', `inserting VM ${name} answered alreadyExists, and reading it failed (${errorText(err)}); the next check continues it`, true);
  }
  const mine = vmLabels(ctx.target, ctx.installationID);
  const ours = vm.labels[TARGET_UID_LABEL] === mine[TARGET_UID_LABEL] && vm.labels[INSTALLATION_LABEL] === mine[INSTALLATION_LABEL];
  if (!ours) {
    return failed(receipt, 'LaunchFailed', `VM ${name} in ${placement.zone} already exists and is not this RunnerTarget's (its labels differ); set spec.gce.namePrefix to a prefix no other VM of the project uses`);
  }
  const message = `VM ${name} in ${placement.zone} already existed (its insert was answered alreadyExists: a repeated insert whose requestId Compute Engine no longer remembered); it is this launch, and its receipt stays Intended until its runner registers`;
  return { ok: true, receiptID: receipt.id, message, event: { type: 'Normal', reason: 'Launched', message } };
}

async function deleteVM(name: string, receipt: Receipt, ctx: ChangeContext): Promise<ChangeOutcome> {
  const zone = receipt.zone ?? ctx.observation.vms.find((v) => v.name === name)?.zone ?? '';
  ctx.guard.permit(`compute.instances.delete ${zone}/${name}`);
  try {
    await ctx.clients.gce.delete(zone, name, receipt.requestId ?? '', ctx.signal);
    return done(receipt, 'Deleted', `VM ${name} in ${zone} is being deleted`);
  } catch (err) {
    if (isProviderError(err, 'NotFound')) return done(receipt, 'Deleted', `VM ${name} was already gone`);
    if (isProviderError(err) && err.answerLost) return failed(receipt, 'DeleteUnknown', `deleting VM ${name} got no answer; the next check looks again`, true);
    return failed(receipt, 'DeleteFailed', `deleting VM ${name} failed: ${errorText(err)}`);
  }
}

async function removeRunner(name: string, id: number, receipt: Receipt, ctx: ChangeContext): Promise<ChangeOutcome> {
  ctx.guard.permit(`github.deleteRunner ${name}`);
  try {
    await ctx.clients.github.deleteRunner(id, ctx.signal);
    return { ...done(receipt, 'RunnerRemoved', `runner ${name} removed`), deregistered: 'removed' };
  } catch (err) {
    if (isProviderError(err, 'NotFound')) return { ...done(receipt, 'RunnerRemoved', `runner ${name} was already gone`), deregistered: 'gone' };
    if (err instanceof RunnerBusyError) return { ...failed(receipt, 'RunnerBusy', `GitHub refused to remove runner ${name}: it runs a job`), deregistered: 'busy' };
    if (isProviderError(err) && err.answerLost) return failed(receipt, 'RemoveUnknown', `removing runner ${name} got no answer; the next check looks again`, true);
    return failed(receipt, 'RemoveFailed', `removing runner ${name} failed: ${errorText(err)}`);
  }
}

/** The Compute Engine code of a refused insert, as ../policy/placement.ts names them (a synchronous quota error says quotaExceeded). */
function launchCode(err: ProviderError): string {
  if (err instanceof QuotaExceeded) return 'QUOTA_EXCEEDED';
  if (err instanceof CapacityExhausted) return (CAPACITY_CODES as readonly string[]).includes(err.reason ?? '') ? err.reason! : 'ZONE_RESOURCE_POOL_EXHAUSTED';
  return err instanceof GceApiError ? (err.reason ?? err.kind) : err.kind;
}
