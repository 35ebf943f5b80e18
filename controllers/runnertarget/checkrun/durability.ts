// The durability guard of one check. Every provider change is preceded by a
// status write of its receipt; once such a write fails, conflicts, or its
// outcome stays unknown after a read-back, status no longer says what the
// controller did, so every further provider call of the check is refused
// (Durable=False with the reason) and the check ends in error. A conflict
// means another writer moved the object: it is never "fixed" by
// overwriting, and a later successful write in the same check does not
// restore durability.
import { RUNNERTARGET_RESOURCE, type Receipt, type RunnerTarget, type RunnerTargetStatus } from '../../../src/api/index.js';
import { statusCode } from '../../../src/kube/client.js';
import { errorText } from '../../../src/kube/errors.js';
import type { StatusWriter } from '../../../src/kube/status.js';

export type WriteOutcome =
  | { kind: 'written'; resourceVersion: string }
  | { kind: 'failed'; message: string }
  | { kind: 'conflict'; message: string }
  /** The write's answer was lost (timeout, reset) and a read-back could not settle it. */
  | { kind: 'unknown'; message: string };

export const NOT_DURABLE_REASONS = { failed: 'StatusWriteFailed', conflict: 'StatusConflict', unknown: 'StatusUnknown' } as const;
export type NotDurableReason = (typeof NOT_DURABLE_REASONS)[keyof typeof NOT_DURABLE_REASONS];

export class NotDurableError extends Error {
  constructor(
    readonly call: string,
    readonly reason: NotDurableReason,
    readonly detail: string,
  ) {
    super(`refused ${call}: status is not durable (${reason}: ${detail}); no provider call is made for the rest of this check`);
    this.name = 'NotDurableError';
  }
}

export interface DurableCondition {
  type: 'Durable';
  status: 'True' | 'False';
  reason: string;
  message: string;
}

export class DurabilityGuard {
  private broken: { reason: NotDurableReason; message: string } | undefined;
  private readonly refusedCalls: string[] = [];

  /** Records the outcome of a status write; the first failure stays. */
  record(outcome: WriteOutcome): void {
    if (outcome.kind === 'written' || this.broken) return;
    this.broken = { reason: NOT_DURABLE_REASONS[outcome.kind], message: outcome.message };
  }

  get durable(): boolean {
    return this.broken === undefined;
  }

  /** Throws NotDurableError instead of letting `call` (e.g. "compute.instances.insert pool-a1") reach a provider. */
  permit(call: string): void {
    if (!this.broken) return;
    this.refusedCalls.push(call);
    throw new NotDurableError(call, this.broken.reason, this.broken.message);
  }

  /** The calls refused so far, in order. */
  get refused(): readonly string[] {
    return this.refusedCalls;
  }

  condition(): DurableCondition {
    if (!this.broken) return { type: 'Durable', status: 'True', reason: 'StatusWritten', message: 'every receipt was written before its provider change' };
    const refused = this.refusedCalls.length ? `; refused ${this.refusedCalls.length} provider call${this.refusedCalls.length === 1 ? '' : 's'}` : '';
    return {
      type: 'Durable',
      status: 'False',
      reason: this.broken.reason,
      message: `a status write ${this.broken.reason === 'StatusConflict' ? 'conflicted' : this.broken.reason === 'StatusUnknown' ? 'has an unknown outcome' : 'failed'} (${this.broken.message}); the check stopped before any further provider change${refused}. Find the other writer before the next check; do not edit status to clear this`,
    };
  }
}

/**
 * A write whose answer was lost, settled by reading the object back: it
 * landed only if the read status carries the receipt in the phase written.
 */
export function readBackOutcome(read: { status?: Pick<RunnerTargetStatus, 'receipts'> | undefined; resourceVersion?: string | undefined } | undefined, receipt: Pick<Receipt, 'id' | 'phase'>, lost: string): WriteOutcome {
  if (!read) return { kind: 'unknown', message: `${lost}; the read-back failed too` };
  const found = read.status?.receipts?.find((r) => r.id === receipt.id);
  if (found?.phase === receipt.phase && read.resourceVersion) return { kind: 'written', resourceVersion: read.resourceVersion };
  return { kind: 'unknown', message: `${lost}; the read-back shows receipt ${receipt.id} ${found ? `as ${found.phase}` : 'missing'}` };
}

/** Where a receipt's status write goes, and where the object is read back when its answer was lost. */
export interface ReceiptWriteApi {
  status: Pick<StatusWriter, 'write'>;
  read(namespace: string, name: string): Promise<RunnerTarget | undefined>;
}

/** Writes a status carrying `receipt` and says how the write went, for the guard; `target` is the object to go on with. */
export async function writeReceiptStatus(api: ReceiptWriteApi, target: RunnerTarget, status: RunnerTargetStatus, receipt: Pick<Receipt, 'id' | 'phase'>): Promise<{ outcome: WriteOutcome; target: RunnerTarget }> {
  try {
    const written = await api.status.write(RUNNERTARGET_RESOURCE, target, status);
    return { outcome: { kind: 'written', resourceVersion: written.metadata?.resourceVersion ?? '' }, target: written };
  } catch (err) {
    const code = statusCode(err);
    if (code === 409) return { outcome: { kind: 'conflict', message: `another writer changed RunnerTarget ${target.metadata!.namespace}/${target.metadata!.name} since this check read it (HTTP 409)` }, target };
    if (code !== undefined) return { outcome: { kind: 'failed', message: `HTTP ${code}: ${errorText(err).slice(0, 300)}` }, target };
    const read = await api.read(target.metadata!.namespace!, target.metadata!.name!).catch(() => undefined);
    const outcome = readBackOutcome(read ? { status: read.status, resourceVersion: read.metadata?.resourceVersion } : undefined, receipt, errorText(err).slice(0, 300));
    return { outcome, target: outcome.kind === 'written' && read ? read : target };
  }
}
