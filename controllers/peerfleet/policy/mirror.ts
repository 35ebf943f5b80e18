// The mirror Job: the peer Job as it runs on our node. Its pod template is
// the peer's containers and the Job's run rules, and nothing else of the
// peer's: no labels or annotations (they could join our Services or
// NetworkPolicies), no priority, scheduler, runtime class or pull Secret of
// ours, no placement of its own. It is pinned to the one node by required
// node affinity (so the scheduler still checks room), tolerates only those of
// that node's taints the admin listed, runs as a ServiceAccount with no rights and no token, and takes the
// restricted Pod Security defaults. A template safety.ts refuses is never mirrored.
// A container that asks for no GPU is told by its environment to see none.
// A mirror has no owner reference: a PeerFleet deleted with a foreground
// cascade would have the garbage collector delete running mirrors; the
// PeerFleet's finalizer waits for them, and finished ones are deleted here.
import type { V1Container, V1EnvVar, V1Job, V1Node, V1PodSpec, V1SecurityContext } from '@kubernetes/client-node';
import { NODE_LABEL, PEER_JOB_ANNOTATION, PEER_JOB_UID_LABEL, PEERFLEET_LABEL } from '../labels.js';
import { GPU } from './fit.js';
import { tolerationsFor, type TaintRule } from './nodes.js';
import { parseQuantity } from './quantity.js';
import { jobProblems, unsafeFields } from './safety.js';

/** The ServiceAccount every mirror runs as: the chart creates it in PeerFleet namespaces and binds it to nothing. */
export const MIRROR_SERVICE_ACCOUNT = 'leasehold-peer-job';

const UID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The mirror's name, from the peer Job's uid: a restart or a second pass finds the same one. */
export function mirrorName(peerJobUID: string): string {
  return `lh-peer-${peerJobUID}`;
}

/** What an admin decided for every PeerFleet (chart values), as the controller flags carry it. */
export interface LendingPolicy {
  /** The taints a mirror may tolerate (peerFleet.tolerateTaints). */
  tolerate: readonly TaintRule[];
  /** Registries a lent Job's images may come from (peerFleet.allowedRegistries); empty: any. */
  allowedRegistries: readonly string[];
}

export interface MirrorInput {
  peerJob: V1Job;
  fleet: { name: string; namespace: string; uid?: string };
  node: V1Node;
  policy: LendingPolicy;
  /** The PeerFleet's spec.maxJobDuration, in seconds. */
  maxJobSeconds: number;
}

export type MirrorResult = { kind: 'mirror'; job: V1Job } | { kind: 'refused'; reasons: string[] };

export function makeMirror({ peerJob, fleet, node, policy, maxJobSeconds }: MirrorInput): MirrorResult {
  const uid = peerJob.metadata?.uid ?? '';
  if (!UID.test(uid)) return { kind: 'refused', reasons: [`metadata.uid ${JSON.stringify(uid)} is not a Kubernetes uid`] };
  const reasons = [...jobProblems(peerJob, { allowedRegistries: policy.allowedRegistries, maxJobSeconds }), ...unsafeFields(peerJob.spec?.template?.spec)];
  if (reasons.length > 0) return { kind: 'refused', reasons };
  const nodeName = node.metadata?.name ?? '';
  const labels = { [PEERFLEET_LABEL]: fleet.name, [NODE_LABEL]: nodeName, [PEER_JOB_UID_LABEL]: uid };
  const s = peerJob.spec!;
  const job: V1Job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: mirrorName(uid),
      namespace: fleet.namespace,
      labels,
      annotations: { [PEER_JOB_ANNOTATION]: `${peerJob.metadata?.namespace}/${peerJob.metadata?.name}` },
    },
    spec: {
      ...pick(s, ['parallelism', 'completions', 'completionMode', 'backoffLimit', 'backoffLimitPerIndex', 'maxFailedIndexes', 'activeDeadlineSeconds', 'podFailurePolicy', 'successPolicy', 'podReplacementPolicy']),
      template: { metadata: { labels }, spec: safePodSpec(s.template.spec!, node, policy) },
    },
  };
  return { kind: 'mirror', job };
}

function pick<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Pick<T, K> {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) as Pick<T, K>;
}

function safePodSpec(peer: V1PodSpec, node: V1Node, policy: LendingPolicy): V1PodSpec {
  const kept = pick(peer, [
    'containers',
    'initContainers',
    'volumes',
    'restartPolicy',
    'terminationGracePeriodSeconds',
    'activeDeadlineSeconds',
    'dnsPolicy',
    'dnsConfig',
    'hostname',
    'subdomain',
    'setHostnameAsFQDN',
    'shareProcessNamespace',
    'hostAliases',
    'os',
    'hostUsers',
  ]);
  return {
    ...kept,
    containers: peer.containers.map(safeContainer),
    ...(peer.initContainers ? { initContainers: peer.initContainers.map(safeContainer) } : {}),
    serviceAccountName: MIRROR_SERVICE_ACCOUNT,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    securityContext: { ...peer.securityContext, runAsNonRoot: true, seccompProfile: peer.securityContext?.seccompProfile ?? { type: 'RuntimeDefault' } },
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [node.metadata?.name ?? ''] }] }],
        },
      },
    },
    tolerations: tolerationsFor(node, policy.tolerate),
  };
}

/**
 * What the NVIDIA container runtime reads to give a container no GPU at all.
 * CUDA base images set NVIDIA_VISIBLE_DEVICES=all, and on a node where the
 * runtime takes devices from the environment a container that asked the
 * scheduler for no GPU would see every GPU of the node, unaccounted, beside
 * the Jobs they were given to. "void" turns the runtime's hook off for the
 * container (an unset variable is not enough: an image with CUDA_VERSION and
 * no NVIDIA_REQUIRE_CUDA counts as asking for all); the MIG variables act
 * only when non-empty, and an image may set them too.
 */
export const NO_GPU_ENV: readonly V1EnvVar[] = [
  { name: 'NVIDIA_VISIBLE_DEVICES', value: 'void' },
  { name: 'NVIDIA_MIG_CONFIG_DEVICES', value: '' },
  { name: 'NVIDIA_MIG_MONITOR_DEVICES', value: '' },
];
const NO_GPU_NAMES = new Set(NO_GPU_ENV.map((e) => e.name));

/** Whether the container asks the scheduler for at least one GPU (requests default to limits). */
export function requestsGPU(c: V1Container): boolean {
  return [c.resources?.requests?.[GPU], c.resources?.limits?.[GPU]].some((q) => q !== undefined && (parseQuantity(String(q)) ?? 0n) > 0n);
}

/** A container of the mirror: the peer's, with privileges dropped and, unless it asks for GPUs, none visible. */
export function safeContainer(c: V1Container): V1Container {
  const sc: V1SecurityContext = {
    ...c.securityContext,
    allowPrivilegeEscalation: false,
    privileged: false,
    capabilities: { drop: ['ALL'] },
  };
  if (requestsGPU(c)) return { ...c, securityContext: sc };
  // A peer entry of one of these names (valueFrom too) is dropped, not left beside ours: no reading of the list picks the peer's.
  const env = [...(c.env ?? []).filter((e) => !NO_GPU_NAMES.has(e.name)), ...NO_GPU_ENV.map((e) => ({ ...e }))];
  return { ...c, env, securityContext: sc };
}
