// Reading a Lease's status back into the machine's terms, and writing the
// machine's step out as status: phase, reason, conditions, endReason.
import { fitText, LAST_RELEASE_ERROR_MAX_CHARS, type Lease, type LeaseStatus } from '../../src/api/index.js';
import { setCondition } from '../../src/kube/conditions.js';
import { isCheckFailure, type LeaseContext, type LeaseEvent, type Phase, type Step } from './machine.js';
import { ACTIVITY_ANNOTATION } from '../../src/api/activity.js';

export { failedCheckOf } from '../../src/api/check-failure.js';

export function phaseOf(lease: Lease): Phase {
  return (lease.status?.phase ?? 'Pending') as Phase;
}

export function contextOf(lease: Lease): Partial<LeaseContext> {
  const failure = lease.status?.phase === 'Releasing' ? failureOf(lease) : undefined;
  return {
    reason: lease.status?.reason ?? 'Created',
    message: lease.status?.message ?? '',
    attempt: lease.status?.launch?.attempt ?? 0,
    ...(failure ? { failure } : {}),
  };
}

/**
 * A Lease releasing because its launch failed keeps that failure in its
 * Ready condition, as the condition's reason; any other Releasing Lease's
 * says Releasing. (Older controllers wrote the reason as Failed:<reason>.)
 */
function failureOf(lease: Lease): { reason: string; message: string } | undefined {
  const ready = lease.status?.conditions?.find((c) => c.type === 'Ready');
  if (!ready?.reason || ready.status !== 'False' || ready.reason === 'Releasing') return undefined;
  return { reason: ready.reason.replace(/^Failed:/, ''), message: ready.message ?? '' };
}

/** What a check depends on besides the machine: a change of spec (sshKeys) or of the activity annotation is looked at without waiting. */
export function checkInputsOf(lease: Lease): string {
  const annotation = (lease.metadata?.annotations as Record<string, string> | undefined)?.[ACTIVITY_ANNOTATION] ?? '';
  return `${lease.metadata?.generation ?? 0}|${annotation}`;
}

/**
 * Why a Lease ends, fixed by the event that starts its end: the failure, the
 * deadline that passed, or the delete. Undefined while it is not ending.
 */
export function endReasonFor(prev: LeaseStatus | undefined, next: Step, event: LeaseEvent): string | undefined {
  if (prev?.endReason) return prev.endReason;
  if (next.phase !== 'Releasing' && next.phase !== 'Released' && next.phase !== 'Failed') return undefined;
  if (next.context.failure) return next.context.failure.reason;
  if (event.type === 'DELETE_REQUESTED') return 'Deleted';
  return 'reason' in event ? event.reason : next.context.reason;
}

export function conditionsFor(prev: LeaseStatus['conditions'], next: Step, generation: number | undefined, now: Date): LeaseStatus['conditions'] {
  const scheduled =
    next.phase === 'Pending'
      ? { type: 'Scheduled', status: 'False' as const, reason: next.context.reason, message: next.context.message }
      : { type: 'Scheduled', status: 'True' as const, reason: 'OfferChosen', message: 'an Offer was chosen and a machine requested' };
  let conditions = setCondition(prev, scheduled, generation, now);
  const f = next.context.failure;
  const ready =
    next.phase === 'Idle' && isCheckFailure(next.context.reason)
      ? { type: 'Ready', status: 'False' as const, reason: next.context.reason, message: next.context.message }
      : next.phase === 'Ready' || next.phase === 'Idle'
        ? { type: 'Ready', status: 'True' as const, reason: next.phase === 'Ready' ? 'MachineReady' : 'MachineIdle', message: next.context.message }
        : f
          ? { type: 'Ready', status: 'False' as const, reason: f.reason, message: f.message }
          : { type: 'Ready', status: 'False' as const, reason: next.phase, message: next.context.message };
  if (next.phase !== 'Pending' || prev?.some((c) => c.type === 'Ready')) conditions = setCondition(conditions, ready, generation, now);
  return conditions;
}

/**
 * The status with every free-form text cut to its schema limit: one
 * message over it (a provider's error, a NoMatchingOffer listing hundreds of
 * candidates) would make the API server refuse the whole write.
 */
export function fitLeaseStatus(status: LeaseStatus): LeaseStatus {
  const fitted: LeaseStatus = { ...status };
  if (status.message !== undefined) fitted.message = fitText(status.message);
  if (status.lastReleaseError !== undefined) fitted.lastReleaseError = fitText(status.lastReleaseError, LAST_RELEASE_ERROR_MAX_CHARS);
  if (status.conditions) fitted.conditions = status.conditions.map((c) => ({ ...c, message: fitText(c.message) }));
  return fitted;
}

export function endedAt(lease: Lease): number {
  return Date.parse(lease.status?.releasedAt ?? '') || Date.parse(lease.metadata?.creationTimestamp as unknown as string) || 0;
}

export function describeFacts(f: NonNullable<LeaseStatus['facts']>): string {
  const gpus = f.gpus ? `, ${f.gpus}x ${f.gpuModel ?? 'GPU'}${f.vramGiB ? ` (${f.vramGiB} GiB)` : ''}` : '';
  return `${f.os}/${f.arch}, ${f.cpus} cpu, ${f.memoryGiB} GiB${gpus}`;
}
