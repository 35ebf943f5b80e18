// Whether a peer Job fits what a node has free, and which queued Job a node
// claims next. Requests are computed as the scheduler computes a pod's
// (containers and restartable init containers summed, the largest ordinary
// init container if larger, plus overhead), times the pods the Job runs at
// once, since a mirror runs all of them on the one node.
import type { V1Container, V1Job, V1Node, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { CLAIMED_BY_ANNOTATION, REFUSED_ANNOTATION } from '../../../src/providers/peerqueue/types.js';
import { NODE_LABEL } from '../labels.js';
import { admits } from './placement.js';
import { formatQuantity, parseQuantity } from './quantity.js';

export const GPU = 'nvidia.com/gpu';

/** Resource name -> milli-units. */
export type Resources = Record<string, bigint>;

export type RequestsResult = { ok: true; requests: Resources } | { ok: false; message: string };

function add(into: Resources, from: Resources, times = 1n): Resources {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0n) + v * times;
  return into;
}

function max(a: Resources, b: Resources): Resources {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) if (v > (out[k] ?? 0n)) out[k] = v;
  return out;
}

function parsed(list: Record<string, string> | undefined, where: string): Resources | string {
  const out: Resources = {};
  for (const [k, v] of Object.entries(list ?? {})) {
    const q = parseQuantity(String(v));
    if (q === undefined) return `${where}[${k}] is ${JSON.stringify(v)}, not a quantity`;
    out[k] = q;
  }
  return out;
}

/** Requests default to limits where only limits are set, as the API server defaults them. */
function containerRequests(c: V1Container, where: string): Resources | string {
  const limits = parsed(c.resources?.limits, `${where}.resources.limits`);
  const requests = parsed(c.resources?.requests, `${where}.resources.requests`);
  if (typeof limits === 'string') return limits;
  if (typeof requests === 'string') return requests;
  return { ...limits, ...requests };
}

// Informer objects are replaced, never changed in place, so what is read
// from one is kept with it: a pass reads every pod's and every queued Job's
// requests, and parsing them again at each pass was most of its time.
const podRequestsOf = new WeakMap<V1PodSpec, RequestsResult>();
const jobRequestsOf = new WeakMap<V1Job, RequestsResult>();

/** What one pod of this spec asks the node for, including the pod slot it takes. */
export function podRequests(spec: V1PodSpec | undefined): RequestsResult {
  if (!spec) return readPodRequests(spec);
  const kept = podRequestsOf.get(spec);
  if (kept) return kept;
  const read = readPodRequests(spec);
  podRequestsOf.set(spec, read);
  return read;
}

function readPodRequests(spec: V1PodSpec | undefined): RequestsResult {
  let running: Resources = { pods: 1000n };
  for (const [i, c] of (spec?.containers ?? []).entries()) {
    const r = containerRequests(c, `containers[${i}]`);
    if (typeof r === 'string') return { ok: false, message: r };
    add(running, r);
  }
  // Init containers run one after another, next to the sidecars started before them.
  let sidecars: Resources = {};
  let init: Resources = {};
  for (const [i, c] of (spec?.initContainers ?? []).entries()) {
    const r = containerRequests(c, `initContainers[${i}]`);
    if (typeof r === 'string') return { ok: false, message: r };
    if (c.restartPolicy === 'Always') {
      sidecars = add(sidecars, r);
      init = max(init, sidecars);
    } else {
      init = max(init, add({ ...sidecars }, r));
    }
  }
  running = max(add(running, sidecars), init);
  const overhead = parsed(spec?.overhead, 'overhead');
  if (typeof overhead === 'string') return { ok: false, message: overhead };
  return { ok: true, requests: add(running, overhead) };
}

/** How many of the Job's pods run at once. */
export function podsAtOnce(job: V1Job): number {
  const parallelism = job.spec?.parallelism ?? 1;
  const completions = job.spec?.completions ?? parallelism;
  return Math.max(1, Math.min(parallelism, completions));
}

