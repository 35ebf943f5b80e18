// The peer queue as our own writes left it. The watch of the peer queue
// brings back each claim and write-back a moment after the API server
// answered it; a pass in between would judge the Job as it was before, and
// write the same status back again or count a claim as missing. The answer
// of each write is the Job at its new resourceVersion: it stands in for the
// watched Job while the watch still shows a version the write replaced, and
// is dropped as soon as the watch shows any other version (ours or a newer
// write by someone else), so the view is never older than the watch.
import type { V1Job } from '@kubernetes/client-node';

/** How long a written Job stands in before the watch shows it; past that, the watch is trusted again. */
export const PEER_WRITE_MS = 60_000;

interface Written {
  job: V1Job;
  /** The versions this answer replaced: while the watch shows one of them, the answer is newer. */
  replaced: Set<string>;
  at: number;
}

export class PeerWrites {
  private readonly byUID = new Map<string, Written>();

  /** `before` is the Job the effect was decided on, `after` the API server's answer to the write. */
  record(before: V1Job, after: V1Job, now: number): void {
    const uid = after.metadata?.uid ?? '';
    const from = before.metadata?.resourceVersion;
    if (!uid || !from || after.metadata?.resourceVersion === from) return;
    const kept = this.byUID.get(uid);
    // A second write decided on the first one's answer replaces what that one replaced too.
    const replaced = new Set(kept && kept.job.metadata?.resourceVersion === from ? kept.replaced : []);
    replaced.add(from);
    this.byUID.set(uid, { job: after, replaced, at: now });
  }

  /** The watched Jobs, each replaced by our write's answer while the watch has not caught up with it. */
  view(jobs: readonly V1Job[] | undefined, now: number): V1Job[] | undefined {
    if (jobs === undefined) return undefined;
    const seen = new Set<string>();
    const out = jobs.map((job) => {
      const uid = job.metadata?.uid ?? '';
      const w = this.byUID.get(uid);
      if (!w) return job;
      seen.add(uid);
      if (now - w.at <= PEER_WRITE_MS && w.replaced.has(job.metadata?.resourceVersion ?? '')) return w.job;
      this.byUID.delete(uid);
      return job;
    });
    // A Job the watch no longer lists is gone from the peer: nothing of ours stands in for it.
    for (const uid of [...this.byUID.keys()]) if (!seen.has(uid)) this.byUID.delete(uid);
    return out;
  }
}
