// Ready and Idle: one probe per check interval (sooner when a deadline or a
// change of spec or activity comes first), judged against the idle window
// and maxLifetime.
import type { LeaseStatus } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import type { MachineCheck } from '../driver.js';
import { isCheckFailure, type CheckFailure, type Phase } from '../machine.js';
import { doneOf, waiting, type Decision, type PhaseInput } from '../decision.js';
import { checkInputsOf } from '../status.js';
import { ACTIVITY_ANNOTATION, idleDeadline, idleTimeoutMs, lastActivity } from '../../../src/api/activity.js';
import { annotatedActivity, judgeUsage, nextCheckIn } from '../policy/timing.js';
import { busyOf, nextUsage } from '../policy/busy.js';

export function observeMachine(input: PhaseInput, phase: Extract<Phase, 'Ready' | 'Idle'>): Decision {
  const { lease, now, settings } = input;
  const st = lease.status ?? {};
  if (lease.metadata?.deletionTimestamp) return { event: { type: 'DELETE_REQUESTED', message: 'deleted; releasing the machine' } };
  // maxLifetime ends the Lease whatever a probe would say: no probe first.
  const lifetime = judgeUsage({ now, expiresAt: st.expiresAt, idleTimeoutMs: Infinity, lastActivityMs: now });
  if (lifetime.kind === 'expired') return { event: { type: 'EXPIRED', reason: lifetime.reason, message: lifetime.message } };
  const inputs = checkInputsOf(lease);
  const probed = doneOf(input, 'check', 'prepare');
  if (probed) return { ...judge(input, phase, probed.check, probed.at, inputs), consumed: true };
  // The probe's end re-enqueues the Lease; a deadline does not wait for it.
  if (input.effect?.state === 'running') return { requeueAfter: settings.checkIntervalMs };
  // A pass that comes early with nothing new (typically this controller's
  // own Ready or Idle write coming back through the watch) waits for the
  // check already planned instead of probing again.
  if (waiting(input.wake, now, inputs)) return { requeueAfter: input.wake!.at - now };
  return { start: 'check' };
}

function judge(input: PhaseInput, phase: Extract<Phase, 'Ready' | 'Idle'>, check: MachineCheck, at: number, inputs: string): Decision {
  const { lease, settings } = input;
  const st = lease.status ?? {};
  // A host key that changed, or no SSH endpoint, means this is not the machine that was handed over: it goes at once.
  if (check.kind === 'mismatch' && check.reason !== 'FactsMismatch') return { event: { type: 'LAUNCH_FAILED', reason: check.reason, message: check.message }, wake: null };
  if (check.kind !== 'ok') return failedCheck(input, phase, check, at, inputs);
  // The probe takes time (seconds on a slow link): judge and plan the next
  // check from when it answered, not from before it started, or every check
  // would come one probe late and the release a probe later still.
  const seen = check.usage ?? { jobs: check.busy, sessions: 0, gpuProcesses: 0 };
  const { busy, summary, counted } = busyOf(seen, check.busyWhen);
  const usage = nextUsage(st.usage, seen, counted, summary, busy > 0, rfc3339(new Date(at)));
  // What the probe installed: the next check rewrites keys only when spec.sshKeys differs from it.
  const keysStatus: Partial<LeaseStatus> = { installedKeysHash: check.keysHash, ...(usage ? { usage } : {}) };
  const idleMs = idleTimeoutMs(st);
  const raw = (lease.metadata?.annotations as Record<string, string> | undefined)?.[ACTIVITY_ANNOTATION];
  // The annotation as it stood at the last check (wakes are kept in memory:
  // after a restart a future time counts once more, never more often).
  const annotated = countable(annotatedActivity(raw, at, input.wake?.inputs === inputs), st);
  const recorded = lastActivity({ readyAt: st.readyAt, lastActivityAt: st.lastActivityAt });
  const last = Math.max(recorded, annotated?.at ?? 0, busy ? at : 0);
  const v = judgeUsage({ now: at, expiresAt: st.expiresAt, idleTimeoutMs: idleMs, lastActivityMs: last, busy });
  if (v.kind === 'expired') return { event: { type: 'EXPIRED', reason: v.reason, message: v.message }, wake: null };
  const requeueAfter = nextCheckIn(at, settings.checkIntervalMs, [idleDeadline(st, last)]);
  const wake = { at: at + requeueAfter, inputs };
  const notice = annotated?.future
    ? { reason: 'ActivityInFuture', message: `${ACTIVITY_ANNOTATION} ${raw} is in the future; counted as activity now (${new Date(at).toISOString()}), once. Set it to the time work was seen` }
    : undefined;
  if (v.kind === 'busy') {
    return { event: { type: 'BUSY', message: `busy: ${summary}` }, status: { ...keysStatus, lastActivityAt: rfc3339(new Date(at)) }, wake, requeueAfter, ...(notice ? { notice } : {}) };
  }
  // Activity annotated since the controller last recorded any: the Lease is
  // active within its idle window, so Ready (again, if it was Idle).
  if (annotated && annotated.at > recorded) {
    return {
      event: { type: 'BUSY', message: `activity at ${new Date(annotated.at).toISOString()} (${ACTIVITY_ANNOTATION}); released at ${new Date(annotated.at + idleMs).toISOString()} unless more work is seen` },
      status: { ...keysStatus, lastActivityAt: rfc3339(new Date(annotated.at)) },
      wake,
      requeueAfter,
      ...(notice ? { notice } : {}),
    };
  }
  return {
    event: { type: 'IDLE', message: `idle; released at ${new Date(v.releaseAt).toISOString()} unless work starts` },
    status: { ...keysStatus, idleSince: st.idleSince && phase === 'Idle' ? st.idleSince : rfc3339(new Date(at)) },
    wake,
    requeueAfter,
    // A future time annotated in the second the Lease turned Ready adds no activity, but is still reported.
    ...(notice ? { notice } : {}),
  };
}