/** What the whole Job asks of the one node its mirror runs on. */
export function jobRequests(job: V1Job): RequestsResult {
  const kept = jobRequestsOf.get(job);
  if (kept) return kept;
  const pod = podRequests(job.spec?.template?.spec);
  const read: RequestsResult = pod.ok ? { ok: true, requests: add({}, pod.requests, BigInt(podsAtOnce(job))) } : { ok: false, message: `spec.template.spec.${pod.message}` };
  jobRequestsOf.set(job, read);
  return read;
}

/**
 * The pods that hold their requests on a node: bound there, or a mirror
 * pinned there that the scheduler has not bound yet (counting it keeps two
 * claims in a row from both taking the same room), and not finished.
 */
export function holdsResources(pod: V1Pod, node: string): boolean {
  if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return false;
  return pod.spec?.nodeName ? pod.spec.nodeName === node : pod.metadata?.labels?.[NODE_LABEL] === node;
}

/**
 * The node's allocatable less what its pods request and less the GPUs an
 * operator withholds from lending. A pod whose requests cannot be read holds
 * nothing here; the API server would not have admitted it.
 */
export function freeAllocatable(node: V1Node, pods: readonly V1Pod[], withheldGPUs = 0): Resources {
  const name = node.metadata?.name ?? '';
  const allocatable = parsed(node.status?.allocatable, 'status.allocatable');
  const free: Resources = typeof allocatable === 'string' ? {} : allocatable;
  for (const pod of pods) {
    if (!holdsResources(pod, name)) continue;
    const r = podRequests(pod.spec);
    if (r.ok) add(free, r.requests, -1n);
  }
  if (withheldGPUs > 0) free[GPU] = (free[GPU] ?? 0n) - BigInt(withheldGPUs) * 1000n;
  return free;
}

/** The resources the request lacks, each as "cpu 4 (free 2)"; empty when it fits. */
export function shortfall(requests: Resources, free: Resources): string[] {
  return Object.entries(requests)
    .filter(([k, v]) => v > 0n && v > (free[k] ?? 0n))
    .map(([k, v]) => `${k} ${formatQuantity(k, v)} (free ${formatQuantity(k, (free[k] ?? 0n) > 0n ? free[k]! : 0n)})`);
}

/** Whether a listed Job may still be claimed by anyone: not claimed, not refused, not suspended, not finished. */
export function claimable(job: V1Job): boolean {
  const a = job.metadata?.annotations ?? {};
  const done = job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
  return !a[CLAIMED_BY_ANNOTATION] && !a[REFUSED_ANNOTATION] && !job.spec?.suspend && !done;
}

export type Choice = { kind: 'claim'; job: V1Job } | { kind: 'none'; message: string };

/** The order of localeCompare, without building a collator at each comparison. */
const byName = new Intl.Collator();

const created = (job: V1Job) => new Date(job.metadata?.creationTimestamp ?? 0).getTime();

/**
 * The Job a node claims next: the oldest the peer created among those that
 * fit (Kueue's BestEffortFIFO). Creation order is the one order both sides
 * can see: a Job carries no priority our token can read (PriorityClass
 * values live in the peer cluster), and taking the oldest that fits keeps
 * one large Job from holding back every small one our free room could run.
 * The peer's own nodeSelector and required affinity must admit our node.
 */
