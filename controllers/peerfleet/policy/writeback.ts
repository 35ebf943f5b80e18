// The peer Job's status, written back from its mirror's, so that the peer's
// `kubectl get jobs` and `kubectl wait --for=condition=complete` work as if
// the Job had run at home, and both sides account from the same record. The
// API server checks a managedBy Job's status as it checks its own Job
// controller's (src/providers/peerqueue/jobstatus.ts has the rules): a
// terminal condition comes with its interim one (SuccessCriteriaMet before
// Complete, FailureTarget before Failed), completionTime only with Complete
// and never before startTime, startTime never changes once set, counters
// never go down, and a finished Job has no active, ready or terminating pods.
import type { V1Job, V1JobCondition, V1JobStatus } from '@kubernetes/client-node';
import { EXIT_CODE_ANNOTATION, HOST_ANNOTATION, type StatusWrite } from '../../../src/providers/peerqueue/types.js';

export interface WritebackInput {
  /** The peer Job as the peer has it now. */
  peerJob: V1Job;
  /** Our mirror of it. */
  mirror: V1Job;
  /** `<cluster id>/<node>`: the host annotation's value. */
  host: string;
  /** The exit code of the mirror pod's first container, once it has one. */
  exitCode?: number | undefined;
}

const condition = (s: V1JobStatus | undefined, type: string) => s?.conditions?.find((c) => c.type === type && c.status === 'True');
const ms = (t: Date | string | undefined) => (t === undefined ? undefined : new Date(t).getTime());
const later = (a: Date | undefined, b: Date | undefined) => (a && b ? (a.getTime() >= b.getTime() ? a : b) : (a ?? b));
const asDate = (t: Date | string | undefined) => (t === undefined ? undefined : new Date(t));

/**
 * The write that brings the peer Job up to its mirror; undefined when the
 * peer already has it all, or lacks only counts that change while the Job
 * runs (ready pods, a retried pod's failure): those go with the next write
 * that moves the Job on, so a peer Job costs two write-backs, Running and
 * finished.
 */
export function peerStatusWrite(input: WritebackInput): StatusWrite | undefined {
  // Asked for every claimed Job at every pass; the watched objects are replaced, never changed, when either side moves.
  const kept = decided.get(input.peerJob);
  if (kept && kept.mirror === input.mirror && kept.host === input.host && kept.exitCode === input.exitCode) return kept.write;
  const write = decide(input);
  decided.set(input.peerJob, { mirror: input.mirror, host: input.host, exitCode: input.exitCode, write });
  return write;
}

const decided = new WeakMap<V1Job, { mirror: V1Job; host: string; exitCode: number | undefined; write: StatusWrite | undefined }>();

function decide({ peerJob, mirror, host, exitCode }: WritebackInput): StatusWrite | undefined {
  const peer = peerJob.status ?? {};
  const status = nextStatus(peer, mirror.status ?? {});
  const finished = stage(status) === 'finished';
  const annotations: Record<string, string> = { [HOST_ANNOTATION]: host };
  if (finished && exitCode !== undefined) annotations[EXIT_CODE_ANNOTATION] = String(exitCode);
  const have = peerJob.metadata?.annotations ?? {};
  const annotationsDone = Object.entries(annotations).every(([k, v]) => have[k] === v);
  // The host goes with the Running write: a mirror not started yet has nothing to tell.
  if (stage(status) === 'queued') return undefined;
  if (annotationsDone && (sameStatus(peer, status) || STAGES.indexOf(stage(status)) <= STAGES.indexOf(stage(peer)))) return undefined;
  return { status, annotations };
}

const STAGES = ['queued', 'running', 'finished'] as const;

/** How far the Job has come, as the peer's users read it. */
function stage(s: V1JobStatus): (typeof STAGES)[number] {
  if (condition(s, 'Complete') || condition(s, 'Failed')) return 'finished';
  return s.startTime || (s.active ?? 0) > 0 ? 'running' : 'queued';
}