/**
 * Activity annotated while the latest check had failed renews nothing, not
 * even once a check succeeds again: only a time from when the Lease last
 * became usable (its Ready condition turned True) on counts.
 */
function countable(annotated: { at: number; future: boolean } | undefined, st: LeaseStatus): { at: number; future: boolean } | undefined {
  const ready = st.conditions?.find((c) => c.type === 'Ready');
  if (!annotated || !ready) return annotated;
  if (ready.status !== 'True') return isCheckFailure(ready.reason) ? undefined : annotated;
  return annotated.at >= (Date.parse(ready.lastTransitionTime) || 0) ? annotated : undefined;
}

/**
 * The machine could not be reached, or no longer matches its Offer. The
 * Lease is not handed out until a check succeeds, and nothing renews its
 * idle window meanwhile (neither the activity annotation nor work a probe
 * reports), so it ends at the deadline the activity recorded before set.
 */
function failedCheck(input: PhaseInput, phase: Extract<Phase, 'Ready' | 'Idle'>, check: Exclude<MachineCheck, { kind: 'ok' }>, at: number, inputs: string): Decision {
  const { lease, settings } = input;
  const st = lease.status ?? {};
  const reason: CheckFailure = check.kind === 'unreachable' ? 'MachineUnreachable' : 'FactsMismatch';
  const why = check.kind === 'unreachable' ? `the machine could not be reached: ${check.message}` : check.message;
  const idleMs = idleTimeoutMs(st);
  const recorded = lastActivity({ readyAt: st.readyAt, lastActivityAt: st.lastActivityAt });
  const v = judgeUsage({ now: at, expiresAt: st.expiresAt, idleTimeoutMs: idleMs, lastActivityMs: recorded });
  if (v.kind === 'expired') return { event: { type: 'EXPIRED', reason: v.reason, message: `${v.message} (latest check: ${why})` }, wake: null };
  const releaseAt = v.kind === 'idle' ? v.releaseAt : recorded + idleMs;
  const expires = Date.parse(st.expiresAt ?? '') || Infinity;
  const requeueAfter = nextCheckIn(at, settings.checkIntervalMs, [expires, releaseAt]);
  return {
    event: { type: 'CHECK_FAILED', reason, message: `${why}; not handed out until a check succeeds; released at ${new Date(releaseAt).toISOString()} unless one does and work starts` },
    status: { idleSince: st.idleSince && phase === 'Idle' ? st.idleSince : rfc3339(new Date(at)) },
    wake: { at: at + requeueAfter, inputs },
    requeueAfter,
  };
}
