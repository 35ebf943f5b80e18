// RunnerTarget: a pool of GitHub Actions runner hosts on Compute Engine spot
// VMs that follows the queued jobs. Here: its names, the pool's limits and its
// status; the GitHub and Compute Engine sides of its spec are in
// runnertarget-github.ts and runnertarget-gce.ts.

import { z } from 'zod';
import { kindSchema, conditions, count, duration, kube, message, re, timestamp, usd } from './common.js';
import { parseDuration } from './duration.js';
import { GCESchema } from './runnertarget-gce.js';
import { GitHubSchema } from './runnertarget-github.js';

export const RUNNERTARGET_NAMES = { kind: 'RunnerTarget', plural: 'runnertargets', singular: 'runnertarget', shortNames: ['lhrt'] } as const;

export const DEFAULT_CHECK_INTERVAL = '5m';
/** The shortest checkInterval: a check lists every zone's VMs, the org's runners and the jobs of every followed repository. */
export const MIN_CHECK_INTERVAL = '30s';
export const MIN_CHECK_INTERVAL_MS = 30_000;
const CHECK_INTERVAL_MESSAGE = `checkInterval must be at least ${MIN_CHECK_INTERVAL}: every check reads all of the pool's VMs, runners and jobs, and shorter intervals spend the org's and the project's API rate limits; set spec.checkInterval to ${MIN_CHECK_INTERVAL} or more`;

export const RUNNER_HOST_STATES = ['Launching', 'Registering', 'Idle', 'Busy', 'Offline', 'Draining', 'Deleting', 'Unknown'] as const;
/**
 * Provider changes a receipt records: Launch (insert the VM), Register (a JIT
 * runner config delivered to a host), Deregister (remove a host's runner
 * before its VM), Delete (delete a VM), RemoveRunner (remove a registration
 * whose VM is gone), Rerun (re-run the failed jobs of a workflow run whose
 * job a preemption cut, once the run has concluded).
 */
export const RECEIPT_ACTIONS = ['Launch', 'Register', 'Deregister', 'Delete', 'RemoveRunner', 'Rerun'] as const;
export const RECEIPT_PHASES = ['Intended', 'Done', 'Failed'] as const;
export const RECEIPTS_KEPT = 64;
export const PROVISIONING_MODELS = ['SPOT', 'STANDARD'] as const;
/** Condition types of a RunnerTarget. */
export const RUNNERTARGET_CONDITIONS = ['Ready', 'Durable', 'BudgetExhausted', 'Held'] as const;

export const RunnerTargetSpecSchema = kube(
  z
    .object({
      github: GitHubSchema,
      gce: GCESchema,
      floor: z
        .int()
        .min(0)
        .max(1000)
        .default(0)
        .describe('Hosts kept running even with no jobs queued. Defaults to 0.'),
      maxHosts: z.int().min(1).max(1000).describe('Most hosts the pool may have at once.'),
      dailyBudgetUSD: usd(
        'Most the pool may spend per UTC day, in US dollars. A check never starts a host that would take the estimated spend past this.',
      ),
      checkInterval: duration('How often the pool is checked, e.g. 5m. Defaults to 5m.').default(DEFAULT_CHECK_INTERVAL),
      dryRun: z
        .boolean()
        .default(false)
        .describe(
          'Read-only checks: no lease, no receipt, no change to Compute Engine or GitHub; each check writes its plan to status.plan and an event. Defaults to false.',
        ),
    })
    .strict()
    .refine((s) => s.floor <= s.maxHosts, { message: 'floor must not exceed maxHosts', path: ['floor'] })
    .refine((s) => atLeastMinimum(s.checkInterval), { message: CHECK_INTERVAL_MESSAGE, path: ['checkInterval'] }),
  {
    description: 'The pool: its GitHub side, its Compute Engine side, and its limits.',
    'x-kubernetes-validations': [
      { rule: '!has(self.floor) || self.floor <= self.maxHosts', message: 'floor must not exceed maxHosts', fieldPath: '.floor' },
      { rule: `!has(self.checkInterval) || duration(self.checkInterval) >= duration('${MIN_CHECK_INTERVAL}')`, message: CHECK_INTERVAL_MESSAGE, fieldPath: '.checkInterval' },
    ],
  },
);
export type RunnerTargetSpec = z.infer<typeof RunnerTargetSpecSchema>;

