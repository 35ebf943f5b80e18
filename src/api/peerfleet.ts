// PeerFleet: another fleet's queue that our idle nodes may run jobs from.

import { z } from 'zod';
import { DURATION_MAX_LENGTH, DURATION_PATTERN, parseDuration } from './duration.js';
import {
  LabelSelectorSchema,
  kindSchema,
  conditions,
  count,
  duration,
  kube,
  message,
  namespaceName,
  re,
  REASON_PATTERN,
  localSecretKeyRef,
  timestamp,
  usd,
} from './common.js';

export const PEERFLEET_NAMES = { kind: 'PeerFleet', plural: 'peerfleets', singular: 'peerfleet', shortNames: ['lhpf'] } as const;

export const DEFAULT_IDLE_WINDOW = '10m';
export const DEFAULT_POLL_INTERVAL = '30s';
export const DEFAULT_MAX_SESSION_DURATION = '0s';
export const DEFAULT_MAX_JOB_DURATION = '24h';
/** The shortest pollInterval: every poll reads the Secrets and asks the peer. */
export const MIN_POLL_INTERVAL = '5s';
export const MIN_POLL_INTERVAL_MS = 5_000;

const POLL_INTERVAL_MESSAGE = `pollInterval must be a duration of at least ${MIN_POLL_INTERVAL} and at most 2562047h (e.g. "30s"): each poll reads the Secrets and asks the peer's API server`;

function atLeastMinPoll(s: string): boolean {
  try {
    return parseDuration(s) >= MIN_POLL_INTERVAL_MS;
  } catch {
    return false;
  }
}

/**
 * HTTPS anywhere; plain HTTP only on loopback (127.0.0.0/8, localhost, [::1])
 * or a tailnet address (100.64.0.0/10).
 */
export const ORIGIN_PATTERN =
  '^(https://[^\\s/?#]+|http://(localhost|127(\\.[0-9]{1,3}){3}|\\[::1\\]|100\\.(6[4-9]|[7-9][0-9]|1[01][0-9]|12[0-7])(\\.[0-9]{1,3}){2})(:[0-9]{1,5})?)(/[^\\s?#]*)?$';

export const HOST_STATES = ['Busy', 'Waiting', 'Available', 'Lending', 'Draining', 'Unlisted'] as const;
export type PeerHostState = (typeof HOST_STATES)[number];

export const PeerFleetSpecSchema = z
  .object({
    origin: z
      .string()
      .min(1)
      .max(2048)
      .regex(re(ORIGIN_PATTERN), {
        message: 'origin must be an https:// URL (plain http:// only on loopback or a tailnet address)',
      })
      .describe(
        'URL of the API server of the peer cluster, e.g. https://peer.example.com:6443. Must be HTTPS, except on loopback or a tailnet address (100.64.0.0/10).',
      ),
    namespace: namespaceName('Namespace in the peer cluster that holds its queue of lendable Jobs.'),
    credentialSecretRef: localSecretKeyRef(
      'The Secret key, in the namespace of the PeerFleet, holding the bearer token for the peer namespace (a ServiceAccount token of the peer cluster). It is never given to lent jobs.',
      { defaultKey: 'token', keyMeaning: 'the bearer token', field: 'spec.credentialSecretRef' },
    ),
    caSecretRef: localSecretKeyRef(
      'The Secret key, in the namespace of the PeerFleet, holding the PEM certificate authority that signed the origin. Omit to trust the system roots.',
      { defaultKey: 'ca.crt', keyMeaning: 'the PEM bundle', field: 'spec.caSecretRef' },
    ).optional(),
    lendableNodes: kube(
      LabelSelectorSchema.refine(
        (s) => Object.keys(s.matchLabels ?? {}).length > 0 || (s.matchExpressions?.length ?? 0) > 0,
        'lendableNodes must select nodes by at least one label or expression',
      ),
      {
        description:
          'Which of our nodes may be lent, by label, among those an admin opted in for the namespace of this PeerFleet: the node label leasehold.dev/lendable=true and the node annotation leasehold.dev/lendable-namespaces listing the namespace (or *). It must name at least one label or expression, so no node is lent by accident.',
        'x-kubernetes-validations': [
          {
            rule: '(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)',
            message: 'lendableNodes must select nodes by at least one label or expression',
          },
        ],
      },
    ),
    idleWindow: duration(
      'How long a node must have had none of our own work before it is lent, e.g. 10m. Defaults to 10m.',
    ).default(DEFAULT_IDLE_WINDOW),
    pollInterval: kube(
      z
        .string()
        .max(DURATION_MAX_LENGTH)
        .regex(re(DURATION_PATTERN))
        .refine(atLeastMinPoll, { message: POLL_INTERVAL_MESSAGE }),
      {
        description: `How often our queue and the peer queue are read, e.g. 30s; at least ${MIN_POLL_INTERVAL}. Defaults to 30s.`,
        'x-kubernetes-validations': [{ rule: `duration(self) >= duration('${MIN_POLL_INTERVAL}')`, message: POLL_INTERVAL_MESSAGE }],
      },
    ).default(DEFAULT_POLL_INTERVAL),
    pricePerGPUHour: usd(
      'Price the peer pays, in US dollars per GPU-hour; turns the seconds in the peer job records into an amount.',
    ),
    ownWorkValuePerGPUHour: usd(
      'What our own queued work is worth per GPU-hour when a job does not say. Lending drains when our work is worth more than pricePerGPUHour; a tie keeps lending. Omit to drain whenever our work is queued.',
    ).optional(),
    maxSessionDuration: duration(
      'Longest a node lends in one session before it drains, e.g. 8h. 0s (the default) leaves sessions open-ended.',
    ).default(DEFAULT_MAX_SESSION_DURATION),
    maxJobDuration: duration(
      'Longest a peer Job may run here, e.g. 6h: a peer Job whose spec.activeDeadlineSeconds is unset or above it is refused (a drain never cuts a lent Job, so each must end on its own). Defaults to 24h.',
    ).default(DEFAULT_MAX_JOB_DURATION),
    listed: z
      .boolean()
      .default(true)
      .describe('Whether our nodes are offered to the peer. Setting it to false drains running sessions. Defaults to true.'),
    dryRun: z
      .boolean()
      .default(false)
      .describe('Plan only: claim nothing, start no mirror Job and write nothing to the peer; status.plan says per node what would happen. Defaults to false.'),
  })
  .strict()
  .describe('Which peer queue to take work from, with which credential, and which of our nodes may run it.');
