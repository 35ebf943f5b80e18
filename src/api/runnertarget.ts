// RunnerTarget: a pool of GitHub Actions runner hosts on Compute Engine spot
// VMs that follows the queued jobs.

import { z } from 'zod';
import {
  kindSchema,
  conditions,
  count,
  duration,
  kube,
  message,
  objectName,
  re,
  secretKeyRef,
  timestamp,
  usd,
} from './common.js';

export const RUNNERTARGET_NAMES = { kind: 'RunnerTarget', plural: 'runnertargets', singular: 'runnertarget', shortNames: ['lhrt'] } as const;

export const DEFAULT_CHECK_INTERVAL = '5m';
export const DEFAULT_GITHUB_API_URL = 'https://api.github.com';
export const DEFAULT_GCE_ENDPOINT = 'https://compute.googleapis.com/compute/v1';

export const RUNNER_HOST_STATES = ['Launching', 'Registering', 'Idle', 'Busy', 'Draining', 'Deleting'] as const;
export const RECEIPT_ACTIONS = ['Launch', 'Delete', 'Drain', 'Start', 'Stop'] as const;
export const RECEIPT_OUTCOMES = ['Intended', 'Succeeded', 'Failed'] as const;

export const SERVICE_ACCOUNT_PATTERN = '^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$';
const DEFAULT_COMPUTE_ACCOUNT_SUFFIX = '-compute@developer.gserviceaccount.com';
const DEFAULT_COMPUTE_ACCOUNT_MESSAGE =
  'serviceAccount must not be the default Compute Engine account, which usually holds broad roles; use a dedicated account with only log and metric write access';

const GITHUB_NAME = '[A-Za-z0-9]([A-Za-z0-9-]{0,37}[A-Za-z0-9])?';
const GITHUB_REPO = '[A-Za-z0-9._-]{1,100}';

export const GitHubSchema = kube(
  z
    .object({
      org: z
        .string()
        .max(39)
        .regex(re(`^${GITHUB_NAME}$`))
        .describe('GitHub organization the runners register with.'),
      repositories: z
        .array(
          z
            .string()
            .max(140)
            .regex(re(`^${GITHUB_NAME}/${GITHUB_REPO}$`))
            .describe('A repository as owner/name.'),
        )
        .min(1)
        .max(64)
        .describe('Repositories whose queued and running jobs the pool follows, as owner/name.'),
      labels: z
        .array(z.string().min(1).max(128).describe('A runner label.'))
        .max(32)
        .optional()
        .describe('Runner labels a job must ask for to count; omit to count every self-hosted job.'),
      tokenSecretRef: secretKeyRef('The Secret key holding a GitHub token that may manage runners of the org.', {
        defaultKey: 'token',
        keyMeaning: 'the token',
      }).optional(),
      appSecretRef: z
        .object({
          name: objectName('Name of the Secret, with keys appID, installationID and privateKey (PEM).'),
          namespace: z
            .string()
            .max(63)
            .optional()
            .describe('Namespace of the Secret; defaults to the namespace of the RunnerTarget.'),
        })
        .strict()
        .optional()
        .describe('A Secret with the credentials of a GitHub App installed on the org, instead of a token.'),
      apiURL: z
        .url({ protocol: /^https?$/ })
        .max(2048)
        .default(DEFAULT_GITHUB_API_URL)
        .describe('Base URL of the GitHub REST API. Defaults to https://api.github.com.'),
    })
    .strict()
    .refine((g) => (g.tokenSecretRef === undefined) !== (g.appSecretRef === undefined), {
      message: 'github takes exactly one of tokenSecretRef or appSecretRef',
    }),
  {
    description: 'Where the runners register and which jobs they follow.',
    'x-kubernetes-validations': [
      {
        rule: 'has(self.tokenSecretRef) != has(self.appSecretRef)',
        message: 'github takes exactly one of tokenSecretRef or appSecretRef',
      },
    ],
  },
);

