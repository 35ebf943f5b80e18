// The mirrors this controller created or deleted that the informer does not
// show that way yet. A created mirror counts from the moment its create
// returned, so the room and the peer Job it took are not given again before
// the watch catches up; a deleted mirror the informer still lists is left
// out, so it is not deleted twice. Each entry stands until the informer
// agrees, or for EXPECTATION_MS at most.
import type { V1Job } from '@kubernetes/client-node';

/** How long a created mirror counts before the informer shows it. */
const EXPECTATION_MS = 60_000;

const mirrorKey = (mirror: V1Job) => `${mirror.metadata?.namespace}/${mirror.metadata?.name}`;

export class MirrorExpectations {
  /** Mirrors created and not yet seen by the informer, by namespace/name. */
  private readonly expected = new Map<string, { job: V1Job; at: number }>();
  /** Finished mirrors deleted here that the informer may still list, by namespace/name. */
  private readonly gone = new Map<string, number>();

  created(mirror: V1Job, at: number): void {
    this.expected.set(mirrorKey(mirror), { job: mirror, at });
  }

  deleted(mirror: V1Job, at: number): void {
    this.gone.set(mirrorKey(mirror), at);
  }

  /** The mirrors a pass counts: those the informer lists, less the deleted ones, and the created ones it does not list yet. */
  mirrors(listed: readonly V1Job[], now: number): V1Job[] {
    const seen = new Set(listed.map(mirrorKey));
    for (const [k, e] of this.expected) if (seen.has(k) || now - e.at > EXPECTATION_MS) this.expected.delete(k);
    for (const [k, at] of this.gone) if (!seen.has(k) || now - at > EXPECTATION_MS) this.gone.delete(k);
    const kept = listed.filter((m) => !this.gone.has(mirrorKey(m)));
    return [...kept, ...[...this.expected.values()].map((e) => e.job)];
  }
}