export type PeerFleetSpec = z.infer<typeof PeerFleetSpecSchema>;

export const VerdictSchema = z
  .object({
    ready: z.boolean().describe('Whether the peer API server answered with our bearer token.'),
    code: z
      .string()
      .max(64)
      .regex(re(REASON_PATTERN))
      .optional()
      .describe('The verdict in one CamelCase word, e.g. Ready, PeerRefused, SecretAbsent, KeyAbsent or Unknown.'),
    reasons: z
      .array(message('One reason.', 1024))
      .max(16)
      .default([])
      .describe('Why the fleet cannot lend, and what to fix; empty when ready.'),
    failureClass: z
      .enum(['infra_down', 'config'])
      .optional()
      .describe('For PeerUnreachable and Unknown: infra_down when the peer or our API server did not answer (wait), config when the origin or CA is wrong (fix the spec).'),
    checkedAt: timestamp('When the verdict last changed (it is checked every pollInterval; an unchanged verdict is not written again).').optional(),
  })
  .describe('Whether we can lend to this peer: the Secret resolves and the peer accepts the token.');

export const PeerSessionSchema = z
  .object({
    job: z.string().max(253).describe('Name of the peer Job the node is running.'),
    startedAt: timestamp('When the session started.'),
    drainReason: message('Why the session is draining, when it is.', 1024).optional(),
    claims: z
      .array(z.string().max(36))
      .max(64)
      .optional()
      .describe('UIDs of the peer Jobs this node claimed whose mirror Job was not yet seen, and of the queued Job it will claim next, each written before its claim: after a restart only these are started; any other Job the peer shows as claimed by us is reported, never run.'),
  })
  .describe('The lending session on the node.');

export const AccountingSchema = z
  .object({
    gpuSeconds: z.number().min(0).describe('GPU-seconds of peer jobs our nodes ran, from the peer job records.'),
    amountUSD: usd('gpuSeconds at pricePerGPUHour, in US dollars.'),
    jobs: count('Number of peer jobs counted.').optional(),
    unmeasured: count('Number of peer jobs that ran here but whose records cannot be measured.').optional(),
    unmeasuredJobs: z
      .array(
        z
          .object({
            job: z.string().max(253).describe('Name of the peer Job.'),
            reason: message('Why its record cannot be measured, e.g. no completionTime, or completionTime before startTime.', 256),
          })
          .describe('A peer job whose record cannot be measured.'),
      )
      .max(32)
      .optional()
      .describe('The first 32 unmeasured peer jobs, with why.'),
    ledger: z
      .object({
        gpuSeconds: z.number().min(0).describe('GPU-seconds of the peer jobs our nodes ran, from our ledger (status.ledger).'),
        amountUSD: usd('Those GPU-seconds at pricePerGPUHour, in US dollars.'),
        jobs: count('Number of peer jobs our ledger holds.'),
      })
      .optional()
      .describe('The same, from our own ledger of what our cluster saw run: the peer cannot edit or delete it.'),
    mismatched: count('Number of peer jobs whose record differs from our ledger, or is gone.').optional(),
    mismatchedJobs: z
      .array(
        z
          .object({
            job: z.string().max(253).describe('Name of the peer Job.'),
            uid: z.string().max(36).describe('UID of the peer Job.'),
            node: z.string().max(253).describe('Our node that ran it.'),
            ledgerGPUSeconds: z.number().min(0).describe('GPU-seconds by our ledger.'),
            peerGPUSeconds: z.number().min(0).optional().describe('GPU-seconds by the peer record; absent when the record is gone or cannot be measured.'),
            reason: message('How the peer record differs, e.g. the Job is gone, or its completionTime is earlier than our mirror ended.', 256),
          })
          .describe('A peer job whose record differs from our ledger.'),
      )
      .max(32)
      .optional()
      .describe('The first 32 peer jobs whose record differs from our ledger, with how.'),
    lastComputedAt: timestamp('When the accounting was last computed.').optional(),
  })
  .describe('What our nodes earned from the peer, computed from the peer records both sides read, checked against our own ledger.');
