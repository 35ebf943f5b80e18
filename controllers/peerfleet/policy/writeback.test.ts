import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1JobStatus } from '@kubernetes/client-node';
import { jobStatusProblems } from '../../../src/providers/peerqueue/jobstatus.js';
import { lostStatusWrite, peerStatusWrite } from './writeback.js';

const START = new Date('2026-12-03T09:00:00Z');
const END = new Date('2026-12-03T09:10:00Z');
const HOST = 'ours/gpu-1';
const peer = (status: V1JobStatus = {}, annotations: Record<string, string> = {}): V1Job => ({ metadata: { name: 'train', annotations }, spec: { template: {} }, status });
const mirror = (status: V1JobStatus): V1Job => ({ metadata: { name: 'lh-peer-x' }, spec: { template: {} }, status });
const T = (type: string, reason = 'R', at = END) => ({ type, status: 'True', reason, lastTransitionTime: at });

const running: V1JobStatus = { startTime: START, active: 1, ready: 1 };
const complete: V1JobStatus = { startTime: START, completionTime: END, succeeded: 1, conditions: [T('SuccessCriteriaMet', 'CompletionsReached'), T('Complete', 'CompletionsReached')] };
const failed: V1JobStatus = { startTime: START, failed: 4, conditions: [T('FailureTarget', 'BackoffLimitExceeded'), T('Failed', 'BackoffLimitExceeded')] };