export const MachineTypeTierSchema = z
  .object({
    machineType: z
      .string()
      .min(1)
      .max(64)
      .regex(re('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))
      .describe('A Compute Engine machine type, e.g. n2d-standard-16.'),
    maxPricePerHour: usd('Skip this tier when its spot price is above this, in US dollars per hour.').optional(),
  })
  .strict()
  .describe('One machine type to try.');

export const GCESchema = z
  .object({
    project: z
      .string()
      .max(30)
      .regex(re('^[a-z][a-z0-9-]{4,28}[a-z0-9]$'))
      .describe('Compute Engine project ID the hosts run in.'),
    zones: z
      .array(z.string().max(64).regex(re('^[a-z]+-[a-z]+[0-9]+-[a-z]$')).describe('A zone, e.g. us-central1-a.'))
      .min(1)
      .max(32)
      .describe('Zones to launch in, most preferred first.'),
    machineTypeTiers: z
      .array(MachineTypeTierSchema)
      .min(1)
      .max(16)
      .describe('Machine types to try, in order; the first with spot capacity within its price is used.'),
    serviceAccount: kube(
      z
        .string()
        .max(254)
        .regex(re(SERVICE_ACCOUNT_PATTERN))
        .refine((v) => !v.endsWith(DEFAULT_COMPUTE_ACCOUNT_SUFFIX), DEFAULT_COMPUTE_ACCOUNT_MESSAGE),
      {
        description:
          'Email of the service account the hosts run as, e.g. spot-runner-host@PROJECT.iam.gserviceaccount.com. Give it only log and metric write access. The default Compute Engine account is refused.',
        'x-kubernetes-validations': [
          { rule: `!self.endsWith('${DEFAULT_COMPUTE_ACCOUNT_SUFFIX}')`, message: DEFAULT_COMPUTE_ACCOUNT_MESSAGE },
        ],
      },
    ),
    image: z
      .string()
      .max(1024)
      .optional()
      .describe('Boot image of the hosts, as a Compute Engine image URL or family; omit for the controller default.'),
    namePrefix: z
      .string()
      .max(40)
      .regex(re('^[a-z]([-a-z0-9]*[a-z0-9])?$'))
      .optional()
      .describe('Prefix of host names; defaults to the name of the RunnerTarget.'),
    credentialsSecretRef: secretKeyRef(
      'The Secret key holding a service account key (JSON) to call Compute Engine with. Omit to use the identity of the controller.',
      { defaultKey: 'key.json', keyMeaning: 'the key file' },
    ).optional(),
    endpoint: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .default(DEFAULT_GCE_ENDPOINT)
      .describe('Base URL of the Compute Engine API. Defaults to https://compute.googleapis.com/compute/v1.'),
  })
  .strict()
  .describe('Where and how runner hosts are created on Compute Engine spot VMs.');

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
    })
    .strict()
    .refine((s) => s.floor <= s.maxHosts, { message: 'floor must not exceed maxHosts', path: ['floor'] }),
  {
    description: 'The pool: its GitHub side, its Compute Engine side, and its limits.',
    'x-kubernetes-validations': [
      { rule: '!has(self.floor) || self.floor <= self.maxHosts', message: 'floor must not exceed maxHosts', fieldPath: '.floor' },
    ],
  },
);
export type RunnerTargetSpec = z.infer<typeof RunnerTargetSpecSchema>;

export const RunnerHostSchema = z
  .object({
    name: z.string().max(63).describe('Name of the VM.'),
    zone: z.string().max(64).describe('Zone the VM runs in.'),
    machineType: z.string().max(64).describe('Machine type of the VM.'),
    state: z
      .enum(RUNNER_HOST_STATES)
      .describe('Launching, Registering (booted, runners not yet registered), Idle, Busy, Draining or Deleting.'),
    createdAt: timestamp('When the VM was created.'),
  })
  .describe('One runner host.');

export const ReceiptSchema = z
  .object({
    id: z.string().max(128).describe('Identifier of the receipt, unique within the RunnerTarget.'),
    action: z.enum(RECEIPT_ACTIONS).describe('What the provider was asked to do.'),
    at: timestamp('When the intent was recorded, before the provider was called.'),
    hosts: z
      .array(z.string().max(63).describe('A host name.'))
      .max(64)
      .describe('Hosts the action applies to.'),
    outcome: z
      .enum(RECEIPT_OUTCOMES)
      .optional()
      .describe('Intended until the provider answered, then Succeeded or Failed.'),
    message: message('Details, such as the error of a failed action.', 4096).optional(),
  })
  .describe('A record of one provider change, written before the change is made.');

export const RunnerTargetStatusSchema = z
  .object({
    observedGeneration: count('The metadata.generation this status was computed from.').optional(),
    conditions: conditions('Ready: the last check completed; BudgetExhausted: no host can start today.').optional(),
    hosts: z.array(RunnerHostSchema).max(1000).optional().describe('Hosts the pool has.'),
    receipts: z.array(ReceiptSchema).max(64).optional().describe('The most recent provider changes, newest last.'),
    lastSample: z
      .object({
        at: timestamp('When the sample was taken.'),
        queued: count('Jobs queued in the followed repositories.'),
        running: count('Jobs running in the followed repositories.'),
      })
      .optional()
      .describe('The last sample of the job queue that the policy counted.'),
    lastCheckAt: timestamp('When the last check finished.').optional(),
    plan: z
      .object({
        desired: count('How many hosts the pool should have.'),
        reason: message('Why, in words.', 1024),
      })
      .optional()
      .describe('What the last check decided.'),
    spendTodayUSD: usd('Estimated spend of the pool in the current UTC day, in US dollars.').optional(),
    spendDay: z
      .string()
      .max(10)
      .regex(re('^[0-9]{4}-[0-9]{2}-[0-9]{2}$'))
      .optional()
      .describe('The UTC day (YYYY-MM-DD) spendTodayUSD counts.'),
  })
  .describe('The observed state of the pool.');
export type RunnerTargetStatus = z.infer<typeof RunnerTargetStatusSchema>;

export const RunnerTargetSchema = kindSchema(RUNNERTARGET_NAMES.kind, RunnerTargetSpecSchema, RunnerTargetStatusSchema, 'A RunnerTarget keeps a pool of GitHub Actions runner hosts on Compute Engine spot VMs in step with the queued jobs, between a floor and a maximum and within a daily budget, recording its intent before every provider change.');
export type RunnerTarget = z.infer<typeof RunnerTargetSchema>;