function nextStatus(peer: V1JobStatus, m: V1JobStatus): V1JobStatus {
  const complete = condition(m, 'Complete') ?? condition(peer, 'Complete');
  const failed = complete ? undefined : (condition(m, 'Failed') ?? condition(peer, 'Failed'));
  const finished = complete ?? failed;
  // A finished Job must have a startTime; the mirror always has one, but a
  // terminal condition's time stands in rather than leave the peer unwritable.
  const startTime = asDate(peer.startTime) ?? asDate(m.startTime) ?? (finished ? asDate(finished.lastTransitionTime) : undefined);
  const active = finished ? 0 : (m.active ?? 0);
  const status: V1JobStatus = {
    ...(startTime ? { startTime } : {}),
    active,
    ready: finished ? 0 : Math.min(m.ready ?? 0, active),
    ...(finished ? { terminating: 0 } : m.terminating !== undefined ? { terminating: m.terminating } : {}),
    succeeded: Math.max(peer.succeeded ?? 0, m.succeeded ?? 0),
    failed: Math.max(peer.failed ?? 0, m.failed ?? 0),
    conditions: conditionsFor(peer, m, complete, failed),
  };
  if (complete) {
    // The mirror's clock also set startTime, so this holds unless the peer's
    // startTime came from elsewhere; the API server refuses the reverse.
    status.completionTime = asDate(peer.completionTime) ?? later(asDate(m.completionTime ?? complete.lastTransitionTime), startTime);
  }
  return status;
}

function conditionsFor(peer: V1JobStatus, m: V1JobStatus, complete?: V1JobCondition, failed?: V1JobCondition): V1JobCondition[] {
  const list = [...(peer.conditions ?? [])];
  const ensure = (type: string, from: V1JobCondition) => {
    if (list.some((c) => c.type === type && c.status === 'True')) return;
    const own = condition(m, type) ?? from;
    list.push({
      type,
      status: 'True',
      ...(own.reason ? { reason: own.reason } : {}),
      ...(own.message ? { message: own.message } : {}),
      ...(own.lastProbeTime ? { lastProbeTime: asDate(own.lastProbeTime) } : {}),
      ...(own.lastTransitionTime ? { lastTransitionTime: asDate(own.lastTransitionTime) } : {}),
    });
  };
  if (complete) {
    ensure('SuccessCriteriaMet', complete);
    ensure('Complete', complete);
  } else if (failed) {
    ensure('FailureTarget', failed);
    ensure('Failed', failed);
  }
  return list;
}

function sameStatus(a: V1JobStatus, b: V1JobStatus): boolean {
  const norm = (s: V1JobStatus) => ({
    startTime: ms(s.startTime),
    completionTime: ms(s.completionTime),
    active: s.active ?? 0,
    ready: s.ready ?? 0,
    terminating: s.terminating ?? 0,
    succeeded: s.succeeded ?? 0,
    failed: s.failed ?? 0,
    conditions: (s.conditions ?? []).map((c) => `${c.type}=${c.status}`),
  });
  return JSON.stringify(norm(a)) === JSON.stringify(norm(b));
}

/**
 * The peer Job reported failed because its mirror is gone before it finished
 * (deleted by hand, or its node removed): the peer decides whether to run it
 * again, so it never runs twice without its owner knowing.
 */
export function lostStatusWrite(peerJob: V1Job, host: string, now: Date): StatusWrite {
  const peer = peerJob.status ?? {};
  const lost = { type: 'Failed', status: 'True', reason: 'MirrorLost', message: `the lender's copy of this Job on ${host} is gone before it finished`, lastTransitionTime: now };
  const mirror: V1JobStatus = { startTime: asDate(peer.startTime) ?? now, failed: Math.max(peer.failed ?? 0, 1), conditions: [lost] };
  return { status: nextStatus(peer, mirror), annotations: { [HOST_ANNOTATION]: host } };
}
