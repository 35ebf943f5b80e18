import { describe, expect, it } from '@jest/globals';
import type { RunnerTarget } from '../../../src/api/index.js';
import { spec } from '../testing/pool.js';
import { workflowJobPayload } from '../testing/webhook.js';
import { parseWorkflowJob, targetsForJob, type WorkflowJobDelivery } from './delivery.js';

const target = (name: string, github: Partial<RunnerTarget['spec']['github']> = {}, deleting = false): RunnerTarget => ({
  apiVersion: 'leasehold.dev/v1alpha1',
  kind: 'RunnerTarget',
  metadata: { namespace: 'ci', name, uid: `u-${name}`, ...(deleting ? { deletionTimestamp: '2026-12-03T12:00:00Z' as never } : {}) },
  spec: { ...spec, github: { ...spec.github, ...github } },
});

const payload = workflowJobPayload;

const parsed = (p: unknown): WorkflowJobDelivery => {
  const r = parseWorkflowJob(p);
  if (!r.ok) throw new Error(r.error);
  return r.delivery;
};

describe('parseWorkflowJob', () => {
  it('takes a workflow_job payload and keeps only what it uses', () => {
    expect(parsed(payload())).toEqual({
      action: 'queued',
      workflow_job: { id: 9001, run_id: 77, status: 'queued', labels: ['self-hosted', 'linux'] },
      repository: { full_name: 'swack-tools/oxidex', owner: { login: 'swack-tools' } },
      organization: { login: 'swack-tools' },
    });
  });

  it.each([
    ['no workflow_job', { action: 'queued', repository: payload().repository }, 'workflow_job'],
    ['labels not a list', { ...payload(), workflow_job: { ...payload().workflow_job, labels: 'linux' } }, 'workflow_job.labels'],
    ['too many labels', { ...payload(), workflow_job: { ...payload().workflow_job, labels: Array(101).fill('x') } }, 'workflow_job.labels'],
    ['no repository', { ...payload(), repository: undefined }, 'repository'],
    ['not an object', 'queued', '(body)'],
  ])('%s: an error naming the field', (_what, body, field) => {
    const r = parseWorkflowJob(body);
    expect(r).toMatchObject({ ok: false, error: expect.stringContaining(field) });
  });
});

describe('targetsForJob', () => {
  const plain = target('plain');
  const gpu = target('gpu', { labels: ['gpu'] });
  const other = target('other', { repositories: ['swack-tools/elsewhere'] });
  const gone = target('gone', {}, true);
  const all = [plain, gpu, other, gone];

  it('a queued job: the targets that follow its repository and have all its labels', () => {
    expect(targetsForJob(parsed(payload()), all).map((t) => t.metadata!.name)).toEqual(['plain']);
    expect(targetsForJob(parsed(payload({ labels: ['self-hosted', 'Linux', 'GPU'] })), all).map((t) => t.metadata!.name)).toEqual(['gpu']);
    expect(targetsForJob(parsed(payload({ labels: ['ubuntu-latest'] })), all)).toEqual([]);
    expect(targetsForJob(parsed(payload({ repo: 'Swack-Tools/Elsewhere' })), all).map((t) => t.metadata!.name)).toEqual(['other']);
  });

  it.each(['in_progress', 'completed', 'waiting'])('%s asks for nothing', (action) => {
    expect(targetsForJob(parsed(payload({ action })), all)).toEqual([]);
  });
});