function atLeastMinimum(interval: string): boolean {
  try {
    return parseDuration(interval) >= MIN_CHECK_INTERVAL_MS;
  } catch {
    // An unreadable duration is the field's own refusal, said once.
    return true;
  }
}

const hostName = (description: string) => z.string().max(63).describe(description);
const percent = (description: string) => z.number().min(0).max(100).describe(description);

export const RunnerHostSchema = z
  .object({
    name: hostName('Name of the VM; its runner has the same name.'),
    zone: z.string().max(64).describe('Zone the VM runs in.'),
    machineType: z.string().max(64).describe('Machine type of the VM.'),
    provisioningModel: z.enum(PROVISIONING_MODELS).default('SPOT').describe('SPOT or STANDARD (gce.fallbackToStandard). Defaults to SPOT.'),
    pricePerHour: usd('Price of the host when it was launched, in US dollars per hour; spend is counted with it.'),
    state: z
      .enum(RUNNER_HOST_STATES)
      .describe('Launching, Registering (booted, runner not yet registered), Idle, Busy, Offline (its runner was online and GitHub now lists it offline; no capacity, drained after the offline grace), Draining (runner removed, confirming no job runs), Deleting, or Unknown (its VM shows a status the controller does not know: left alone, not counted as capacity).'),
    createdAt: timestamp('When the VM was created.'),
    runnerID: count('ID of the host\'s runner registration at GitHub, once registered.').optional(),
    idleSince: timestamp('Since when the runner has been seen idle at every check; absent while busy.').optional(),
    offlineSince: timestamp('When a check first saw the runner offline after it had been online; past the offline grace the host is drained and replaced.').optional(),
    orphanSince: timestamp('When a check first found the VM without a runner after its boot grace; the next check deletes it unless the runner shows up.').optional(),
    message: message('Why the host is in its state.', 1024).optional(),
  })
  .describe('One runner host.');

export const ReceiptSchema = z
  .object({
    id: z.string().max(128).describe('Identifier of the receipt, unique within the RunnerTarget.'),
    action: z.enum(RECEIPT_ACTIONS).describe('What the provider is asked to do: Launch, Register, Deregister, Delete, RemoveRunner or Rerun.'),
    phase: z.enum(RECEIPT_PHASES).describe('Intended (recorded before the provider call), then Done or Failed.'),
    at: timestamp('When the intent was recorded, before the provider was called.'),
    hosts: z.array(hostName('A host name.')).max(64).describe('Hosts the action applies to.'),
    zone: z.string().max(64).optional().describe('Zone of a Launch.'),
    machineType: z.string().max(64).optional().describe('Machine type of a Launch.'),
    provisioningModel: z.enum(PROVISIONING_MODELS).optional().describe('SPOT or STANDARD, for a Launch.'),
    requestId: z.string().max(36).optional().describe('The Compute Engine requestId of a Launch or Delete, reused when a later check continues it.'),
    repository: z.string().max(140).optional().describe('The repository (owner/name) of a Rerun\'s workflow run.'),
    runId: count('The workflow run a Rerun re-runs the failed jobs of.').optional(),
    runAttempt: count('The attempt of the run the preempted job belonged to; a later attempt means the run was re-run already.').optional(),
    message: message('Details, such as the error of a failed action.', 4096).optional(),
  })
  .describe('A record of one provider change, written before the change is made.');
export type Receipt = z.infer<typeof ReceiptSchema>;

export const PressureSampleSchema = z
  .object({
    cpu: percent('Highest "some avg60" of /proc/pressure/cpu on a busy host, in percent.'),
    memory: percent('Highest "some avg60" of /proc/pressure/memory on a busy host, in percent.'),
    io: percent('Highest "some avg60" of /proc/pressure/io on a busy host, in percent.'),
    hosts: count('Busy hosts whose evidence was read.'),
  })
  .describe('Pressure on the busy hosts at the sample.');

