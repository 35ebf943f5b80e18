// What the peer phase makes of each node's sequence of peer Jobs: the gap
// between two of them and where it goes, and the node's cycle while the
// queue still had work. The cycle is what throughput is made of in the
// steady state: the end-to-end figure (first claim → last Complete) also
// holds the last round, in which nodes run out of Jobs unevenly, and the
// rounds drained nodes skip, neither of which a lent node's turnaround
// decides.

export interface PeerJobSeen {
  node?: string;
  claimed?: number;
  running?: number;
  complete?: number;
  /** The peer Job's status.startTime and completionTime: our mirror's, written back (whole seconds). */
  startTime?: number;
  completionTime?: number;
  /** Its mirror on our side: seen created, seen with an active pod, seen finished. */
  mirrorCreated?: number;
  mirrorActive?: number;
  mirrorDone?: number;
  /** Its mirror's pod: seen created, Running, ended. */
  podCreated?: number;
  podRunning?: number;
  podDone?: number;
}

/** Our own Job's pod on a node, as seen: it takes the node back from lending. */
export interface OurPodSeen { node: string; created: number; running?: number; done?: number }

export interface NodeTimeline {
  /** Between two peer Jobs on one node: the last seen Complete to the next seen Running (negative when the next runs first). */
  gaps: number[];
  /** Where a gap goes: the last mirror seen finished → the next claim → its mirror → its pod active → the peer seeing it Running. */
  parts: { mirrorDoneToNextClaim: number[]; claimToMirror: number[]; mirrorToActive: number[]; activeToPeerRunning: number[] };
  /**
   * One node's claim to its next claim, over pairs with no pod of ours on
   * the node between them (a drain is our work, not lending's turnaround):
   * a lent node's period while the queue has work, the run time included.
   */
  cycles: number[];
  /** A node's cycle in parts, as our side sees it: the last pod seen ended → the next claim → its mirror → its pod → Running → ended. */
  cycleParts: { podDoneToClaim: number[]; claimToMirror: number[]; mirrorToPod: number[]; podToRunning: number[]; running: number[] };
}

export function nodeTimeline(all: readonly PeerJobSeen[], ourPods: readonly OurPodSeen[]): NodeTimeline {
  const out: NodeTimeline = { gaps: [], parts: { mirrorDoneToNextClaim: [], claimToMirror: [], mirrorToActive: [], activeToPeerRunning: [] }, cycles: [], cycleParts: { podDoneToClaim: [], claimToMirror: [], mirrorToPod: [], podToRunning: [], running: [] } };
  const byNode = new Map<string, PeerJobSeen[]>();
  for (const j of all) if (j.node && j.running !== undefined) byNode.set(j.node, [...(byNode.get(j.node) ?? []), j]);
  for (const [node, seq] of byNode) {
    seq.sort((a, b) => a.running! - b.running!);
    const ours = ourPods.filter((p) => p.node === node);
    for (let i = 1; i < seq.length; i++) {
      const [prev, next] = [seq[i - 1]!, seq[i]!];
      if (prev.complete !== undefined) out.gaps.push(next.running! - prev.complete);
      if (prev.mirrorDone !== undefined && next.claimed !== undefined) out.parts.mirrorDoneToNextClaim.push(next.claimed - prev.mirrorDone);
      if (next.claimed !== undefined && next.mirrorCreated !== undefined) out.parts.claimToMirror.push(next.mirrorCreated - next.claimed);
      if (next.mirrorCreated !== undefined && next.mirrorActive !== undefined) out.parts.mirrorToActive.push(next.mirrorActive - next.mirrorCreated);
      if (next.mirrorActive !== undefined) out.parts.activeToPeerRunning.push(next.running! - next.mirrorActive);
      if (prev.claimed === undefined || next.claimed === undefined) continue;
      const [from, to] = [prev.claimed, next.claimed];
      if (ours.some((p) => p.created < to && (p.done ?? Infinity) > from)) continue;
      out.cycles.push(to - from);
      const c = out.cycleParts;
      if (prev.podDone !== undefined) c.podDoneToClaim.push(to - prev.podDone);
      if (next.mirrorCreated !== undefined) c.claimToMirror.push(next.mirrorCreated - to);
      if (next.mirrorCreated !== undefined && next.podCreated !== undefined) c.mirrorToPod.push(next.podCreated - next.mirrorCreated);
      if (next.podCreated !== undefined && next.podRunning !== undefined) c.podToRunning.push(next.podRunning - next.podCreated);
      if (next.podRunning !== undefined && next.podDone !== undefined) c.running.push(next.podDone - next.podRunning);
    }
  }
  return out;
}

/** The share of a lent node's time a peer Job runs on it, from its cycles: run time / mean cycle. */
export function busyShare(cycles: readonly number[], runMs: number): number | undefined {
  if (cycles.length === 0) return undefined;
  const mean = cycles.reduce((s, c) => s + c, 0) / cycles.length;
  return Number((runMs / mean).toFixed(3));
}
