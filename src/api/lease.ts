// Lease: a machine a user rents, described by what it needs.

import { z } from 'zod';
import { MAX_SSH_KEYS, SSH_KEY_TYPES } from './ssh-keys.js';
import {
  kindSchema,
  conditions,
  count,
  duration,
  kube,
  message,
  objectName,
  re,
  REASON_PATTERN,
  secretKeyRef,
  timestamp,
  usd,
} from './common.js';
import { ARCHES, OSES, WHERE_MAX_LENGTH, WHERE_PATTERN, parseWhere } from './where.js';

export { MAX_SSH_KEYS, SSH_KEY_TYPES, sshKeysHash } from './ssh-keys.js';

export const LEASE_NAMES = { kind: 'Lease', plural: 'leases', singular: 'lease', shortNames: ['lhl'] } as const;

/** The schema limit of status.lastReleaseError. */
export const LAST_RELEASE_ERROR_MAX_CHARS = 4096;


export const LEASE_PHASES = ['Pending', 'Launching', 'Ready', 'Idle', 'Releasing', 'Released', 'Failed'] as const;
export type LeasePhase = (typeof LEASE_PHASES)[number];
/** Phases in which a machine may exist: these hold a slot under maxLeases and cost money. */
export const ACTIVE_PHASES: readonly LeasePhase[] = ['Launching', 'Ready', 'Idle', 'Releasing'];
/** Phases a Lease never leaves. */
export const ENDED_PHASES: readonly LeasePhase[] = ['Released', 'Failed'];



/** One OpenSSH public key line: type, base64 key, optional comment of printable ASCII (what the controller writes to authorized_keys). */
export const SSH_PUBLIC_KEY_PATTERN =
  '^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\\.com|sk-ecdsa-sha2-nistp256@openssh\\.com) [A-Za-z0-9+/]+={0,3}( [\\x20-\\x7e]*)?$';

export const WHERE_ANY_CEL_MESSAGE =
  'a Lease must name what it needs, e.g. "gpu=h100" or "cpus>=8": "*" means any runner and never leases a machine';

export const WhereSchema = kube(
  z
    .string()
    .min(1)
    .max(WHERE_MAX_LENGTH)
    .regex(re(WHERE_PATTERN), {
      message:
        'not a where requirement: use comma-separated gpu, gpu=MODEL, gpus>=N, cpus>=N, vram>=GiB, arch=amd64|arm64, os=linux|darwin|windows, tool=NAME',
    })
    .superRefine((raw, ctx) => {
      const r = parseWhere(raw);
      if (!r.ok) ctx.addIssue({ code: 'custom', message: r.error });
    }),
  {
    description:
      'What the machine must have: comma-separated terms gpu (any GPU), gpu=MODEL (model name contains MODEL, ignoring case), gpus>=N, cpus>=N, vram>=GiB (per GPU), arch=amd64|arm64, os=linux|darwin|windows and tool=NAME, e.g. "gpu=h100,cpus>=16". Each term but tool= may appear once. "*" is refused. Cannot change after creation.',
    'x-kubernetes-validations': [
      { rule: "self != '*'", message: WHERE_ANY_CEL_MESSAGE },
      {
        rule: "['gpu', 'gpus>=', 'cpus>=', 'vram>=', 'arch=', 'os='].all(k, self.split(',').filter(t, k == 'gpu' ? (t == 'gpu' || t.startsWith('gpu=')) : t.startsWith(k)).size() <= 1)",
        message: 'each term of where except tool= may appear only once',
      },
      { rule: 'self == oldSelf', message: 'where cannot change once the Lease exists; create a new Lease instead' },
    ],
  },
);

export const SshKeySchema = z
  .string()
  .max(16384)
  .regex(re(SSH_PUBLIC_KEY_PATTERN), {
    message: 'not an OpenSSH public key line: expected "<type> <base64> [comment]", e.g. the contents of ~/.ssh/id_ed25519.pub',
  })
  .describe('One OpenSSH public key line, as in ~/.ssh/id_ed25519.pub: type, base64 key and an optional comment.');

export const LeaseSpecSchema = kube(
  z
    .object({
      where: WhereSchema,
      offer: kube(objectName(''), {
        description:
          'Name of the one Offer this Lease may use. Omit to let the controller pick the cheapest matching Offer. Cannot change after creation.',
        'x-kubernetes-validations': [
          { rule: 'self == oldSelf', message: 'offer cannot change once the Lease exists; create a new Lease instead' },
        ],
      }).optional(),
      sshKeys: z
        .array(SshKeySchema)
        .max(MAX_SSH_KEYS)
        .default([])
        .describe(
          'Public keys of the devices that may log in to the machine, at most 16. The controller installs them after boot and keeps the machine in step when this list changes. No private key is ever needed.',
        ),
    })
    .strict(),
  {
    description: 'What the user asks for: the requirements of the machine and the devices that may reach it.',
    'x-kubernetes-validations': [
      {
        rule: 'has(self.offer) == has(oldSelf.offer)',
        message: 'offer cannot be added or removed once the Lease exists; create a new Lease instead',
      },
    ],
  },
);
export type LeaseSpec = z.infer<typeof LeaseSpecSchema>;