export const RunnerTargetStatusSchema = z
  .object({
    observedGeneration: count('The metadata.generation this status was computed from.').optional(),
    conditions: conditions(
      'Ready: the last check completed. Durable: status writes succeed; False stops every provider call of the check (never cleared by overwriting). BudgetExhausted: no launch fits dailyBudgetUSD today. Held: True while a check holds the target\'s lease, naming the holder (a check that finds the lease held elsewhere writes no status, only an event).',
    ).optional(),
    hosts: z.array(RunnerHostSchema).max(1000).optional().describe('Hosts the pool has.'),
    counts: z
      .object({
        hosts: count('Hosts the pool has.'),
        busy: count('Hosts whose runner runs a job.'),
        idle: count('Hosts whose runner is idle.'),
        queued: count('Queued jobs the runners could take.'),
      })
      .optional()
      .describe('Totals of the last check, for kubectl get.'),
    preemptedJobs: count('Jobs found running on a host when its spot VM was preempted, since the RunnerTarget was created.').optional(),
    receipts: z.array(ReceiptSchema).max(RECEIPTS_KEPT).optional().describe('The most recent provider changes, newest last (at most 64).'),
    lastSample: z
      .object({
        at: timestamp('When the sample was taken; the next sample counts only 300 to 450 seconds later.'),
        queued: count('Queued jobs of the followed repositories that the runners could take.'),
        running: count('Jobs running in the followed repositories.'),
        idleRunners: count('Runners of the pool that were idle.'),
        busyRunners: count('Runners of the pool that were busy.'),
        pressure: PressureSampleSchema.optional(),
      })
      .optional()
      .describe('The last sample that the policy counted.'),
    tier: z
      .object({
        machineType: z.string().max(64).describe('The machine type the pool launches first.'),
        high: count('Counted samples in a row with high pressure; enough moves the pool up a tier.'),
        low: count('Counted samples in a row with low pressure; enough moves the pool down a tier.'),
        changedAt: timestamp('When the tier last changed.').optional(),
      })
      .optional()
      .describe('The machine-type tier the pressure evidence chose.'),
    lastCheckAt: timestamp('When the last check finished.').optional(),
    plan: z
      .object({
        at: timestamp('When the plan was made.'),
        dryRun: z.boolean().describe('True when spec.dryRun made the check read-only: nothing of the plan was done.'),
        desired: count('How many hosts the pool should have.'),
        launch: count('Hosts to launch.'),
        drain: z.array(hostName('A host name.')).max(1000).describe('Idle hosts whose runner is removed before the VM is deleted.'),
        delete: z.array(hostName('A host name.')).max(1000).describe('VMs to delete: drained hosts with no job running, orphans after their last look, preempted hosts.'),
        removeRunners: z.array(hostName('A runner name.')).max(1000).describe('Runner registrations whose VM is gone.'),
        machineType: z.string().max(64).describe('The machine type launches start with.'),
        reason: message('Why, in words.', 4096),
      })
      .optional()
      .describe('What the last check decided.'),
    spendTodayUSD: usd('Estimated spend of the pool in the current UTC day, in US dollars: host-hours times each host\'s pricePerHour.').optional(),
    spendEndedUSD: usd('The part of spendTodayUSD from hosts that ended during spendDay, in US dollars.').optional(),
    spendDay: z
      .string()
      .max(10)
      .regex(re('^[0-9]{4}-[0-9]{2}-[0-9]{2}$'))
      .optional()
      .describe('The UTC day (YYYY-MM-DD) spendTodayUSD counts.'),
  })
  .describe('The observed state of the pool.');
export type RunnerTargetStatus = z.infer<typeof RunnerTargetStatusSchema>;
export type RunnerHost = z.infer<typeof RunnerHostSchema>;
export type RunnerTargetPlan = NonNullable<RunnerTargetStatus['plan']>;
export type RunnerTargetSample = NonNullable<RunnerTargetStatus['lastSample']>;
export type RunnerTargetTier = NonNullable<RunnerTargetStatus['tier']>;

export const RunnerTargetSchema = kindSchema(RUNNERTARGET_NAMES.kind, RunnerTargetSpecSchema, RunnerTargetStatusSchema, 'A RunnerTarget keeps a pool of GitHub Actions runner hosts on Compute Engine spot VMs in step with the queued jobs, between a floor and a maximum and within a daily budget, recording its intent before every provider change.');
export type RunnerTarget = z.infer<typeof RunnerTargetSchema>;
