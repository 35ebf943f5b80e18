// Offer: a cluster-scoped source of machines a Lease can rent.

import { z } from 'zod';
import {
  kindSchema,
  conditions,
  count,
  duration,
  kube,
  LabelSelectorSchema,
  message,
  re,
  secretKeyRef,
  timestamp,
  usd,
} from './common.js';
import { ARCHES, OSES } from './where.js';

export const OFFER_NAMES = { kind: 'Offer', plural: 'offers', singular: 'offer', shortNames: ['lho'] } as const;

/** The schema limit of status.lastListError. */
export const LAST_LIST_ERROR_MAX_CHARS = 4096;

import { DEFAULT_IDLE_TIMEOUT } from './activity.js';
export { DEFAULT_IDLE_TIMEOUT };
export const DEFAULT_MAX_LIFETIME = '12h';
/** The kinds of work a probe reports, each of which an Offer's spec.busyWhen may count. */
export const BUSY_KINDS = ['jobs', 'sessions', 'gpuProcesses'] as const;
export type BusyKind = (typeof BUSY_KINDS)[number];
export const DEFAULT_LAMBDA_ENDPOINT = 'https://cloud.lambda.ai/api/v1';
export const DEFAULT_LAMBDA_LOGIN = 'ubuntu';
export const DEFAULT_MAX_PRICE_PER_HOUR = 10;

const TOOL_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$';

function argv(description: string, what: string) {
  return z
    .array(
      z
        .string()
        .max(4096)
        // An exec argument ends at NUL: one inside could never be passed as written.
        .regex(re('^[^\\x00]*$'), { message: 'an argument cannot hold a NUL character' })
        .describe(`One argument of the ${what} command.`),
    )
    .min(1)
    .max(64)
    .describe(description);
}

export const MachineShapeSpecSchema = kube(
  z
    .object({
      os: z
        .enum(OSES)
        .default('linux')
        .describe('Operating system of the machines: linux, darwin or windows. Defaults to linux.'),
      arch: z.enum(ARCHES).default('amd64').describe('CPU architecture of the machines: amd64 or arm64. Defaults to amd64.'),
      cpus: z.int().min(1).max(100000).optional().describe('Number of CPUs each machine has.'),
      gpu: z
        .string()
        .min(1)
        .max(128)
        .optional()
        .describe(
          'GPU model, e.g. "H100 80GB". A Lease asking for gpu=MODEL matches when this contains MODEL, ignoring case.',
        ),
      gpus: z
        .int()
        .min(0)
        .max(1024)
        .optional()
        .describe('Number of GPUs each machine has. When gpu is set and this is not, the machine counts as having 1.'),
      vramGiB: z.int().min(0).max(100000).optional().describe('Memory of each GPU, in GiB.'),
      memoryGiB: z.int().min(0).max(1000000).optional().describe('System memory of each machine, in GiB.'),
      tools: z
        .array(z.string().max(64).regex(re(TOOL_NAME_PATTERN)).describe('A tool name, e.g. docker.'))
        .max(64)
        .optional()
        .describe('Tools the machines provide, matched by tool=NAME in a Lease.'),
    })
    .strict()
    .refine((s) => s.gpu === undefined || s.gpus === undefined || s.gpus >= 1, {
      message: 'gpus must be at least 1 when gpu names a model',
      path: ['gpus'],
    }),
  {
    description:
      'What each machine looks like. This is a claim: a Lease becomes Ready only after the measured facts of the machine match it.',
    'x-kubernetes-validations': [
      {
        rule: '!has(self.gpu) || !has(self.gpus) || self.gpus >= 1',
        message: 'gpus must be at least 1 when gpu names a model',
        fieldPath: '.gpus',
      },
    ],
  },
);
export type MachineShapeSpec = z.infer<typeof MachineShapeSpecSchema>;

export const CommandProviderSchema = z
  .object({
    acquire: argv(
      'Command (program and arguments, no shell) that creates a machine and exits 0 once it exists. Its last line of stdout must be a JSON object saying how to reach the machine; other fields in it are kept for release. It sees LEASEHOLD_LEASE_ID, LEASEHOLD_OFFER, LEASEHOLD_LEASE_WHERE and LEASEHOLD_LEASE_SSH_KEY (the public key of the controller) in its environment, and should name the machine after the lease so release can always find it. Only stderr lines starting "leasehold: " are shown to users (events, status); the others go to the controller log only.',
      'acquire',
    ),
    release: argv(
      'Command that destroys the machine. It sees LEASEHOLD_LEASE_ID, LEASEHOLD_OFFER and LEASEHOLD_LEASE_STATE (the JSON acquire printed, or empty), and must succeed when run twice or with empty state.',
      'release',
    ),
    shape: MachineShapeSpecSchema,
  })
  .strict()
  .describe('A provider made of two commands that the controller runs: one to acquire a machine, one to release it.');