// ---------------------------------------------------------------------------
// Status

export const ParsedWhereSchema = z
  .object({
    any: z.boolean().optional().describe('True for "*" (any runner); never set on an accepted Lease.'),
    gpuModel: z.string().max(64).optional().describe('Substring the GPU model must contain, ignoring case.'),
    gpus: z.int().min(1).optional().describe('Minimum number of GPUs (1 when only gpu or gpu=MODEL was given).'),
    cpus: z.int().min(1).optional().describe('Minimum number of CPUs.'),
    vramGiB: z.int().min(1).optional().describe('Minimum memory per GPU, in GiB.'),
    arch: z.enum(ARCHES).optional().describe('Required CPU architecture.'),
    os: z.enum(OSES).optional().describe('Required operating system.'),
    tools: z
      .array(z.string().max(64).describe('A tool name.'))
      .max(64)
      .optional()
      .describe('Tools the machine must provide.'),
  })
  .describe('spec.where, parsed: the requirements the controller matched Offers and the machine against.');

export const LaunchSchema = z
  .object({
    attempt: count('Launch attempt number, starting at 1; bumped before every call to the provider.'),
    startedAt: timestamp('When this attempt started.'),
    offerGeneration: count('metadata.generation of the Offer the attempt was launched from.').optional(),
  })
  .describe('The launch in progress or last made, recorded before the provider is called.');

export const LambdaReleaseSchema = z
  .object({
    apiKeySecretRef: secretKeyRef('The Secret key holding the Lambda API key the machine was rented with.', {
      defaultKey: 'apiKey',
      namespaceRequired: true,
      keyMeaning: 'the API key',
    }),
    endpoint: z.string().max(2048).describe('Base URL of the Lambda Cloud API the machine was rented from.'),
    instanceID: z
      .string()
      .max(128)
      .optional()
      .describe('Lambda instance ID, once known; before that the instance is found by machineName.'),
    region: z.string().max(64).optional().describe('Region the instance was launched in.'),
  })
  .describe('How to terminate a Lambda instance.');

export const ReleaseSchema = z
  .object({
    provider: z.enum(['command', 'lambda']).describe('Kind of provider that made the machine: command or lambda.'),
    command: z
      .array(z.string().max(4096).describe('One argument.'))
      .max(64)
      .optional()
      .describe('For command providers: the release command, run with LEASEHOLD_LEASE_STATE set to providerState.'),
    lambda: LambdaReleaseSchema.optional(),
  })
  .describe(
    'Everything needed to release the machine, copied from the Offer at launch, so that it is released the way it was made even if the Offer changes or is deleted.',
  );

export const SshEndpointSchema = z
  .object({
    host: z.string().max(253).describe('Host name or IP address to connect to.'),
    port: z.int().min(1).max(65535).default(22).describe('TCP port of the SSH server. Defaults to 22.'),
    user: z.string().max(64).describe('User name to log in as.'),
    hostKey: z
      .string()
      .max(16384)
      .describe('The host key of the machine, as an OpenSSH public key line; connect only if the server presents it.'),
  })
  .describe('How to reach the machine over SSH, with its pinned host key.');

export const MachineEndpointSchema = z
  .object({
    ssh: SshEndpointSchema.optional(),
    url: z.string().max(2048).optional().describe('A URL the machine serves on, when its provider reported one instead of SSH.'),
  })
  .describe('How to reach the machine.');

export const FactsSchema = z
  .object({
    os: z.string().max(32).optional().describe('Operating system, as measured on the machine.'),
    arch: z.string().max(32).optional().describe('CPU architecture, as measured.'),
    cpus: count('Number of CPUs, as measured.').optional(),
    memoryGiB: count('System memory in GiB, as measured.').optional(),
    gpus: count('Number of GPUs, as measured.').optional(),
    gpuModel: z.string().max(256).optional().describe('GPU model, as the driver reports it.'),
    vramGiB: count('Memory per GPU in GiB, as measured.').optional(),
    tools: z
      .array(z.string().max(64).describe('A tool name.'))
      .max(64)
      .optional()
      .describe('Tools found on the machine.'),
  })
  .describe('What the machine measured about itself after boot, checked against the Offer and spec.where.');

