import { describe, expect, it } from '@jest/globals';
import type { V1Container, V1Job, V1Node } from '@kubernetes/client-node';
import { admits } from './placement.js';
import { makeMirror, MIRROR_SERVICE_ACCOUNT, mirrorName, NO_GPU_ENV, safeContainer, type LendingPolicy } from './mirror.js';

const UID = '3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8';
const node: V1Node = { metadata: { name: 'gpu-1', labels: { pool: 'gpu' } }, spec: { taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] } };
const fleet = { name: 'peer', namespace: 'lending', uid: 'fleet-uid' };
const policy: LendingPolicy = { tolerate: [{ key: 'nvidia.com/gpu', effect: 'NoSchedule' }], allowedRegistries: [] };
const maxJobSeconds = 86_400;

function peerJob(over: Partial<NonNullable<V1Job['spec']>> = {}): V1Job {
  return {
    metadata: { name: 'train', namespace: 'queue', uid: UID, labels: { app: 'our-db' }, annotations: { a: 'b' } },
    spec: {
      managedBy: 'leasehold.dev/peer-lending',
      activeDeadlineSeconds: 3600,
      parallelism: 2,
      completions: 4,
      backoffLimit: 3,
      ttlSecondsAfterFinished: 5,
      suspend: false,
      selector: { matchLabels: { x: 'y' } },
      template: {
        metadata: { labels: { app: 'our-db' }, annotations: { 'container.apparmor.security.beta.kubernetes.io/main': 'unconfined' } },
        spec: {
          restartPolicy: 'Never',
          priorityClassName: 'system-cluster-critical',
          schedulerName: 'other',
          runtimeClassName: 'privileged-runtime',
          nodeName: 'their-node',
          nodeSelector: { pool: 'gpu' },
          imagePullSecrets: [{ name: 'our-registry' }],
          tolerations: [{ operator: 'Exists' }],
          ephemeralContainers: [{ name: 'debug', image: 'busybox' }],
          volumes: [{ name: 'scratch', emptyDir: {} }],
          containers: [{ name: 'main', image: 'trainer:1', env: [{ name: 'A', value: '1' }], resources: { requests: { cpu: '4' }, limits: { 'nvidia.com/gpu': '2' } } }],
        },
      },
      ...over,
    },
  };
}

function mirrorOf(job = peerJob()): V1Job {
  const result = makeMirror({ peerJob: job, fleet, node, policy, maxJobSeconds });
  if (result.kind !== 'mirror') throw new Error(result.reasons.join('; '));
  return result.job;
}

