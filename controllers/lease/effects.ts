// The Lease's long effects, run by the effect runner off the reconcile
// workers. Each reports its outcome as a result and never throws: a result
// is what the next pass decides on.
import type { Logger } from 'pino';
import type { Lease, LeaseStatus } from '../../src/api/index.js';
import { errorText } from '../../src/kube/errors.js';
import type { EventRecorder } from '../../src/kube/events.js';
import { rfc3339 } from '../../src/kube/conditions.js';
import type { LeaseDriver } from './driver.js';
import type { RecordStore } from '../../src/kube/leaserecords.js';
import { sealedLease } from './policy/trust.js';
import type { LeaseEffectResult } from './decision.js';
import { PROGRESS_INTERVAL_MS, ProgressThrottle } from './progress.js';

export interface EffectContext {
  driver: LeaseDriver;
  records: RecordStore;
  events: EventRecorder;
  log: Logger;
  now: () => number;
  /** Writes status fields with the Lease's resourceVersion (retried on a fresh read of the same attempt). */
  record: (lease: Lease, fields: Partial<LeaseStatus>) => Promise<Lease>;
  /** Writes a progress message; never throws. */
  progress: (lease: Lease, message: string) => Promise<Lease>;
}

/**
 * Runs acquire and records a launched machine at once: the machine exists
 * from that moment, and the record is what lets any controller release it.
 */
export async function acquireEffect(ctx: EffectContext, lease: Lease, signal: AbortSignal): Promise<LeaseEffectResult> {
  // The latest stderr line also shows in status.message while acquire runs
  // (throttled; acquire never waits for these writes). What they write is
  // kept as the Lease the result is recorded on.
  let current = lease;
  const progress = new ProgressThrottle(PROGRESS_INTERVAL_MS, async (line) => {
    current = await ctx.progress(current, `acquiring from ${current.status?.offer ?? 'the offer'}: ${line}`);
  });
  const result = await ctx.driver.acquire(
    lease,
    (line) => {
      void ctx.events.record(lease, 'Normal', 'Provider', line);
      progress.push(line);
    },
    signal,
  );
  await progress.stop();
  // A machine that came back after the acquire was cancelled exists all the
  // same, and is recorded all the same: cancelled at the end of a shutdown's
  // grace, this write is the only trace of it the next leader gets (the
  // result dies with the process), and withdrawn, the release then has its
  // state. The write lands before the runner's drain ends, so before the
  // leader lease is given up.
  if (result.kind !== 'launched') return { kind: 'acquire', result, recorded: false };
  try {
    await ctx.record(current, { providerState: result.state, machine: result.machine, message: 'machine acquired; installing the agent' } as Partial<LeaseStatus>);
    return { kind: 'acquire', result, recorded: true };
  } catch (err) {
    ctx.log.warn({ lease: lease.metadata?.name, err: errorText(err) }, 'acquired machine not recorded yet; the next pass records it');
    return { kind: 'acquire', result, recorded: false };
  }
}

export async function probeEffect(ctx: EffectContext, lease: Lease, kind: 'prepare' | 'check', signal: AbortSignal): Promise<LeaseEffectResult> {
  const check = kind === 'prepare' ? await ctx.driver.prepare(lease, signal) : await ctx.driver.check(lease, signal);
  return { kind, check, at: ctx.now() };
}

/**
 * Releases the machine the way the controller's record says. A Lease with no
 * record never had a machine launched by this controller (every launch
 * writes one first): there is nothing to release, and nothing its status
 * says is run. A confirmed release is marked in the record, which is deleted
 * when the Lease ends.
 */
export async function releaseEffect(ctx: EffectContext, lease: Lease, signal: AbortSignal): Promise<LeaseEffectResult> {
  try {
    const record = await ctx.records.get(lease.metadata!.uid!);
    if (!record) {
      ctx.log.warn({ lease: `${lease.metadata?.namespace}/${lease.metadata?.name}` }, 'no record of a machine for this Lease: nothing to release');
      return { kind: 'release', at: ctx.now() };
    }
    await ctx.driver.release(sealedLease(lease, record), signal);
    const at = ctx.now();
    await ctx.records.put({ ...record, releasedAt: rfc3339(new Date(at)) });
    return { kind: 'release', at };
  } catch (err) {
    return { kind: 'release', error: errorText(err), at: ctx.now() };
  }
}
