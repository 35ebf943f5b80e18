// The Compute Engine side of a RunnerTarget: where and how its runner hosts
// are created as spot VMs, the machine-type tiers the pool moves between and
// their prices, and the limits Compute Engine enforces on its own (the host's
// service account, its longest run), which hold even when the controller is
// gone.

import { z } from 'zod';
import { duration, kube, localSecretKeyRef, re, usd } from './common.js';
import { parseDuration } from './duration.js';

export const DEFAULT_GCE_ENDPOINT = 'https://compute.googleapis.com/compute/v1';
/** Compute Engine deletes a host this long after it starts running, whatever becomes of the controller. */
export const DEFAULT_MAX_RUN_DURATION = '24h';
export const MIN_MAX_RUN_DURATION = '1h';
/** Compute Engine's own upper limit for scheduling.maxRunDuration: 120 days. */
export const MAX_MAX_RUN_DURATION = '2880h';
const MAX_RUN_DURATION_MESSAGE = `maxRunDuration must be between ${MIN_MAX_RUN_DURATION} and ${MAX_MAX_RUN_DURATION} (Compute Engine allows at most 120 days): set spec.gce.maxRunDuration within that range, above the longest job`;

export const SERVICE_ACCOUNT_PATTERN = '^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$';
const DEFAULT_COMPUTE_ACCOUNT_SUFFIX = '-compute@developer.gserviceaccount.com';
const DEFAULT_COMPUTE_ACCOUNT_MESSAGE =
  'serviceAccount must not be the default Compute Engine account, which usually holds broad roles; use a dedicated account with only log and metric write access';

const STANDARD_PRICE_MESSAGE =
  'fallbackToStandard needs standardPricePerHour on every machineTypeTiers entry, so that standard hosts count against dailyBudgetUSD';

export const MachineTypeTierSchema = z
  .object({
    machineType: z
      .string()
      .min(1)
      .max(64)
      .regex(re('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))
      .describe('A Compute Engine machine type, e.g. n2d-standard-16.'),
    pricePerHour: usd(
      'What one spot host of this type costs, in US dollars per hour; spend today and dailyBudgetUSD are counted with it. Required.',
    ),
    standardPricePerHour: usd(
      'What one standard (non-spot) host of this type costs, in US dollars per hour. Required on every tier when gce.fallbackToStandard is true.',
    ).optional(),
    maxPricePerHour: usd('Skip this tier when its spot price is above this, in US dollars per hour.').optional(),
  })
  .strict()
  .describe('One machine type to try.');

export const GCESchema = kube(
  z
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
        .describe(
          'Machine types from smallest to largest. The pool starts on the first; pressure on busy hosts moves it up a tier (the next) or down. A launch tries the pool\'s tier in every zone, then the following tiers.',
        ),
      fallbackToStandard: z
        .boolean()
        .default(false)
        .describe(
          'Launch a standard (non-spot) VM when no zone and tier has spot capacity, priced at the tier\'s standardPricePerHour. Defaults to false.',
        ),
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
      credentialsSecretRef: localSecretKeyRef(
        'The Secret key, in the namespace of the RunnerTarget, holding a service account key (JSON) to call Compute Engine with. Omit to use the identity of the controller (its metadata server token), which the controller allows only when installed with runnerTarget.gceOwnIdentity (--runner-gce-own-identity).',
        { defaultKey: 'key.json', keyMeaning: 'the key file', field: 'spec.gce.credentialsSecretRef' },
      ).optional(),
      endpoint: z
        .url({ protocol: /^https?$/ })
        .max(2048)
        .default(DEFAULT_GCE_ENDPOINT)
        .describe('Base URL of the Compute Engine API. Defaults to https://compute.googleapis.com/compute/v1.'),
      externalIP: z
        .boolean()
        .default(true)
        .describe(
          'Give each host an external IP (a one-to-one NAT access config). Set false where the organisation policy constraints/compute.vmExternalIpAccess forbids one: hosts then have only their internal address, at which the controller reaches them, so it must run in (or be routed to) the hosts\' VPC, and the hosts need Cloud NAT or another route out to reach GitHub. Defaults to true.',
        ),
      maxRunDuration: duration(
        `Longest a host lives: every VM is inserted with scheduling.maxRunDuration set to this and instanceTerminationAction DELETE, so Compute Engine deletes it even if the controller is gone. The controller replaces an idle host before then; a job still running at that age is cut off, so keep it above your longest job. ${MIN_MAX_RUN_DURATION} to ${MAX_MAX_RUN_DURATION}; defaults to ${DEFAULT_MAX_RUN_DURATION}.`,
      ).default(DEFAULT_MAX_RUN_DURATION),
    })
    .strict()
    .refine((g) => runDurationInRange(g.maxRunDuration), { message: MAX_RUN_DURATION_MESSAGE, path: ['maxRunDuration'] })
    .refine((g) => !g.fallbackToStandard || g.machineTypeTiers.every((t) => t.standardPricePerHour !== undefined), {
      message: STANDARD_PRICE_MESSAGE,
      path: ['fallbackToStandard'],
    }),
  {
    description: 'Where and how runner hosts are created on Compute Engine spot VMs.',
    'x-kubernetes-validations': [
      {
        rule: '!has(self.fallbackToStandard) || !self.fallbackToStandard || self.machineTypeTiers.all(t, has(t.standardPricePerHour))',
        message: STANDARD_PRICE_MESSAGE,
        fieldPath: '.fallbackToStandard',
      },
      {
        rule: `!has(self.maxRunDuration) || (duration(self.maxRunDuration) >= duration('${MIN_MAX_RUN_DURATION}') && duration(self.maxRunDuration) <= duration('${MAX_MAX_RUN_DURATION}'))`,
        message: MAX_RUN_DURATION_MESSAGE,
        fieldPath: '.maxRunDuration',
      },
    ],
  },
);

function runDurationInRange(d: string): boolean {
  try {
    const ms = parseDuration(d);
    return ms >= parseDuration(MIN_MAX_RUN_DURATION) && ms <= parseDuration(MAX_MAX_RUN_DURATION);
  } catch {
    // An unreadable duration is the field's own refusal, said once.
    return true;
  }
}