describe('makeMirror refuses what a lent Job may not ask, never changing it', () => {
  const template = (over: Record<string, unknown>) => {
    const job = peerJob();
    return { ...job, spec: { ...job.spec!, template: { ...job.spec!.template, spec: { ...job.spec!.template.spec!, ...over } } } } as V1Job;
  };
  const refusal = (job: V1Job, p = policy) => {
    const r = makeMirror({ peerJob: job, fleet, node, policy: p, maxJobSeconds: 7200 });
    return r.kind === 'refused' ? r.reasons.join('; ') : '';
  };
  it.each<[string, V1Job, RegExp]>([
    ['an identity of its own', template({ serviceAccountName: 'admin' }), /spec.template.spec.serviceAccountName is admin: a lent Job runs with no identity of ours/],
    ['the deprecated serviceAccount', template({ serviceAccount: 'admin' }), /serviceAccountName is admin/],
    ['a token', template({ automountServiceAccountToken: true }), /automountServiceAccountToken is true/],
    ['no deadline', peerJob({ activeDeadlineSeconds: undefined }), /spec.activeDeadlineSeconds is unset: a lent Job must end on its own; set it to at most 7200/],
    ['a deadline past maxJobDuration', peerJob({ activeDeadlineSeconds: 7201 }), /spec.activeDeadlineSeconds is 7201, above the lender's maxJobDuration of 7200s/],
    ...['NVIDIA_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES', 'NVIDIA_DRIVER_CAPABILITIES', 'ROCR_VISIBLE_DEVICES', 'NVIDIA_MIG_CONFIG_DEVICES'].map((name): [string, V1Job, RegExp] => [
      `device selection by ${name}`,
      template({ containers: [{ name: 'main', image: 'trainer:1', env: [{ name, value: 'all' }] }] }),
      new RegExp(`containers\\[0\\].env\\[0\\] sets ${name}: a lent Job gets the devices the scheduler gives it`),
    ]),
    ['device selection in an init container', template({ initContainers: [{ name: 'i', image: 'x', env: [{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' }] }] }), /initContainers\[0\].env\[0\] sets NVIDIA_VISIBLE_DEVICES/],
  ])('%s', (_what, job, why) => {
    expect(refusal(job)).toMatch(why);
  });

  it('takes images only from the registries the admin listed, when listed', () => {
    const listed = { ...policy, allowedRegistries: ['registry.example.com', 'ghcr.io/team'] };
    const withImage = (image: string) => template({ containers: [{ name: 'main', image }] });
    expect(refusal(withImage('registry.example.com/ml/train:1'), listed)).toBe('');
    expect(refusal(withImage('ghcr.io/team/train@sha256:abc'), listed)).toBe('');
    expect(refusal(withImage('ghcr.io/other/train:1'), listed)).toMatch(/image ghcr.io\/other\/train:1 is not from a registry the lender allows \(registry.example.com, ghcr.io\/team\)/);
    expect(refusal(withImage('registry.example.com.evil.io/x:1'), listed)).toMatch(/is not from a registry/);
    expect(refusal(withImage('busybox'), listed)).toMatch(/image busybox is not from a registry/);
    expect(refusal(withImage('busybox'))).toBe('');
  });
});

describe('makeMirror', () => {
  it('is named from the peer Job uid and labelled with the PeerFleet, node and peer Job', () => {
    const m = mirrorOf();
    expect(m.metadata).toMatchObject({
      name: mirrorName(UID),
      namespace: 'lending',
      labels: { 'leasehold.dev/peerfleet': 'peer', 'leasehold.dev/node': 'gpu-1', 'leasehold.dev/peer-job-uid': UID },
      annotations: { 'leasehold.dev/peer-job': 'queue/train' },
    });
    // No owner: a foreground-cascading delete of the PeerFleet would have the
    // garbage collector delete running mirrors; the finalizer waits for them instead.
    expect(m.metadata!.ownerReferences).toBeUndefined();
    expect(mirrorName(UID).length).toBeLessThanOrEqual(63);
    expect(m.spec!.template.metadata).toEqual({ labels: m.metadata!.labels });
  });

  it('is the same object every time: creating it twice finds the first', () => {
    expect(mirrorOf()).toEqual(mirrorOf());
  });

  it('keeps the run rules and requests, drops the peer selector, manager, TTL and suspension', () => {
    const m = mirrorOf();
    expect(m.spec).toMatchObject({ parallelism: 2, completions: 4, backoffLimit: 3 });
    for (const field of ['managedBy', 'ttlSecondsAfterFinished', 'suspend', 'selector']) expect(m.spec).not.toHaveProperty(field);
    expect(m.spec!.template.spec!.containers[0]!.resources).toEqual({ requests: { cpu: '4' }, limits: { 'nvidia.com/gpu': '2' } });
  });

  it('runs with no rights and no token, none of our Services in its environment', () => {
    const pod = mirrorOf().spec!.template.spec!;
    expect(pod.serviceAccountName).toBe(MIRROR_SERVICE_ACCOUNT);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.enableServiceLinks).toBe(false);
    for (const field of ['priorityClassName', 'schedulerName', 'runtimeClassName', 'nodeName', 'nodeSelector', 'imagePullSecrets', 'ephemeralContainers']) {
      expect(pod).not.toHaveProperty(field);
    }
  });

  it('takes the restricted Pod Security defaults', () => {
    const pod = mirrorOf().spec!.template.spec!;
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.containers[0]!.securityContext).toEqual({ allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } });
  });

  it('tolerates only the taints the admin listed', () => {
    const tainted: V1Node = { metadata: { name: 'gpu-1' }, spec: { taints: [...node.spec!.taints!, { key: 'team-b/dedicated', effect: 'NoSchedule' }] } };
    const r = makeMirror({ peerJob: peerJob(), fleet, node: tainted, policy, maxJobSeconds });
    if (r.kind !== 'mirror') throw new Error(r.reasons.join('; '));
    expect(r.job.spec!.template.spec!.tolerations).toEqual([{ key: 'nvidia.com/gpu', operator: 'Equal', value: 'present', effect: 'NoSchedule' }]);
    const none = makeMirror({ peerJob: peerJob(), fleet, node, policy: { tolerate: [], allowedRegistries: [] }, maxJobSeconds });
    if (none.kind !== 'mirror') throw new Error(none.reasons.join('; '));
    expect(none.job.spec!.template.spec!.tolerations).toEqual([]);
  });

  it('is pinned to the node, tolerating its listed taints', () => {
    const pod = mirrorOf().spec!.template.spec!;
    expect(pod.affinity).toEqual({
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['gpu-1'] }] }] } },
    });
    expect(pod.tolerations).toEqual([{ key: 'nvidia.com/gpu', operator: 'Equal', value: 'present', effect: 'NoSchedule' }]);
    expect(admits(pod, node)).toBe(true);
    expect(admits(pod, { metadata: { name: 'gpu-2' } })).toBe(false);
  });

  it.each<[string, V1Job, RegExp]>([
    ['hostPath', peerJob({ template: { spec: { containers: [{ name: 'm' }], volumes: [{ name: 'h', hostPath: { path: '/var/run' } }] } } }), /hostPath volume/],
    ['a Secret in env', peerJob({ template: { spec: { containers: [{ name: 'm', env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] }] } } }), /reads a Secret/],
    ['privileged', peerJob({ template: { spec: { containers: [{ name: 'm', securityContext: { privileged: true } }] } } }), /privileged is true/],
    ['host network', peerJob({ template: { spec: { hostNetwork: true, containers: [{ name: 'm' }] } } }), /hostNetwork is true/],
    ['no uid', { ...peerJob(), metadata: { name: 'x' } }, /metadata.uid "" is not a Kubernetes uid/],
  ])('refuses %s with the reason, never throwing', (_name, job, reason) => {
    const result = makeMirror({ peerJob: job, fleet, node, policy, maxJobSeconds });
    expect(result).toEqual({ kind: 'refused', reasons: [expect.stringMatching(reason)] });
  });
});

