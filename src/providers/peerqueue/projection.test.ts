import { describe, expect, it } from '@jest/globals';
import type { V1Job } from '@kubernetes/client-node';
import { projectPeerJob } from './projection.js';
import { checkPeerJob } from './schema.js';
import { jsonSize } from '../../kube/holdbudget.js';

const pad = 'p'.repeat(100_000);
const peerJob = (): V1Job => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: {
    name: 'train',
    namespace: 'queue',
    uid: '0f8fad5b-d9cb-469f-a165-70867728950e',
    resourceVersion: '42',
    creationTimestamp: new Date('2026-12-01T00:00:00Z'),
    labels: { 'leasehold.dev/lendable': 'true', team: pad },
    annotations: { 'leasehold.dev/claimed-by': 'c1/fleet/node-1', 'leasehold.dev/host': 'c1/node-1', note: pad },
    managedFields: [{ manager: 'kubectl', operation: 'Apply', fieldsV1: { pad } }],
  },
  spec: {
    managedBy: 'leasehold.dev/peer-lending',
    backoffLimit: 0,
    activeDeadlineSeconds: 600,
    template: {
      metadata: { labels: { app: 'train' }, annotations: { big: pad } },
      spec: {
        restartPolicy: 'Never',
        hostPID: true,
        containers: [{ name: 'main', image: 'busybox', command: ['sleep', '1'], env: [{ name: 'A', value: 'b' }], resources: { requests: { 'nvidia.com/gpu': '1' } } }],
      },
    },
  },
  status: {
    startTime: new Date('2026-12-01T00:01:00Z'),
    active: 1,
    conditions: [{ type: 'Suspended', status: 'False', message: 'not suspended' }],
    uncountedTerminatedPods: { succeeded: ['u1'] },
  },
});

describe('projectPeerJob', () => {
  // As the peer's API server sends it: JSON, times as strings.
  const job = JSON.parse(JSON.stringify(peerJob())) as V1Job;
  const p = projectPeerJob(job);

  it('keeps what lending reads: identity, our annotations, the whole spec but the template metadata, the status it writes back', () => {
    expect(p.metadata).toEqual({
      name: 'train',
      namespace: 'queue',
      uid: job.metadata!.uid,
      resourceVersion: '42',
      creationTimestamp: job.metadata!.creationTimestamp,
      annotations: { 'leasehold.dev/claimed-by': 'c1/fleet/node-1', 'leasehold.dev/host': 'c1/node-1' },
    });
    const { metadata: _dropped, ...template } = job.spec!.template;
    expect(p.spec).toEqual({ ...job.spec, template });
    // What safety refuses stays visible: a projected Job that asks for the host's PIDs still asks for them.
    expect(p.spec?.template.spec?.hostPID).toBe(true);
    expect(p.status).toEqual({ startTime: job.status!.startTime, active: 1, conditions: job.status!.conditions });
  });

  it('drops the peer labels, foreign annotations and bookkeeping, so padding there costs nothing', () => {
    expect(jsonSize(job)).toBeGreaterThan(400_000);
    expect(jsonSize(p)).toBeLessThan(2_000);
  });

  it('still passes the peer Job check and leaves the received Job as it was', () => {
    expect(checkPeerJob(p)).toBeUndefined();
    expect(job.metadata?.labels?.team).toBe(pad);
    expect(job.spec?.template.metadata?.annotations?.big).toBe(pad);
  });

  it('adds nothing to a Job with no annotations, spec or status', () => {
    expect(projectPeerJob({ metadata: { name: 'x', uid: 'u', resourceVersion: '1', namespace: 'q' } })).toEqual({ apiVersion: undefined, kind: undefined, metadata: { name: 'x', uid: 'u', resourceVersion: '1', namespace: 'q' } });
  });
});
