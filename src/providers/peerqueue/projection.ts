// What the watch of a peer queue keeps of each peer Job: the fields lending
// reads, and nothing else. A peer Job is another party's object; its labels,
// other annotations and the pod template's metadata can make it large
// without making it any different to us. What the mirror runs and what
// safety.ts inspects (the Job's spec and the template's pod spec) is kept
// whole: a field dropped here would let a Job that asks for something we
// refuse look like one we accept.
import type { V1Job, V1JobStatus } from '@kubernetes/client-node';

/** Our annotations on peer Jobs (claims, refusals, hosts, exit codes) all carry this prefix. */
const OUR_PREFIX = 'leasehold.dev/';

const STATUS_FIELDS = ['conditions', 'startTime', 'completionTime', 'active', 'ready', 'succeeded', 'failed', 'terminating'] as const;

export function projectPeerJob(job: V1Job): V1Job {
  const m = job.metadata ?? {};
  const annotations = Object.fromEntries(Object.entries(m.annotations ?? {}).filter(([k]) => k.startsWith(OUR_PREFIX)));
  const metadata: V1Job['metadata'] = {
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
    ...(m.creationTimestamp ? { creationTimestamp: m.creationTimestamp } : {}),
    ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
    ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
  };
  const out: V1Job = { apiVersion: job.apiVersion, kind: job.kind, metadata };
  if (job.spec) {
    const { metadata: _template, ...template } = job.spec.template ?? {};
    out.spec = { ...job.spec, template };
  }
  if (job.status) {
    const status: V1JobStatus = {};
    for (const f of STATUS_FIELDS) if (job.status[f] !== undefined) (status as Record<string, unknown>)[f] = job.status[f];
    out.status = status;
  }
  return out;
}