export type Accounting = z.infer<typeof AccountingSchema>;

export const LedgerEntrySchema = z
  .object({
    uid: z.string().max(36).describe('UID of the peer Job.'),
    job: z.string().max(253).describe('Name of the peer Job.'),
    node: z.string().max(253).describe('Our node that ran it.'),
    gpus: z.number().min(0).describe('GPUs its mirror Job requested.'),
    startedAt: timestamp('When its mirror Job started, by our cluster.'),
    completedAt: timestamp('When its mirror Job completed, by our cluster.'),
  })
  .describe('One peer job our node ran to completion, as our cluster saw its mirror Job.');
export type LedgerEntry = z.infer<typeof LedgerEntrySchema>;

export const LedgerSchema = z
  .object({
    entries: z.array(LedgerEntrySchema).max(256).default([]).describe('The latest 256 peer jobs our nodes ran to completion, oldest first.'),
    earlier: z
      .array(
        z
          .object({
            node: z.string().max(253).describe('Name of our node; `*` for the nodes with the fewest jobs summed together, once more than 1,024 nodes have totals.'),
            gpuSeconds: z.number().min(0).describe('GPU-seconds of its older peer jobs.'),
            jobs: count('Number of its older peer jobs.'),
          })
          .describe('The totals of one node\'s peer jobs that left entries.'),
      )
      .max(1024)
      .optional()
      .describe('Per node, the totals of the peer jobs that no longer fit in entries.'),
  })
  .describe('Our own record of the peer jobs our nodes ran, written by the controller from the mirror Jobs alone, so that the peer editing or deleting its Job records shows as a difference in accounting.');
export type PeerLedger = z.infer<typeof LedgerSchema>;

export const PeerHostSchema = z
  .object({
    node: z.string().max(253).describe('Name of our node.'),
    state: z
      .enum(HOST_STATES)
      .describe(
        'Busy (our work runs there), Waiting (idle, within the idle window), Available (may lend, nothing to run), Lending (runs a peer job), Draining (finishing a peer job, taking no more) or Unlisted (not listed for lending, or not opted in for this namespace).',
      ),
    since: timestamp('When the node entered this state.').optional(),
    idleSince: timestamp('When the node was last seen without our work, while it stays so; the idle window counts from here.').optional(),
    reason: z.string().max(64).regex(re(REASON_PATTERN)).optional().describe('Why the node is in this state, in one CamelCase word.'),
    message: message('Why the node is in this state, and what would change it.', 1024).optional(),
    session: PeerSessionSchema.optional(),
    lent: AccountingSchema.optional().describe('What this node lent: the peer jobs it ran, from the peer job records.'),
  })
  .describe('One of our lendable nodes.');

export const PLAN_ACTIONS = ['Claim', 'Wait', 'Drain', 'None'] as const;

export const PlanStepSchema = z
  .object({
    node: z.string().max(253).describe('Name of our node.'),
    action: z.enum(PLAN_ACTIONS).describe('Claim (would claim a peer Job), Wait (idle window or the peer), Drain (would stop claiming) or None.'),
    job: z.string().max(253).optional().describe('The peer Job a Claim would take.'),
    message: message('Why.', 1024),
  })
  .describe('What one node would do in this pass, in a dry run.');

export const PeerFleetStatusSchema = z
  .object({
    observedGeneration: count('The metadata.generation this status was computed from.').optional(),
    conditions: conditions('Ready: the peer answers with our token and lending can start.').optional(),
    verdict: VerdictSchema.optional(),
    summary: message('Host counts by state, e.g. "2 Lending, 1 Draining, 3 Available".', 256).optional(),
    hosts: z.array(PeerHostSchema).max(1024).optional().describe('Each node lendableNodes selects, and what it is doing: at most 1,024 (nodes already listed first, then by name); the summary counts the others, which are left alone. Then, while there is room, the selected nodes an admin opted in for lending but not for this namespace, Unlisted with reason NotOptedIn.'),
    accounting: AccountingSchema.optional(),
    ledger: LedgerSchema.optional(),
    plan: z.array(PlanStepSchema).max(1024).optional().describe('With spec.dryRun: what each node would do, and why. Absent otherwise.'),
  })
  .describe('The observed state of lending to the peer fleet.');
export type PeerFleetStatus = z.infer<typeof PeerFleetStatusSchema>;

export const PeerFleetSchema = kindSchema(PEERFLEET_NAMES.kind, PeerFleetSpecSchema, PeerFleetStatusSchema, 'A PeerFleet lends our idle nodes to another cluster: while a node has none of our work, it runs Jobs from the peer queue, without our credentials, and drains without cutting a peer job off once our work returns.');
export type PeerFleet = z.infer<typeof PeerFleetSchema>;