export type CommandProvider = z.infer<typeof CommandProviderSchema>;

export const LambdaProviderSchema = z
  .object({
    apiKeySecretRef: secretKeyRef(
      'The Secret key holding the Lambda Cloud API key. Leases keep using the key they were made with until they are released.',
      { defaultKey: 'apiKey', namespaceRequired: true, keyMeaning: 'the API key' },
    ),
    instanceTypes: z
      .array(z.string().min(1).max(128).regex(re('^[a-z0-9_]+$')).describe('A Lambda instance type name, e.g. gpu_1x_h100_sxm5.'))
      .max(128)
      .optional()
      .describe('Only these instance types are offered. Omit to offer every type the account can launch.'),
    regions: z
      .array(z.string().min(1).max(64).regex(re('^[a-z0-9-]+$')).describe('A Lambda region name, e.g. us-east-1.'))
      .max(64)
      .optional()
      .describe('Regions to launch in, most preferred first. Omit to accept any region with capacity.'),
    maxPricePerHour: z
      .number()
      .min(0)
      .default(DEFAULT_MAX_PRICE_PER_HOUR)
      .describe(
        'Instance types listed above this price, in US dollars per hour, are never rented. Defaults to 10; 0 removes the cap.',
      ),
    fileSystems: z
      .array(z.string().min(1).max(128).describe('A Lambda file system name.'))
      .max(16)
      .optional()
      .describe('Lambda file systems to attach. They must all be in one region, which becomes the only region tried.'),
    login: z
      .string()
      .min(1)
      .max(32)
      .regex(re('^[a-z_][a-z0-9_-]*$'))
      .default(DEFAULT_LAMBDA_LOGIN)
      .describe('User name to log in as over SSH. Defaults to ubuntu, the login on Lambda images.'),
    sshPort: z
      .int()
      .min(1)
      .max(65535)
      .default(22)
      .describe('TCP port the instances accept SSH on. Defaults to 22, as on Lambda images; change it only for an API emulator or an SSH gateway.'),
    endpoint: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .default(DEFAULT_LAMBDA_ENDPOINT)
      .describe('Base URL of the Lambda Cloud API. Defaults to https://cloud.lambda.ai/api/v1.'),
  })
  .strict()
  .describe(
    'Rent Lambda Cloud instances: every instance type the account can launch, with capacity in a wanted region and within the price cap, becomes a candidate, with its shape and price taken from the listing.',
  );
export type LambdaProvider = z.infer<typeof LambdaProviderSchema>;