export function chooseJob(queue: readonly V1Job[] | OrderedQueue, node: V1Node, free: Resources, held?: Reservations): Choice {
  const ordered = queue instanceof OrderedQueue ? queue : new OrderedQueue(queue);
  const entries = ordered.entries;
  if (entries.length === 0) return { kind: 'none', message: 'the peer queue has no Job to run' };
  const uid = (job: V1Job) => job.metadata?.uid ?? '';
  // The Job this node set aside first; then the oldest no other node set
  // aside; a Job another busy node set aside only when nothing else fits,
  // so a free node never waits for a busy one's next Job.
  if (held?.mine.size) {
    const fitting = [...held.mine].flatMap((id) => {
      const e = ordered.byUID.get(id);
      return e && e.requests.ok && admits(e.placement, node) && shortfall(e.requests.requests, free).length === 0 ? [e] : [];
    });
    const oldest = fitting.sort((a, b) => a.rank - b.rank)[0];
    if (oldest) return { kind: 'claim', job: oldest.job };
  }
  // Less of one resource free than any Job asks: none fits, and only the
  // nearest is named (a busy node asks every pass: it must cost no scan).
  const full = Object.entries(ordered.smallest).some(([k, v]) => v > (free[k] ?? 0n));
  const byOthers = (id: string) => held!.owner.has(id) && !held!.mine.has(id);
  const rounds = !full && held && held.owner.size > held.mine.size ? [false, ...(held.takeOthers === false ? [] : [true])] : [undefined];
  let nearest = '';
  for (const othersRound of rounds) {
    for (const { job, requests, placement } of entries) {
      if (othersRound !== undefined && byOthers(uid(job)) !== othersRound) continue;
      if (!requests.ok) continue;
      if (!admits(placement, node)) continue;
      const short = shortfall(requests.requests, free);
      if (short.length === 0) return { kind: 'claim', job };
      nearest ||= `${job.metadata?.name} needs ${short.join(', ')}`;
      if (full) break;
    }
  }
  const why = nearest || 'none of them admits this node or has readable requests';
  return { kind: 'none', message: `${entries.length} queued Job(s), none fits: ${why}` };
}

/**
 * Peer Jobs that Lending nodes set aside, by uid: each node records the Job
 * it will claim next in its session while its current one runs, so that the
 * claim needs no status write when the room frees.
 */
export interface Reservations {
  /** Set aside by the node choosing. */
  mine: ReadonlySet<string>;
  /** Every Job set aside, to the node that set it aside: one map for the pass, not a set per node, so that a pass stays linear in nodes. */
  owner: ReadonlyMap<string, string>;
  /** Whether a Job another node set aside may be taken when nothing else fits (default true). */
  takeOthers?: boolean;
}

const placements = new WeakMap<V1Job, V1PodSpec>();

/** Where the Job's pods may go, for our nodes: the peer's nodeName names a peer node, and the mirror tolerates our node's taints itself. */
function placementOf(job: V1Job): V1PodSpec {
  const kept = placements.get(job);
  if (kept) return kept;
  const placement = { ...(job.spec?.template?.spec ?? { containers: [] }), nodeName: undefined, tolerations: [{ operator: 'Exists' }] };
  placements.set(job, placement);
  return placement;
}

/**
 * The claimable Jobs in the order nodes claim them (oldest first, then by
 * name), each with its requests and placement read once: a pass asks it
 * once per node, and sorting and parsing the queue for every node made a
 * pass cost nodes × Jobs × log Jobs.
 */
export class OrderedQueue {
  /** rank: the place in claim order, kept when Jobs before it are taken out. */
  readonly entries: { job: V1Job; requests: RequestsResult; placement: V1PodSpec; rank: number }[];
  /** Per resource, the least any Job asks (readable requests only); kept as it was when Jobs are taken out, so never above the true least. */
  readonly smallest: Resources = {};
  /** The entries by Job uid, for the Jobs nodes set aside. */
  readonly byUID = new Map<string, OrderedQueue['entries'][number]>();

  constructor(queue: readonly V1Job[]) {
    const keyed = queue.filter(claimable).map((job) => ({ job, at: created(job), name: job.metadata?.name ?? '' }));
    keyed.sort((a, b) => a.at - b.at || byName.compare(a.name, b.name));
    this.entries = keyed.map(({ job }, rank) => ({ job, requests: jobRequests(job), placement: placementOf(job), rank }));
    for (const e of this.entries) this.byUID.set(e.job.metadata?.uid ?? '', e);
    const readable = this.entries.flatMap((e) => (e.requests.ok ? [e.requests.requests] : []));
    for (const k of new Set(readable.flatMap((r) => Object.keys(r)))) {
      this.smallest[k] = readable.reduce((least, r) => ((r[k] ?? 0n) < least ? (r[k] ?? 0n) : least), readable[0]![k] ?? 0n);
    }
  }

  /** Takes a Job out once a node has claimed it in this pass. */
  remove(job: V1Job): void {
    const i = this.entries.findIndex((e) => e.job === job);
    if (i >= 0) this.entries.splice(i, 1);
    this.byUID.delete(job.metadata?.uid ?? '');
  }
}
