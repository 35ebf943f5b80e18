// What in a peer Job's pod template cannot run on our node, each as the
// field and why. The rule (DESIGN.md, Trust): a lent Job gets nothing of
// ours — no credential, no Secret or ConfigMap, no host namespace, path,
// port or device, nothing the restricted Pod Security Standard forbids, and
// no probe or hook that makes the kubelet open connections from the node's
// own network. What the peer set against that is refused, never silently
// changed, since the Job would not do what its owner asked; what it left
// unset mirror.ts fills with the restricted defaults.
import type { V1Container, V1Job, V1PodSpec, V1Probe, V1SecurityContext, V1PodSecurityContext, V1LifecycleHandler } from '@kubernetes/client-node';

const SAFE_VOLUMES = new Set(['name', 'emptyDir', 'downwardAPI']);
const SAFE_SELINUX_TYPES = new Set(['container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);

/**
 * Variables the container runtime's device hooks read to pick devices
 * (NVIDIA's toolkit, CUDA, ROCm, Intel, Neuron): set by a lent Job, they
 * would reach GPUs of the node the scheduler did not give it.
 */
const DEVICE_SELECTION = /^(NVIDIA_.*|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|ROCR_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|ZE_AFFINITY_MASK|NEURON_RT_VISIBLE_CORES|TPU_VISIBLE_CHIPS)$/;

/** What an admin bounds for every lent Job, and the PeerFleet's own bound on its run time. */
export interface JobLimits {
  /** Registries (host, or host/path) images may come from; empty: any. */
  allowedRegistries: readonly string[];
  /** The PeerFleet's spec.maxJobDuration, in seconds. */
  maxJobSeconds: number;
}

/**
 * Every reason the peer Job asks more than a lent Job may: an identity, a run
 * without an end, an image from a registry the admin did not list. A drain
 * never cuts a lent Job, so one without a deadline could hold a node forever.
 */
export function jobProblems(job: V1Job, limits: JobLimits): string[] {
  const problems: string[] = [];
  const deadline = job.spec?.activeDeadlineSeconds;
  if (deadline === undefined || deadline === null) {
    problems.push(`spec.activeDeadlineSeconds is unset: a lent Job must end on its own; set it to at most ${limits.maxJobSeconds} (the lender's maxJobDuration)`);
  } else if (deadline > limits.maxJobSeconds) {
    problems.push(`spec.activeDeadlineSeconds is ${deadline}, above the lender's maxJobDuration of ${limits.maxJobSeconds}s; set it to at most ${limits.maxJobSeconds}`);
  }
  const spec = job.spec?.template?.spec;
  const at = 'spec.template.spec';
  if (spec?.serviceAccountName || spec?.serviceAccount) {
    problems.push(`${at}.serviceAccountName is ${spec.serviceAccountName || spec.serviceAccount}: a lent Job runs with no identity of ours; remove it`);
  }
  if (spec?.automountServiceAccountToken === true) problems.push(`${at}.automountServiceAccountToken is true: a lent Job gets no ServiceAccount token; remove it`);
  if (limits.allowedRegistries.length > 0) {
    for (const [group, containers] of [['containers', spec?.containers], ['initContainers', spec?.initContainers]] as const) {
      for (const [i, c] of (containers ?? []).entries()) {
        const from = imageRepository(c.image ?? '');
        if (!limits.allowedRegistries.some((r) => from === r || from.startsWith(`${r.replace(/\/+$/, '')}/`))) {
          problems.push(`${at}.${group}[${i}].image ${c.image} is not from a registry the lender allows (${limits.allowedRegistries.join(', ')})`);
        }
      }
    }
  }
  return problems;
}

/** The image's repository with its registry host, as the runtime resolves it (docker.io when none is named). */
export function imageRepository(image: string): string {
  const name = image.split('@')[0]!.replace(/:[^/:]+$/, '');
  const first = name.split('/')[0]!;
  const hasHost = name.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasHost) return name;
  return name.includes('/') ? `docker.io/${name}` : `docker.io/library/${name}`;
}

/** Every reason the template cannot be made safe; empty when it can. */
export function unsafeFields(spec: V1PodSpec | undefined): string[] {
  const at = 'spec.template.spec';
  if (!spec) return [`${at} is empty`];
  const problems: string[] = [];
  for (const field of ['hostNetwork', 'hostPID', 'hostIPC'] as const) {
    if (spec[field]) problems.push(`${at}.${field} is true: a lent Job may not share the node's namespaces`);
  }
  for (const [i, v] of (spec.volumes ?? []).entries()) problems.push(...volumeProblems(v as unknown as Record<string, unknown>, `${at}.volumes[${i}]`));
  if (spec.resourceClaims?.length) problems.push(`${at}.resourceClaims is set: a lent Job may not claim our devices`);
  problems.push(...podSecurityProblems(spec.securityContext, `${at}.securityContext`));
  const groups = [
    ['containers', spec.containers],
    ['initContainers', spec.initContainers],
    ['ephemeralContainers', spec.ephemeralContainers as V1Container[] | undefined],
  ] as const;
  for (const [group, containers] of groups) {
    for (const [i, c] of (containers ?? []).entries()) problems.push(...containerProblems(c, `${at}.${group}[${i}]`));
  }
  return problems;
}

function volumeProblems(v: Record<string, unknown>, at: string): string[] {
  const kinds = Object.keys(v).filter((k) => v[k] !== undefined && v[k] !== null && !SAFE_VOLUMES.has(k));
  if (kinds.length === 0) return [];
  if (kinds.length === 1 && kinds[0] === 'projected') {
    const sources = ((v.projected as { sources?: Record<string, unknown>[] }).sources ?? []).flatMap((s) => Object.keys(s).filter((k) => s[k] != null));
    const bad = sources.filter((k) => k !== 'downwardAPI');
    return bad.length === 0 ? [] : [`${at}.projected projects ${[...new Set(bad)].join(', ')}: only downwardAPI may be projected into a lent Job`];
  }
  return [`${at} is a ${kinds.join(', ')} volume: a lent Job may have only emptyDir and downward API volumes`];
}

function podSecurityProblems(sc: V1PodSecurityContext | undefined, at: string): string[] {
  const problems = identityProblems(sc, at);
  if (sc?.sysctls?.length) problems.push(`${at}.sysctls is set: a lent Job may not change kernel settings`);
  return problems;
}

/** Fields the pod and its containers share, judged against the restricted profile. */
function identityProblems(sc: V1PodSecurityContext | V1SecurityContext | undefined, at: string): string[] {
  if (!sc) return [];
  const problems: string[] = [];
  if (sc.runAsUser === 0) problems.push(`${at}.runAsUser is 0: a lent Job runs as a non-root user`);
  if (sc.runAsNonRoot === false) problems.push(`${at}.runAsNonRoot is false: a lent Job runs as a non-root user`);
  if (sc.seccompProfile?.type === 'Unconfined') problems.push(`${at}.seccompProfile is Unconfined: a lent Job runs with RuntimeDefault or Localhost`);
  if (sc.appArmorProfile?.type === 'Unconfined') problems.push(`${at}.appArmorProfile is Unconfined: a lent Job may not run unconfined`);
  if (sc.windowsOptions?.hostProcess) problems.push(`${at}.windowsOptions.hostProcess is true: a lent Job may not run as a host process`);
  const se = sc.seLinuxOptions;
  if (se && (se.user || se.role || (se.type && !SAFE_SELINUX_TYPES.has(se.type)))) {
    problems.push(`${at}.seLinuxOptions sets a user, role or type the restricted profile forbids`);
  }
  return problems;
}

function containerProblems(c: V1Container, at: string): string[] {
  const problems: string[] = [];
  for (const [i, e] of (c.env ?? []).entries()) {
    if (DEVICE_SELECTION.test(e.name)) problems.push(`${at}.env[${i}] sets ${e.name}: a lent Job gets the devices the scheduler gives it, never picks its own`);
    if (e.valueFrom?.secretKeyRef) problems.push(`${at}.env[${i}] (${e.name}) reads a Secret: a lent Job gets none of ours`);
    if (e.valueFrom?.configMapKeyRef) problems.push(`${at}.env[${i}] (${e.name}) reads a ConfigMap: a lent Job gets none of ours`);
  }
  for (const [i, e] of (c.envFrom ?? []).entries()) {
    const what = e.secretRef ? 'a Secret' : e.configMapRef ? 'a ConfigMap' : 'a source';
    problems.push(`${at}.envFrom[${i}] reads ${what}: a lent Job gets none of ours`);
  }
  for (const [i, p] of (c.ports ?? []).entries()) {
    if (p.hostPort) problems.push(`${at}.ports[${i}].hostPort is ${p.hostPort}: a lent Job may not bind the node's ports`);
  }
  if (c.volumeDevices?.length) problems.push(`${at}.volumeDevices is set: a lent Job may not use our block devices`);
  if (c.resources?.claims?.length) problems.push(`${at}.resources.claims is set: a lent Job may not claim our devices`);
  const sc = c.securityContext;
  if (sc?.privileged) problems.push(`${at}.securityContext.privileged is true: a lent Job is never privileged`);
  if (sc?.allowPrivilegeEscalation) problems.push(`${at}.securityContext.allowPrivilegeEscalation is true: a lent Job may not gain privileges`);
  if (sc?.capabilities?.add?.length) problems.push(`${at}.securityContext.capabilities.add is ${sc.capabilities.add.join(',')}: a lent Job gets no added capabilities`);
  if (sc?.procMount && sc.procMount !== 'Default') problems.push(`${at}.securityContext.procMount is ${sc.procMount}: a lent Job sees the default /proc`);
  problems.push(...identityProblems(sc, `${at}.securityContext`));
  const probes = { livenessProbe: c.livenessProbe, readinessProbe: c.readinessProbe, startupProbe: c.startupProbe };
  for (const [name, probe] of Object.entries(probes)) problems.push(...hostTarget(probe, `${at}.${name}`));
  problems.push(...hostTarget(c.lifecycle?.postStart, `${at}.lifecycle.postStart`), ...hostTarget(c.lifecycle?.preStop, `${at}.lifecycle.preStop`));
  return problems;
}

/**
 * The kubelet runs httpGet and tcpSocket from the node, not from the pod: a
 * host other than the pod's own would let a lent Job reach our network.
 */
function hostTarget(handler: V1Probe | V1LifecycleHandler | undefined, at: string): string[] {
  const host = handler?.httpGet?.host ?? handler?.tcpSocket?.host;
  return host ? [`${at} targets host ${host}: the kubelet would connect from our node; a lent Job's probes and hooks reach only its own pod`] : [];
}
