import { describe, expect, it } from '@jest/globals';
import { checkPeerJob } from './schema.js';

const job = (patch: (j: any) => void = () => {}) => {
  const j: any = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'train', namespace: 'queue', uid: '0f8fad5b-d9cb-469f-a165-70867728950e', resourceVersion: '7', labels: { 'leasehold.dev/lendable': 'true' }, annotations: {}, creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: {
      parallelism: 1,
      completions: 1,
      activeDeadlineSeconds: 600,
      managedBy: 'leasehold.dev/peer-lending',
      template: { metadata: { creationTimestamp: null }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox', resources: { requests: { cpu: '1', 'nvidia.com/gpu': 1 } } }] } },
    },
    status: { conditions: [{ type: 'Complete', status: 'True' }], startTime: '2026-01-01T00:00:01Z', succeeded: 1, uncountedTerminatedPods: {} },
  };
  patch(j);
  return j;
};

describe('checkPeerJob', () => {
  it('passes a Job as a Kubernetes API server serves it, unknown fields included', () => {
    expect(checkPeerJob(job())).toBeUndefined();
    expect(checkPeerJob(job((j) => (j.spec.template.spec.newField = { x: 1 })))).toBeUndefined();
  });

  it.each([
    ['annotations that are a string', (j: any) => (j.metadata.annotations = 'claimed'), 'metadata.annotations'],
    ['a label value that is a number', (j: any) => (j.metadata.labels.n = 5), 'metadata.labels.n'],
    ['no name', (j: any) => delete j.metadata.name, 'metadata.name'],
    ['metadata that is not an object', (j: any) => (j.metadata = 'x'), 'metadata'],
    ['parallelism as a string', (j: any) => (j.spec.parallelism = '1'), 'spec.parallelism'],
    ['containers that are not a list', (j: any) => (j.spec.template.spec.containers = 'busybox'), 'spec.template.spec.containers'],
    ['runAsUser as a string', (j: any) => (j.spec.template.spec.containers[0].securityContext = { runAsUser: '0' }), 'spec.template.spec.containers[0].securityContext.runAsUser'],
    ['hostNetwork as a string', (j: any) => (j.spec.template.spec.hostNetwork = 'true'), 'spec.template.spec.hostNetwork'],
    ['a request that is an object', (j: any) => (j.spec.template.spec.containers[0].resources.requests.cpu = { m: 1 }), 'spec.template.spec.containers[0].resources.requests.cpu'],
    ['conditions that are a map', (j: any) => (j.status.conditions = { Complete: true }), 'status.conditions'],
  ])('refuses %s, naming the field but never its value', (_what, patch, field) => {
    const problem = checkPeerJob(job(patch));
    expect(problem?.field).toBe(field);
    expect(problem?.message).not.toMatch(/claimed|busybox/);
  });

  it('bounds a field path built from a key the peer chose', () => {
    const problem = checkPeerJob(job((j) => (j.metadata.annotations = { [`k\n${'x'.repeat(500)}`]: 1 })));
    expect(problem!.field.length).toBeLessThanOrEqual(200);
    expect(problem!.field).not.toContain('\n');
  });

  it('refuses what is not an object at all', () => {
    for (const v of [null, 'job', 5, []]) expect(checkPeerJob(v)).toBeDefined();
  });
});