export const OfferSpecSchema = kube(
  z
    .object({
      command: CommandProviderSchema.optional(),
      lambda: LambdaProviderSchema.optional(),
      pricePerHour: usd(
        'Command Offers only: price of one machine in US dollars per hour, shown to users and used to pick the cheapest Offer. An Offer with a price, even 0, is preferred to one without. A Lambda Offer takes each instance type\'s price from the listing (status.candidates), which is also what the price cap checks, so it cannot set one.',
      ).optional(),
      idleTimeout: duration(
        'How long a Ready lease may sit with no activity before its machine is released, e.g. 20m. Defaults to 20m.',
      ).default(DEFAULT_IDLE_TIMEOUT),
      maxLifetime: duration(
        'How long after its machine was requested a lease is released, even if work is still running, e.g. 12h. Defaults to 12h. It counts from the launch, not from Ready, so a slow boot cannot stretch it.',
      ).default(DEFAULT_MAX_LIFETIME),
      busyWhen: kube(
        z
          .array(z.enum(BUSY_KINDS).describe('A kind of work: jobs, sessions or gpuProcesses.'))
          .min(1)
          .max(BUSY_KINDS.length)
          .refine((kinds) => new Set(kinds).size === kinds.length, { message: 'each kind of work may be named once' })
          .default([...BUSY_KINDS]),
        {
          description:
            "What keeps a Ready lease from going idle, looked at every check interval: jobs (commands run through leasehold-run, as leasehold run does), sessions (open SSH sessions other than the controller's own: shells, scp and sftp, port forwards) and gpuProcesses (processes holding a GPU, as nvidia-smi lists them: a training run left in a detached tmux). Defaults to all three. maxLifetime ends a lease whatever this says.",
          'x-kubernetes-list-type': 'set',
        },
      ),
      namespaceSelector: LabelSelectorSchema.optional().describe(
        'Which namespaces may lease from this Offer, by their labels (e.g. matchLabels: {team: ml}). Absent or empty: every namespace. A Lease in a namespace it does not select waits Pending with reason NamespaceNotAllowed.',
      ),
      maxLeasesPerNamespace: z
        .int()
        .min(1)
        .max(100000)
        .optional()
        .describe(
          'At most this many active Leases (Launching to Releasing) of one namespace use this Offer at a time; more wait Pending with reason MaxLeasesPerNamespace. Absent: no limit per namespace.',
        ),
    })
    .strict()
    .refine((s) => (s.command === undefined) !== (s.lambda === undefined), {
      message: 'an Offer takes exactly one of command or lambda',
    })
    .refine((s) => s.lambda === undefined || s.pricePerHour === undefined, {
      message: 'a Lambda Offer takes each instance type\'s price from the listing; remove spec.pricePerHour',
      path: ['pricePerHour'],
    }),
  {
    description:
      'The desired state of the Offer: exactly one provider (command or lambda), its price and its release timers. Changing an Offer only affects new leases, except busyWhen, which every check reads.',
    'x-kubernetes-validations': [
      { rule: 'has(self.command) != has(self.lambda)', message: 'an Offer takes exactly one of command or lambda' },
      {
        rule: '!has(self.lambda) || !has(self.pricePerHour)',
        message: "a Lambda Offer takes each instance type's price from the listing; remove spec.pricePerHour",
        fieldPath: '.pricePerHour',
      },
    ],
  },
);
export type OfferSpec = z.infer<typeof OfferSpecSchema>;

export const OfferCandidateSchema = z
  .object({
    name: z.string().max(128).describe('Name of the candidate: the instance type with hyphens, e.g. gpu-1x-h100-sxm5.'),
    instanceType: z.string().max(128).describe('Provider instance type, e.g. gpu_1x_h100_sxm5.'),
    region: z.string().max(64).optional().describe('Region the candidate would launch in, when one has capacity.'),
    gpus: count('Number of GPUs.'),
    gpuDescription: z.string().max(256).optional().describe('GPU description as the provider lists it.'),
    gpuModel: z.string().max(128).optional().describe('GPU model as matched by gpu=MODEL, e.g. "H100 80GB".'),
    vramGiB: count('Memory of each GPU, in GiB.').optional(),
    cpus: count('Number of CPUs.'),
    memoryGiB: count('System memory, in GiB.').optional(),
    arch: z.enum(ARCHES).describe('CPU architecture.'),
    pricePerHour: usd('Listed price in US dollars per hour.'),
    available: z.boolean().describe('Whether a Lease could rent this candidate now.'),
    reason: message('Why the candidate is unavailable, e.g. no capacity in a wanted region, or above the price cap.', 1024).optional(),
  })
  .describe('One instance type a Lambda Offer could rent.');
export type OfferCandidate = z.infer<typeof OfferCandidateSchema>;

export const OfferStatusSchema = z
  .object({
    observedGeneration: count('The metadata.generation this status was computed from.').optional(),
    conditions: conditions('Ready: the Offer is valid and its provider answered (for Lambda, the last listing succeeded).').optional(),
    activeLeases: count('Number of leases using this Offer that are not yet Released or Failed.').optional(),
    candidates: z
      .array(OfferCandidateSchema)
      .max(256)
      .optional()
      .describe('For Lambda Offers: every instance type from the last listing, available or not.'),
    lastListTime: timestamp('When the provider last listed its instance types successfully.').optional(),
    lastListError: message('Error of the last failed listing, cleared once one succeeds.', LAST_LIST_ERROR_MAX_CHARS).optional(),
  })
  .describe('The observed state of the Offer.');
export type OfferStatus = z.infer<typeof OfferStatusSchema>;

export const OfferSchema = kindSchema(OFFER_NAMES.kind, OfferSpecSchema, OfferStatusSchema, 'An Offer is a source of machines that Leases rent: a Lambda Cloud account, or a pair of acquire/release commands for any other cloud. The controller picks the cheapest Offer that matches what a Lease needs.');
export type Offer = z.infer<typeof OfferSchema>;
