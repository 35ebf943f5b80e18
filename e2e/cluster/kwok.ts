// KWOK plays the kubelet for fake Nodes: it marks them Ready, keeps their
// heartbeat, makes pods bound to them Running and, for pods owned by a Job,
// Succeeded (or Failed) after a delay read from the pod's annotations.
import type { Kubectl } from './tool.js';

/** Annotation that makes a Node one of KWOK's (`--manage-nodes-with-annotation-selector`). */
export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node';
/** How long a Job's pod runs before it completes, as a Go duration (`90s`, `2m`); 1 s when absent. */
export const KWOK_RUN_FOR_ANNOTATION = 'pod-complete.stage.kwok.x-k8s.io/delay';
/** Optional upper bound for a random run time; it must be at least the delay, or KWOK uses it as the delay. */
export const KWOK_RUN_FOR_JITTER_ANNOTATION = 'pod-complete.stage.kwok.x-k8s.io/jitter-delay';
/**
 * The same run time read from the first container's env when the pod has no
 * annotation: a lent peer Job reaches our node as a mirror whose pods carry
 * none of the peer's annotations, but keep its containers.
 */
export const KWOK_RUN_FOR_ENV = 'KWOK_RUN_FOR';
/** A Job's pod with this annotation fails with this exit code (1-255) instead of succeeding. */
export const KWOK_EXIT_CODE_ANNOTATION = 'kwok.leasehold.dev/exit-code';

const annotation = (key: string) => `.metadata.annotations["${key}"]`;
const runForEnv = `(.spec.containers[0].env[]? | select(.name == "${KWOK_RUN_FOR_ENV}") | .value)`;

interface StageSpec {
  name: string;
  kind: 'Node' | 'Pod';
  /** matchExpressions as `[key, operator, values?]`. */
  match: Array<[string, string, string[]?]>;
  /** The `delay` stanza, indented for `spec`. */
  delay?: string;
  /** The status template (indented 6), or `delete` to delete the object. */
  next: string | 'delete';
  immediateNextStage?: boolean;
}

function stage(spec: StageSpec): string {
  const match = spec.match.map(([key, operator, values]) =>
    `    - key: '${key}'\n      operator: '${operator}'\n${values ? `      values: [${values.map((v) => `'${v}'`).join(', ')}]\n` : ''}`);
  const next = spec.next === 'delete' ? '    delete: true\n' : `    statusTemplate: |\n      {{ $now := Now }}\n${spec.next}\n`;
  return `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: ${spec.name}
spec:
  resourceRef:
    apiGroup: v1
    kind: ${spec.kind}
  selector:
    matchExpressions:
${match.join('')}${spec.delay ?? ''}  next:
${next}${spec.immediateNextStage ? '  immediateNextStage: true\n' : ''}`;
}

const readyIs = (operator: string): [string, string, string[]] =>
  ['.status.conditions.[] | select( .type == "Ready" ) | .status', operator, ['True']];
const notDeleted: [string, string] = ['.metadata.deletionTimestamp', 'DoesNotExist'];

// node-initialize, node-heartbeat, pod-ready and pod-delete follow KWOK's own
// "fast" and "heartbeat" stages (kustomize/stage in sigs.k8s.io/kwok v0.8.0).
const nodeConditions = `      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}`;

// The Node's own allocatable and capacity (fakeNodeManifest sets both), else KWOK's defaults.
const nodeResources = ['allocatable', 'capacity'].map((field) => `      ${field}:
      {{ with .status.${field} }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}`).join('\n');

const nodeInitialize = stage({
  name: 'node-initialize',
  kind: 'Node',
  match: [readyIs('NotIn')],
  next: `${nodeConditions}
      addresses:
      {{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}
      {{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}
${nodeResources}
      {{ $kwokVersion := printf "kwok-%s" Version }}
      nodeInfo:
        architecture: amd64
        containerRuntimeVersion: {{ $kwokVersion }}
        kernelVersion: {{ $kwokVersion }}
        kubeletVersion: {{ $kwokVersion }}
        operatingSystem: linux
      phase: Running`,
});

const nodeHeartbeat = stage({
  name: 'node-heartbeat',
  kind: 'Node',
  match: [['.status.phase', 'In', ['Running']], readyIs('In')],
  delay: '  delay:\n    durationMilliseconds: 20000\n    jitterDurationMilliseconds: 25000\n',
  next: nodeConditions,
  immediateNextStage: true,
});

const containerStatuses = (running: boolean, state: string) => `      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: ${running}
        restartCount: 0
        started: ${running}
        state:
          ${state}
      {{ end }}`;

const podReady = stage({
  name: 'pod-ready',
  kind: 'Pod',
  match: [notDeleted, ['.status.phase', 'In', ['Pending']], readyIs('NotIn')],
  next: `      conditions:
      {{ range list "Initialized" "Ready" "ContainersReady" }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ . }}
      {{ end }}
${containerStatuses(true, `running:
            startedAt: {{ $now | Quote }}`)}
      {{ with NodeIPWith .spec.nodeName }}
      hostIP: {{ . | Quote }}
      {{ end }}
      {{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      podIP: {{ . | Quote }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}`,
});

// A Job pod's end: pod-complete and pod-fail share the selector and the delay
// and differ only in the exit-code annotation and the status they write.
function jobPodEnd(name: string, exitCodeOperator: 'Exists' | 'DoesNotExist', exitCode: string, reason: string, phase: string): string {
  return stage({
    name,
    kind: 'Pod',
    match: [
      notDeleted,
      ['.status.phase', 'In', ['Running']],
      ['.metadata.ownerReferences.[].kind', 'In', ['Job']],
      [annotation(KWOK_EXIT_CODE_ANNOTATION), exitCodeOperator],
    ],
    // KWOK waits a random time in [delay, jitter] and uses the jitter alone
    // when it is below the delay, so without its own annotation the jitter
    // falls back to the delay: the pod runs exactly that long.
    delay: `  delay:
    durationMilliseconds: 1000
    durationFrom:
      expressionFrom: '${annotation(KWOK_RUN_FOR_ANNOTATION)} // ${runForEnv}'
    jitterDurationMilliseconds: 1000
    jitterDurationFrom:
      expressionFrom: '${annotation(KWOK_RUN_FOR_JITTER_ANNOTATION)} // ${annotation(KWOK_RUN_FOR_ANNOTATION)} // ${runForEnv}'
`,
    next: `      conditions:
      {{ range list "Ready" "ContainersReady" }}
      - lastTransitionTime: {{ $now | Quote }}
        reason: PodCompleted
        status: "False"
        type: {{ . }}
      {{ end }}
${containerStatuses(false, `terminated:
            exitCode: ${exitCode}
            finishedAt: {{ $now | Quote }}
            reason: ${reason}
            startedAt: {{ $now | Quote }}`)}
      phase: ${phase}`,
  });
}

/** The `--config` file for kwok. */
export const kwokStagesYAML = [
  nodeInitialize,
  nodeHeartbeat,
  podReady,
  jobPodEnd('pod-complete', 'DoesNotExist', '0', 'Completed', 'Succeeded'),
  jobPodEnd('pod-fail', 'Exists', `{{ index $.metadata.annotations "${KWOK_EXIT_CODE_ANNOTATION}" }}`, 'Error', 'Failed'),
  stage({ name: 'pod-delete', kind: 'Pod', match: [['.metadata.deletionTimestamp', 'Exists']], next: 'delete' }),
].join('---\n');

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
