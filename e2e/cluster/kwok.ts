// KWOK plays the kubelet for fake Nodes: it marks them Ready, keeps their
// heartbeat, makes pods bound to them Running and, for pods owned by a Job,
// Succeeded (or Failed) after a delay read from the pod's annotations.
import type { Kubectl } from '../support/kube.js';

/** Annotation that makes a Node one of KWOK's (`--manage-nodes-with-annotation-selector`). */
export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node';
/** How long a Job's pod runs before it completes, as a Go duration (`90s`, `2m`); 1 s when absent. */
export const KWOK_RUN_FOR_ANNOTATION = 'pod-complete.stage.kwok.x-k8s.io/delay';
/** Optional upper bound for a random run time; it must be at least the delay, or KWOK uses it as the delay. */
export const KWOK_RUN_FOR_JITTER_ANNOTATION = 'pod-complete.stage.kwok.x-k8s.io/jitter-delay';
/** A Job's pod with this annotation fails with this exit code (1-255) instead of succeeding. */
export const KWOK_EXIT_CODE_ANNOTATION = 'kwok.leasehold.dev/exit-code';

const annotation = (key: string) => `.metadata.annotations["${key}"]`;

// A Job pod's end: one selector shared by pod-complete and pod-fail, which
// differ only in the exit-code annotation and the status they write.
function jobPodEndStage(name: string, exitCodeOperator: 'Exists' | 'DoesNotExist', statusTemplate: string): string {
  return `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: ${name}
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values: ['Job']
    - key: '${annotation(KWOK_EXIT_CODE_ANNOTATION)}'
      operator: '${exitCodeOperator}'
  delay:
    durationMilliseconds: 1000
    durationFrom:
      expressionFrom: '${annotation(KWOK_RUN_FOR_ANNOTATION)}'
    # KWOK waits a random time in [delay, jitter] and uses the jitter alone
    # when it is below the delay, so without its own annotation the jitter
    # falls back to the delay: the pod runs exactly that long.
    jitterDurationMilliseconds: 1000
    jitterDurationFrom:
      expressionFrom: '${annotation(KWOK_RUN_FOR_JITTER_ANNOTATION)} // ${annotation(KWOK_RUN_FOR_ANNOTATION)}'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        reason: PodCompleted
        status: "False"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        reason: PodCompleted
        status: "False"
        type: ContainersReady
${statusTemplate}
`;
}

const terminated = (exitCode: string, reason: string, phase: string) => `      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: ${exitCode}
            finishedAt: {{ $now | Quote }}
            reason: ${reason}
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: ${phase}`;

// node-initialize, node-heartbeat, pod-ready and pod-delete follow KWOK's own
// "fast" and "heartbeat" stages (kustomize/stage in sigs.k8s.io/kwok v0.8.0).
const nodeStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
      addresses:
      {{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}
      {{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}
      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      {{ $kwokVersion := printf "kwok-%s" Version }}
      nodeInfo:
        architecture: amd64
        containerRuntimeVersion: {{ $kwokVersion }}
        kernelVersion: {{ $kwokVersion }}
        kubeletVersion: {{ $kwokVersion }}
        operatingSystem: linux
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  delay:
    durationMilliseconds: 20000
    jitterDurationMilliseconds: 25000
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
  immediateNextStage: true
`;

const podStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      {{ with NodeIPWith .spec.nodeName }}
      hostIP: {{ . | Quote }}
      {{ end }}
      {{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      podIP: {{ . | Quote }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
---
${jobPodEndStage('pod-complete', 'DoesNotExist', terminated('0', 'Completed', 'Succeeded'))}---
${jobPodEndStage('pod-fail', 'Exists', terminated(`{{ index $.metadata.annotations "${KWOK_EXIT_CODE_ANNOTATION}" }}`, 'Error', 'Failed'))}---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
`;

/** The `--config` file for kwok: the node and pod stages above. */
export const kwokStagesYAML = `${nodeStages}---\n${podStages}`;

export interface FakeNode {
  name: string;
  /** Allocatable `nvidia.com/gpu`; none when 0 or absent. */
  gpus?: number;
  cpu?: string;
  memory?: string;
  pods?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  taints?: Array<{ key: string; value?: string; effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute' }>;
}

/** A Node that KWOK manages, with the given allocatable (capacity equal to it). */
export function fakeNodeManifest(node: FakeNode): Record<string, unknown> {
  const resources: Record<string, string> = {
    cpu: node.cpu ?? '32',
    memory: node.memory ?? '256Gi',
    pods: node.pods ?? '110',
    ...(node.gpus ? { 'nvidia.com/gpu': String(node.gpus) } : {}),
  };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: node.name,
      labels: {
        'kubernetes.io/hostname': node.name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        type: 'kwok',
        ...node.labels,
      },
      annotations: { [KWOK_NODE_ANNOTATION]: 'fake', ...node.annotations },
    },
    spec: node.taints ? { taints: node.taints } : {},
    status: { allocatable: resources, capacity: resources },
  };
}

/** Creates the Nodes and waits until KWOK reports each Ready. */
export async function createFakeNodes(kubectl: Kubectl, nodes: FakeNode[], timeout = '120s'): Promise<void> {
  const list = { apiVersion: 'v1', kind: 'List', items: nodes.map(fakeNodeManifest) };
  const created = await kubectl(['create', '-f', '-'], JSON.stringify(list));
  if (created.code !== 0) throw new Error(`creating fake nodes failed: ${created.stderr}`);
  const ready = await kubectl(['wait', '--for=condition=Ready', `--timeout=${timeout}`, ...nodes.map((n) => `node/${n.name}`)]);
  if (ready.code !== 0) throw new Error(`fake nodes not Ready (is kwok running?): ${ready.stderr}${ready.stdout}`);
}
