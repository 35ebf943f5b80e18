// What our nodes lent, from the peer's own Job records: each finished Job's
// completionTime − startTime, times the GPUs it requested, at the price.
// Both sides read the same records, so a Job whose record cannot be measured
// is counted apart with the reason rather than guessed at.
import type { V1Job } from '@kubernetes/client-node';
import type { Accounting } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { CLAIMED_BY_ANNOTATION, HOST_ANNOTATION, parseClaimant } from '../../../src/providers/peerqueue/types.js';
import { GPU, jobRequests } from './fit.js';

/** How many unmeasured Jobs status lists by name. */
export const UNMEASURED_LISTED = 32;

export type Measure =
  | { kind: 'unfinished'; job: string; node: string }
  | { kind: 'measured'; job: string; node: string; gpus: number; seconds: number; gpuSeconds: number }
  | { kind: 'unmeasured'; job: string; node: string; reason: string };

const isTrue = (job: V1Job, type: string) => job.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;

/** Our node that ran the Job: from the claim, else the host annotation's last part. */
export function nodeOf(job: V1Job): string {
  const a = job.metadata?.annotations ?? {};
  return parseClaimant(a[CLAIMED_BY_ANNOTATION])?.node ?? a[HOST_ANNOTATION]?.split('/').pop() ?? '';
}

export function measure(job: V1Job): Measure {
  const name = job.metadata?.name ?? '';
  const node = nodeOf(job);
  const unmeasured = (reason: string): Measure => ({ kind: 'unmeasured', job: name, node, reason });
  if (isTrue(job, 'Failed')) return unmeasured('the Job failed, and a failed Job has no completionTime');
  if (!isTrue(job, 'Complete')) return { kind: 'unfinished', job: name, node };
  const start = Date.parse(String(job.status?.startTime ?? ''));
  const end = Date.parse(String(job.status?.completionTime ?? ''));
  if (!Number.isFinite(start)) return unmeasured('no startTime');
  if (!Number.isFinite(end)) return unmeasured('no completionTime');
  if (end < start) return unmeasured('clock skew: completionTime before startTime');
  const requests = jobRequests(job);
  if (!requests.ok) return unmeasured(`requests cannot be read: ${requests.message}`);
  const gpus = Number(requests.requests[GPU] ?? 0n) / 1000;
  const seconds = (end - start) / 1000;
  return { kind: 'measured', job: name, node, gpus, seconds, gpuSeconds: gpus * seconds };
}

/** US dollars for GPU-seconds at a price per GPU-hour, to a millionth, so sums do not drift. */
export function amountUSD(gpuSeconds: number, pricePerGPUHour: number): number {
  return Math.round((gpuSeconds * pricePerGPUHour * 1e6) / 3600) / 1e6;
}

function summary(measures: readonly Measure[], pricePerGPUHour: number, now: number): Accounting {
  const measured = measures.filter((m) => m.kind === 'measured');
  const unmeasured = measures.filter((m) => m.kind === 'unmeasured');
  const gpuSeconds = measured.reduce((sum, m) => sum + m.gpuSeconds, 0);
  return {
    gpuSeconds,
    amountUSD: amountUSD(gpuSeconds, pricePerGPUHour),
    jobs: measured.length,
    unmeasured: unmeasured.length,
    ...(unmeasured.length > 0 ? { unmeasuredJobs: unmeasured.slice(0, UNMEASURED_LISTED).map((m) => ({ job: m.job, reason: m.reason })) } : {}),
    lastComputedAt: rfc3339(new Date(now)),
  };
}

export interface Ledger {
  /** The PeerFleet's whole: status.accounting. */
  total: Accounting;
  /** Per node: status.hosts[].lent. */
  hosts: Map<string, Accounting>;
}

/** The order of localeCompare, without building a collator at each comparison. */
const byName = new Intl.Collator();

/** The accounting of the Jobs a PeerFleet claimed; unfinished Jobs are not counted yet. */
export function account(jobs: readonly V1Job[], pricePerGPUHour: number, now: number): Ledger {
  const measures = [...jobs].sort((a, b) => byName.compare(a.metadata?.name ?? '', b.metadata?.name ?? '')).map(measure);
  const byNode = new Map<string, Measure[]>();
  for (const m of measures) byNode.set(m.node, [...(byNode.get(m.node) ?? []), m]);
  return {
    total: summary(measures, pricePerGPUHour, now),
    hosts: new Map([...byNode].map(([node, list]) => [node, summary(list, pricePerGPUHour, now)])),
  };
}