export const UsageSchema = z
  .object({
    jobs: count('Jobs started through leasehold-run that were running.'),
    sessions: count("Open SSH sessions other than the controller's own."),
    gpuProcesses: count('Processes holding a GPU, as nvidia-smi listed them.'),
    busy: z
      .string()
      .max(256)
      .describe('What kept the machine busy, of what the Offer\'s busyWhen counts, e.g. "2 sessions, 1 GPU process"; "none" when idle.'),
    at: timestamp('When the check that saw this ran.'),
  })
  .describe(
    'What the last check saw running on the machine. Written when it changes or work is seen, so an idle machine costs no status writes.',
  );

export const LeaseStatusSchema = z
  .object({
    observedGeneration: count('The metadata.generation this status was computed from.').optional(),
    conditions: conditions(
      'Scheduled: an Offer was chosen. Ready: the machine is up, its facts match, and the device keys are installed.',
    ).optional(),
    phase: z
      .enum(LEASE_PHASES)
      .optional()
      .describe(
        'Where the lease is in its life: Pending (choosing an Offer), Launching, Ready (active within the idle window), Idle (counting down to release), Releasing, Released, or Failed.',
      ),
    reason: z.string().max(1024).regex(re(REASON_PATTERN)).optional().describe('Machine-readable reason for the phase, in CamelCase.'),
    message: message('Human-readable explanation of the phase.').optional(),
    offer: z.string().max(253).optional().describe('Name of the Offer the machine was rented from.'),
    instanceType: z.string().max(128).optional().describe('Provider instance type of the machine.'),
    region: z.string().max(64).optional().describe('Region the machine runs in.'),
    pricePerHour: usd('Price of the machine in US dollars per hour, as known at launch.').optional(),
    leaseID: z.string().max(128).optional().describe('Identifier of the lease, handed to the provider.'),
    machineName: z
      .string()
      .max(63)
      .optional()
      .describe('Name the provider gives the machine (leasehold- and the start of the Lease UID), so it can always be found by name.'),
    launch: LaunchSchema.optional(),
    providerState: z
      .string()
      .max(16384)
      .optional()
      .describe('The JSON object the provider returned when it acquired the machine, passed back to release.'),
    release: ReleaseSchema.optional(),
    releaseAttempts: count('Number of release attempts made so far; a failed release is retried until it succeeds.').optional(),
    lastReleaseError: message('Error of the last failed release attempt.', LAST_RELEASE_ERROR_MAX_CHARS).optional(),
    machine: MachineEndpointSchema.optional(),
    facts: FactsSchema.optional(),
    installedKeysHash: z
      .string()
      .max(128)
      .optional()
      .describe('Digest of the spec.sshKeys last installed on the machine, to tell when they need updating.'),
    parsedWhere: ParsedWhereSchema.optional(),
    readyAt: timestamp('When the lease became Ready.').optional(),
    usage: UsageSchema.optional(),
    lastActivityAt: timestamp('When work was last seen on the machine, or it was last handed out.').optional(),
    idleTimeout: duration(
      "The Offer's idleTimeout copied at launch: the machine is released this long after its last activity, even if the Offer changes later.",
    ).optional(),
    idleSince: timestamp('When the machine was last seen go idle; the idle window counts from here.').optional(),
    expiresAt: timestamp('When maxLifetime will release the machine, whatever it is doing.').optional(),
    releasedAt: timestamp('When the provider confirmed the machine was gone.').optional(),
    endReason: z
      .string()
      .max(128)
      .regex(re(REASON_PATTERN))
      .optional()
      .describe(
        'Why the lease ended or is ending, set when it leaves for Releasing, Released or Failed: IdleTimeout, MaxLifetime, Deleted, AcquireTimeout, FactsMismatch, HostKeyMismatch, LaunchInterrupted, NoCapacity, and the other failure reasons.',
      ),
  })
  .describe('The observed state of the lease: its phase, the chosen Offer, how to reach the machine, and timestamps.');
export type LeaseStatus = z.infer<typeof LeaseStatusSchema>;
export type ParsedWhereStatus = z.infer<typeof ParsedWhereSchema>;

export const LeaseSchema = kindSchema(LEASE_NAMES.kind, LeaseSpecSchema, LeaseStatusSchema, 'A Lease rents one machine that has what spec.where asks for, from the cheapest matching Offer, and hands back an SSH endpoint with a pinned host key. The machine is released once idle for the idle timeout of the Offer, at its maximum lifetime, or when the Lease is deleted.');
export type Lease = z.infer<typeof LeaseSchema>;