describe('a mirror container that asks for no GPU sees none', () => {
  const VOID = [
    { name: 'NVIDIA_VISIBLE_DEVICES', value: 'void' },
    { name: 'NVIDIA_MIG_CONFIG_DEVICES', value: '' },
    { name: 'NVIDIA_MIG_MONITOR_DEVICES', value: '' },
  ];
  const withContainers = (containers: V1Container[], initContainers?: V1Container[]) => {
    const job = peerJob();
    return mirrorOf({ ...job, spec: { ...job.spec!, template: { spec: { ...job.spec!.template.spec!, containers, ...(initContainers ? { initContainers } : {}) } } } });
  };
  const c = (name: string, resources: V1Container['resources'], env?: V1Container['env']): V1Container => ({ name, image: 'trainer:1', ...(resources ? { resources } : {}), ...(env ? { env } : {}) });

  it.each<[string, boolean, V1Container['resources']]>([
    ['no resources at all', false, undefined],
    ['CPU only', false, { requests: { cpu: '1' } }],
    ['zero GPUs', false, { limits: { 'nvidia.com/gpu': '0' } }],
    ['another vendor\'s device', false, { limits: { 'amd.com/gpu': '1' } }],
    ['a GPU in limits', true, { limits: { 'nvidia.com/gpu': '1' } }],
    ['a GPU in requests', true, { requests: { 'nvidia.com/gpu': '2' }, limits: { 'nvidia.com/gpu': '2' } }],
  ])('%s: environment kept as the peer wrote it: %s', (_what, keeps, resources) => {
    const got = withContainers([c('main', resources, [{ name: 'A', value: '1' }])]).spec!.template.spec!.containers[0]!;
    expect(got.env).toEqual(keeps ? [{ name: 'A', value: '1' }] : [{ name: 'A', value: '1' }, ...VOID]);
  });

  it('covers every container and init container on its own', () => {
    const pod = withContainers(
      [c('gpu', { limits: { 'nvidia.com/gpu': '1' } }), c('logger', { requests: { cpu: '100m' } })],
      [c('fetch', undefined), c('sidecar', { limits: { 'nvidia.com/gpu': '1' } })],
    ).spec!.template.spec!;
    expect(pod.containers.map((x) => x.env)).toEqual([undefined, VOID]);
    expect(pod.initContainers!.map((x) => x.env)).toEqual([VOID, undefined]);
  });

  it('replaces an entry of the same name, valueFrom included, rather than adding a second', () => {
    const peer = c('main', undefined, [
      { name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' },
      { name: 'B', value: '2' },
      { name: 'NVIDIA_MIG_MONITOR_DEVICES', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    ]);
    const env = safeContainer(peer).env!;
    expect(env).toEqual([{ name: 'B', value: '2' }, ...VOID]);
    expect(env.filter((e) => e.name === 'NVIDIA_VISIBLE_DEVICES')).toHaveLength(1);
    // The exported list is not shared with the mirror: changing one mirror changes no other.
    env[1]!.value = 'all';
    expect(NO_GPU_ENV[0]!.value).toBe('void');
  });

  it('leaves a GPU container\'s environment as the peer wrote it', () => {
    const peer = c('main', { limits: { 'nvidia.com/gpu': '1' } }, [{ name: 'A', value: '1' }]);
    expect(safeContainer(peer).env).toEqual([{ name: 'A', value: '1' }]);
  });
});
