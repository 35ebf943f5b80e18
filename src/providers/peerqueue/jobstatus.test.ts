import { describe, expect, it } from '@jest/globals';
import type { V1Job, V1JobStatus } from '@kubernetes/client-node';
import { jobStatusProblems } from './jobstatus.js';

const START = new Date('2026-12-03T09:00:00Z');
const END = new Date('2026-12-03T09:10:00Z');
const T = (type: string) => ({ type, status: 'True' });
const job = (status: V1JobStatus = {}): V1Job => ({ spec: { template: {} }, status });

describe('jobStatusProblems', () => {
  it.each<[string, V1JobStatus, V1JobStatus, string[]]>([
    ['running', {}, { startTime: START, active: 1, ready: 1 }, []],
    ['complete, in the order the API server wants', {}, { startTime: START, completionTime: END, succeeded: 1, conditions: [T('SuccessCriteriaMet'), T('Complete')] }, []],
    ['failed with its target', {}, { startTime: START, failed: 1, conditions: [T('FailureTarget'), T('Failed')] }, []],
    ['complete without SuccessCriteriaMet', {}, { startTime: START, completionTime: END, conditions: [T('Complete')] }, ['cannot set Complete=True condition without the SuccessCriteriaMet=true condition']],
    ['failed without FailureTarget', {}, { startTime: START, conditions: [T('Failed')] }, ['cannot set Failed=True condition without the FailureTarget=true condition']],
    ['complete without completionTime', {}, { startTime: START, conditions: [T('SuccessCriteriaMet'), T('Complete')] }, ['completionTime is required for Complete jobs']],
    ['finished without startTime', {}, { failed: 1, conditions: [T('FailureTarget'), T('Failed')] }, ['startTime is required for finished job']],
    ['completion before start', {}, { startTime: END, completionTime: START, conditions: [T('SuccessCriteriaMet'), T('Complete')] }, ['completionTime cannot be set before startTime']],
    ['finished with active pods', {}, { startTime: START, active: 1, conditions: [T('FailureTarget'), T('Failed')] }, ['active>0 is invalid for finished job']],
    ['more ready than active', {}, { active: 1, ready: 2 }, ['cannot set more ready pods than active']],
    ['a counter going down', { failed: 2 }, { failed: 1 }, ['cannot decrease the failed counter']],
    ['a terminal condition removed', { startTime: START, conditions: [T('FailureTarget')] }, { startTime: START }, ['cannot disable the terminal FailureTarget=True condition']],
    ['startTime changed', { startTime: START }, { startTime: END }, ['startTime cannot be removed for unsuspended job']],
  ])('%s', (_name, old, next, want) => {
    expect(jobStatusProblems(job(old), next)).toEqual(want);
  });
});