describe('peerStatusWrite', () => {
  it('a running mirror: startTime, active and ready, and the host', () => {
    const w = peerStatusWrite({ peerJob: peer(), mirror: mirror(running), host: HOST });
    expect(w).toEqual({ status: { startTime: START, active: 1, ready: 1, succeeded: 0, failed: 0, conditions: [] }, annotations: { 'leasehold.dev/host': HOST } });
  });

  it('a completed mirror: SuccessCriteriaMet then Complete, completionTime, the exit code', () => {
    const w = peerStatusWrite({ peerJob: peer(running, { 'leasehold.dev/host': HOST }), mirror: mirror(complete), host: HOST, exitCode: 0 })!;
    expect(w.status).toMatchObject({ startTime: START, completionTime: END, active: 0, ready: 0, terminating: 0, succeeded: 1 });
    expect(w.status.conditions!.map((c) => c.type)).toEqual(['SuccessCriteriaMet', 'Complete']);
    expect(w.status.conditions![1]).toMatchObject({ reason: 'CompletionsReached', lastTransitionTime: END });
    expect(w.annotations).toEqual({ 'leasehold.dev/host': HOST, 'leasehold.dev/exit-code': '0' });
  });

  it('an older mirror with only Complete still gives the peer SuccessCriteriaMet first', () => {
    const w = peerStatusWrite({ peerJob: peer(running), mirror: mirror({ ...complete, conditions: [T('Complete')] }), host: HOST })!;
    expect(w.status.conditions!.map((c) => c.type)).toEqual(['SuccessCriteriaMet', 'Complete']);
  });

  it('a failed mirror: FailureTarget then Failed, no completionTime', () => {
    const w = peerStatusWrite({ peerJob: peer(running), mirror: mirror(failed), host: HOST, exitCode: 137 })!;
    expect(w.status.conditions!.map((c) => c.type)).toEqual(['FailureTarget', 'Failed']);
    expect(w.status).not.toHaveProperty('completionTime');
    expect(w.status).toMatchObject({ failed: 4, active: 0 });
    expect(w.annotations['leasehold.dev/exit-code']).toBe('137');
  });

  it('a failed mirror with no FailureTarget of its own takes the Failed reason for it', () => {
    const w = peerStatusWrite({ peerJob: peer(running), mirror: mirror({ ...failed, conditions: [T('Failed', 'DeadlineExceeded')] }), host: HOST })!;
    expect(w.status.conditions![0]).toMatchObject({ type: 'FailureTarget', reason: 'DeadlineExceeded' });
  });

  it('nothing new: no write, so a quiet cluster costs no writes', () => {
    const done = peerStatusWrite({ peerJob: peer(running), mirror: mirror(complete), host: HOST, exitCode: 0 })!;
    const peerNow = peer(done.status, done.annotations);
    expect(peerStatusWrite({ peerJob: peerNow, mirror: mirror(complete), host: HOST, exitCode: 0 })).toBeUndefined();
    expect(peerStatusWrite({ peerJob: peer({ ...running, succeeded: 0, failed: 0 }, { 'leasehold.dev/host': HOST }), mirror: mirror(running), host: HOST })).toBeUndefined();
  });

  it.each<[string, V1JobStatus, Record<string, string>, V1JobStatus, boolean]>([
    ['queued on the peer, the mirror created but not started (no status yet): nothing, not even the host', {}, {}, {}, false],
    ['queued on the peer, the mirror started: written (Running)', {}, {}, { startTime: START, active: 1 }, true],
    ['running on the peer, the pod of the mirror became ready: not written on its own', { startTime: START, active: 1 }, { 'leasehold.dev/host': HOST }, running, false],
    ['running on the peer, a retried pod failed: not written on its own', running, { 'leasehold.dev/host': HOST }, { ...running, failed: 1 }, false],
    ['running on the peer, the mirror succeeded but is not Complete yet: not written on its own', running, { 'leasehold.dev/host': HOST }, { startTime: START, succeeded: 1, conditions: [T('SuccessCriteriaMet')] }, false],
    ['running on the peer without the host annotation (a crash lost it): written', running, {}, running, true],
    ['running on the peer, the mirror Complete: written (finished)', running, { 'leasehold.dev/host': HOST }, complete, true],
    ['running on the peer, the mirror Failed: written (finished)', running, { 'leasehold.dev/host': HOST }, failed, true],
  ])('one write-back per stage: %s', (_name, peerStatus, annotations, mirrorStatus, written) => {
    expect(peerStatusWrite({ peerJob: peer(peerStatus, annotations), mirror: mirror(mirrorStatus), host: HOST }) !== undefined).toBe(written);
  });

  it('the write that finishes the Job carries the counts left behind while it ran', () => {
    const w = peerStatusWrite({ peerJob: peer({ startTime: START, active: 1 }, { 'leasehold.dev/host': HOST }), mirror: mirror({ ...failed, failed: 3 }), host: HOST, exitCode: 1 })!;
    expect(w.status).toMatchObject({ failed: 3, active: 0, ready: 0 });
    expect(w.annotations).toEqual({ 'leasehold.dev/host': HOST, 'leasehold.dev/exit-code': '1' });
  });

  it('the annotations alone are written again when a crash lost them', () => {
    const done = peerStatusWrite({ peerJob: peer(running), mirror: mirror(complete), host: HOST, exitCode: 0 })!;
    expect(peerStatusWrite({ peerJob: peer(done.status), mirror: mirror(complete), host: HOST, exitCode: 0 })).toMatchObject({ annotations: { 'leasehold.dev/exit-code': '0' } });
  });

  it('never moves the peer startTime, nor a counter down', () => {
    const earlier = new Date('2026-12-03T08:59:00Z');
    const w = peerStatusWrite({ peerJob: peer({ startTime: earlier, active: 1, failed: 2 }), mirror: mirror({ startTime: START, active: 1, failed: 1 }), host: HOST })!;
    expect(w.status).toMatchObject({ startTime: earlier, failed: 2 });
  });

  it('completionTime never comes before startTime', () => {
    const w = peerStatusWrite({ peerJob: peer({ startTime: END }), mirror: mirror({ ...complete, completionTime: START }), host: HOST })!;
    expect(w.status.completionTime).toEqual(END);
  });

  // Every write this produces, at every step of a mirror's life, is one the API server accepts.
  it.each<[string, V1JobStatus[]]>([
    ['pending, running, complete', [{}, { startTime: START, active: 1 }, running, complete]],
    ['running, failing, failed', [running, { ...running, failed: 1 }, { startTime: START, failed: 2, conditions: [T('FailureTarget')] }, failed]],
    ['straight to complete', [complete]],
    ['straight to failed', [failed]],
  ])('the API server accepts every write: %s', (_name, steps) => {
    let current = peer();
    for (const step of steps) {
      const w = peerStatusWrite({ peerJob: current, mirror: mirror(step), host: HOST, exitCode: 0 });
      if (!w) continue;
      expect(jobStatusProblems(current, w.status)).toEqual([]);
      current = peer(w.status, { ...current.metadata!.annotations, ...w.annotations });
    }
    expect(current.metadata!.annotations!['leasehold.dev/host']).toBe(HOST);
  });
});

describe('lostStatusWrite', () => {
  it('reports the Job failed, in a write the API server accepts', () => {
    const running = peer({ startTime: START, active: 1, ready: 1 });
    const w = lostStatusWrite(running, HOST, END);
    expect(jobStatusProblems(running, w.status)).toEqual([]);
    expect(w.status).toMatchObject({ startTime: START, active: 0, failed: 1 });
    expect(w.status.conditions!.map((c) => `${c.type}:${c.reason}`)).toEqual(['FailureTarget:MirrorLost', 'Failed:MirrorLost']);
  });
});
