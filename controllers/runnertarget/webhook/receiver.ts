// What the controller answers a GitHub webhook delivery, apart from HTTP
// plumbing (server.ts). Nothing of an unsigned or wrongly signed delivery
// is acted on: the body is checked against the webhook secret of every
// RunnerTarget that has one (spec.github.webhookSecretRef) before it is
// parsed, and only the targets whose own secret signed it may be asked for
// a check. A delivery can only make a check come sooner; it never launches
// or deletes anything itself.
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { RunnerTarget } from '../../../src/api/index.js';
import { objectKey } from '../../../src/kube/resource.js';
import { parseWorkflowJob, targetsForJob } from './delivery.js';
import { parseSignature, signedWith } from './signature.js';

/** Every value of the deliveries metric's result label. */
export const DELIVERY_RESULTS = [
  'accepted',
  'coalesced',
  'ignored',
  'ping',
  'unauthorized',
  'malformed',
  'too_large',
  'unsupported_media_type',
  'method_not_allowed',
  'not_leader',
  'error',
] as const;
export type DeliveryResult = (typeof DELIVERY_RESULTS)[number];

export interface Answer {
  status: number;
  result: DeliveryResult;
  message: string;
  headers?: Record<string, string>;
}

export interface ReceiverDeps {
  /** Whether this replica leads: only the leader's checks run, so only it takes deliveries. */
  leader(): boolean;
  /** The RunnerTargets this controller watches (its cache). */
  targets(): readonly RunnerTarget[];
  /** The target's webhook secret; undefined when it has none or it cannot be read now. */
  secret(target: RunnerTarget): Promise<string | undefined>;
  /** RunnerTargetReconciler.requestCheck. */
  requestCheck(key: string): boolean;
  log?: Logger;
}

const answer = (status: number, result: DeliveryResult, message: string, headers?: Record<string, string>): Answer => ({ status, result, message, ...(headers ? { headers } : {}) });

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** The refusals decided from the request line and headers alone, before any of the body is read. */
export function refuseBeforeBody(method: string | undefined, headers: IncomingHttpHeaders, leader: boolean): Answer | undefined {
  if (method !== 'POST') return answer(405, 'method_not_allowed', 'only POST is accepted', { allow: 'POST' });
  // GitHub's own redelivery (a person's, or the emulator's retry) then reaches the leader.
  if (!leader) return answer(503, 'not_leader', 'this replica is not the leader; redeliver later', { 'retry-after': '10' });
  const type = (header(headers, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') return answer(415, 'unsupported_media_type', 'the webhook must send application/json: set its content type to application/json in GitHub');
  if (!header(headers, 'x-github-event')) return answer(400, 'malformed', 'no X-GitHub-Event header');
  return undefined;
}

/** The answer to a whole delivery whose headers passed refuseBeforeBody. */
export async function receiveDelivery(headers: IncomingHttpHeaders, body: Buffer, deps: ReceiverDeps): Promise<Answer> {
  const digest = parseSignature(header(headers, 'x-hub-signature-256'));
  if (!digest) return answer(401, 'unauthorized', 'no valid X-Hub-Signature-256 header');
  const signers: RunnerTarget[] = [];
  for (const t of deps.targets()) {
    if (!t.spec.github.webhookSecretRef || t.metadata?.deletionTimestamp) continue;
    const secret = await deps.secret(t);
    if (secret !== undefined && signedWith(digest, body, secret)) signers.push(t);
  }
  if (!signers.length) return answer(401, 'unauthorized', 'the signature matches the webhook secret of no RunnerTarget');
  const event = header(headers, 'x-github-event')!;
  if (event === 'ping') return answer(200, 'ping', 'pong');
  if (event !== 'workflow_job') return answer(200, 'ignored', `event ${event.slice(0, 40)} is not used`);
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return answer(400, 'malformed', 'the body is not JSON');
  }
  const parsed = parseWorkflowJob(json);
  if (!parsed.ok) return answer(400, 'malformed', parsed.error);
  const matched = targetsForJob(parsed.delivery, signers);
  if (!matched.length) return answer(200, 'ignored', 'no RunnerTarget serves this job');
  const requested = matched.filter((t) => deps.requestCheck(objectKey(t)));
  deps.log?.debug({ targets: requested.map(objectKey), job: parsed.delivery.workflow_job.id }, 'workflow_job queued: checks requested');
  if (!requested.length) return answer(202, 'coalesced', 'a check of each matching RunnerTarget was requested moments ago');
  return answer(202, 'accepted', `a check of ${requested.length} RunnerTarget(s) was requested`);
}
