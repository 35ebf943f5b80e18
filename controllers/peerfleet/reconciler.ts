// The PeerFleet reconciler. Each pass reads the credential (and CA) Secrets
// with our own client, asks the peer for one namespaced list with that
// token, and judges readiness; then the lending pass (policy/lending.ts) steps each
// node's machine from what the informers hold. The verdict, the hosts and
// the accounting are written in one status write, and only then do the
// pass's effects run: the status is the intent (a session names its node
// and Job before the claim). Secrets are read by name (the chart grants
// get, never list or watch), so a fixed Secret is seen at the next poll.
//
// Everything that waits on the peer (the probe and the lending effects)
// runs on the shared effect runner, off the reconcile workers, so that a
// slow peer of one PeerFleet never holds a worker another PeerFleet needs.
// A pass decides, writes, starts the effects and returns; their end
// enqueues the PeerFleet and the next pass takes their result. While a
// PeerFleet's effects run, its passes decide nothing: a second decision on
// top of unfinished effects could claim or write back twice. The intent is
// written only when a slot for its effects is free, so a written session
// never waits on a full runner.
import { PEERFLEET_RESOURCE, type PeerFleet } from '../../src/api/index.js';
import type { V1Job } from '@kubernetes/client-node';
import type { ObjectCache, ReconcileResult } from '../../src/kube/cache.js';
import type { EffectRunner } from '../../src/kube/effects.js';
import { isConflict } from '../../src/kube/client.js';
import type { EventRecorder } from '../../src/kube/events.js';
import type { StatusWriter } from '../../src/kube/status.js';
import type { PeerQueue } from '../../src/providers/peerqueue/types.js';
import { hasFinalizer } from '../../src/kube/finalizers.js';
import { objectKey, splitKey } from '../../src/kube/resource.js';
import { MirrorExpectations } from './expectations.js';
import { lendingPass, type FleetPass, type FleetWorld, type LendEffect } from './policy/lending.js';
import type { PeerFleetMetrics } from './metrics.js';
import type { EffectResult, LendingEffects } from './effects.js';
import { readPeer, type PeerAccess, type PeerReadingDeps, type Reading } from './peerreading.js';
import { PeerWrites } from './peerview.js';
import { pollInterval, PollSchedule, UNREACHABLE_RETRY_MS } from './pollschedule.js';
import { covered, fleetStatus, lendingChange, STATUS_BATCH_MS } from './status.js';
import { judgeReadiness, type Verdict, type VerdictInput } from './policy/verdict.js';

/** Our side of a pass, as the informers hold it. */
type OurSide = Pick<FleetWorld, 'clusterID' | 'nodes' | 'pods' | 'mirrors' | 'holders' | 'shared' | 'notOptedIn'>;

/** What lending needs beside the verdict; absent, the reconciler judges readiness only. */
export interface LendingDeps {
  /** Our side of the pass: nodes, pods, mirrors and holder Leases as the informers hold them. */
  world(fleet: PeerFleet): OurSide;
  /** The PeerFleet namespace's Pod Security enforce label; null when it has none; undefined until the namespace was read. */
  podSecurity(namespace: string): string | null | undefined;
  /** Why mirrors of the fleet could reach out freely (policy/egress.ts); undefined when a default deny holds. */
  egress(fleet: PeerFleet): string | undefined;
  /** The peer queue for this access (the same client the probe uses). */
  queue(access: PeerAccess): PeerQueue;
  /** The peer's lendable Jobs as the watch holds them; undefined until the watch has listed them. */
  peerJobs(access: PeerAccess): V1Job[] | undefined;
  /** Why the watch of this peer was cut off past its budget, while it stays cut off; undefined otherwise. */
  peerCutOff(access: PeerAccess): string | undefined;
  operations: Pick<LendingEffects, 'run'>;
  finalizers: { add(fleet: PeerFleet): Promise<PeerFleet>; remove(fleet: PeerFleet): Promise<unknown> };
  metrics?: PeerFleetMetrics;
}

export interface PeerFleetReconcilerDeps extends PeerReadingDeps {
  fleets: ObjectCache<PeerFleet>;
  status: Pick<StatusWriter, 'write'>;
  events: Pick<EventRecorder, 'record' | 'recordSeries'>;
  now?: () => Date;
  lending?: LendingDeps;
  /**
   * Where probes and lending effects run, and how many at once across every
   * PeerFleet; absent, they run on the reconcile worker (unit tests).
   * `requeue` enqueues a PeerFleet when its effect ends.
   */
  effects?: { runner: EffectRunner<PeerFleetEffect>; concurrency: number; requeue(key: string): void };
}

/** What an effect of a PeerFleet leaves for the next pass. */
export type PeerFleetEffect =
  | { kind: 'probe'; generation: number | undefined; reading: Reading }
  | { kind: 'lend'; fleet: PeerFleet; pass: FleetPass; verdict: Verdict; deleting: boolean; results: EffectResult[]; heldUntil?: number };

/** How soon a pass looks again when every effect slot is taken. */
export const EFFECT_SLOT_RETRY_MS = 1_000;

/** Kept on a PeerFleet until its last mirror has finished and the peer has its record. */
export const LENDING_FINALIZER = 'leasehold.dev/peer-lending';

/** A PeerFleet's effects of one kind (write-backs and deletions, then claims) run this many at a time. */
const EFFECTS_AT_ONCE = 16;

export class PeerFleetReconciler {
  private readonly polls = new PollSchedule();
  private readonly expectations = new MirrorExpectations();
  /** Each fleet's claims and write-backs on the peer that its watch may not show yet. */
  private readonly peerWrites = new Map<string, PeerWrites>();
  /** The last reading of each fleet's Secrets and peer, and until when it stands. */
  private readonly observed = new Map<string, { generation: number | undefined; until: number; input: VerdictInput; access: PeerAccess | undefined }>();

  /** Each fleet's standing notes at its last pass, so that one is recorded once while it stands. */
  private readonly standing = new Map<string, Set<string>>();

  constructor(private readonly deps: PeerFleetReconcilerDeps) {}

  /** The UIDs each key's effects ran for: a PeerFleet deleted and created again under its name is another owner. */
  private readonly uids = new Map<string, Set<string>>();
  /** Slots taken by passes between deciding and starting their effects. */
  private reserved = 0;
  /** Fleets that something woke while their effects ran: those passes decided nothing. */
  private readonly missed = new Set<string>();
  /** When each fleet last wrote the lending part of its status. */
  private readonly lendingWritten = new Map<string, number>();

  async reconcile(key: string): Promise<ReconcileResult | void> {
    const { namespace = '', name } = splitKey(key);
    let fleet = this.deps.fleets.get(namespace, name);
    const effects = this.deps.effects;
    if (!fleet) {
      this.polls.forget(key);
      this.observed.delete(key);
      this.standing.delete(key);
      this.peerWrites.delete(key);
      this.missed.delete(key);
      this.lendingWritten.delete(key);
      this.deps.forget?.(key);
      // An effect still running is cancelled; its end enqueues the key again, and that pass drops its result.
      const left = new Set<string>();
      for (const uid of this.uids.get(key) ?? []) {
        effects?.runner.forget(uid);
        if (effects?.runner.get(uid)) left.add(uid);
      }
      if (left.size) this.uids.set(key, left);
      else this.uids.delete(key);
      return;
    }
    const uid = fleet.metadata?.uid ?? key;
    if (effects) {
      const uids = this.uids.get(key) ?? new Set<string>();
      this.uids.set(key, uids.add(uid));
      // Its end enqueues the PeerFleet again.
      if (effects.runner.get(uid)?.state === 'running') {
        this.missed.add(key);
        return;
      }
      const done = effects.runner.take(uid)?.result;
      if (done?.kind === 'lend') return this.settle(key, fleet, done);
      if (done?.kind === 'probe') this.keep(key, fleet, done.generation, done.reading);
      // This pass sees the world as it is now, whatever woke the PeerFleet while an effect ran.
      this.missed.delete(key);
    }
    const lending = this.deps.lending;
    const deleting = !!fleet.metadata?.deletionTimestamp;
    if (lending && deleting && !hasFinalizer(fleet, LENDING_FINALIZER)) return;
    if (lending && !deleting && !hasFinalizer(fleet, LENDING_FINALIZER)) fleet = await lending.finalizers.add(fleet);
    const now = this.now();
    const reading = await this.observeAtPoll(key, fleet, now);
    if (reading.kind === 'probing') return reading.wait === undefined ? undefined : { requeueAfter: reading.wait };
    const { input, access, poll } = reading;
    const verdict = judgeReadiness(input);
    // One snapshot of our side per pass: the effects act on what the pass judged.
    const world = lending?.world(fleet);
    const pass = lending && world ? this.pass(lending, fleet, world, verdict, access, now) : undefined;
    const change = pass && !deleting ? lendingChange(fleet, pass) : 'none';
    const batchOpen = (this.lendingWritten.get(key) ?? -Infinity) + STATUS_BATCH_MS;
    // Held passes are still made: one that finds a drain inside the batch
    // writes it at once, and so does one that starts a session (a node's
    // first claim, once per session, not per Job); of the others, what the
    // written status already covers runs.
    if (change === 'change' && now.getTime() < batchOpen && pass!.sessionsStarted === 0) {
      const wait = { requeueAfter: batchOpen - now.getTime() };
      const early = pass && access && lending && world ? covered(fleet, pass) : undefined;
      if (!early || !access || !lending || !world) return wait;
      if (effects && !this.reserve()) return { requeueAfter: Math.min(EFFECT_SLOT_RETRY_MS, wait.requeueAfter) };
      const nodes = new Set(early.effects.flatMap((e) => (e.kind === 'claim' ? [e.node] : [])));
      try {
        for (const note of pass!.notes) if (note.reason === 'Claimed' && note.node && nodes.has(note.node)) await this.deps.events.recordSeries(fleet, note.type, note.reason, note.message);
      } catch (err) {
        if (effects) this.reserved--;
        throw err;
      }
      // The rest of the pass is made again when the batch ends.
      const outcome = { fleet, pass: early, verdict, deleting, heldUntil: batchOpen };
      if (!effects) return this.settle(key, fleet, { kind: 'lend', ...outcome, results: await this.runEffects(lending, fleet, world, early, access, now) });
      effects.runner.start(uid, `lend/${key}`, async (signal) => ({ kind: 'lend', ...outcome, results: await this.runEffects(lending, fleet, world, early, access, now, signal) }), () => effects.requeue(key));
      this.reserved--;
      return;
    }
    const starts = !!(effects && lending && pass && access && pass.effects.length > 0);
    // No slot for the effects: nothing is written, and the pass is made again shortly.
    if (starts && !this.reserve()) return { requeueAfter: EFFECT_SLOT_RETRY_MS };
    let written: boolean;
    try {
      written = await this.record(fleet, verdict, pass);
    } catch (err) {
      if (starts) this.reserved--;
      throw err;
    }
    if (!lending || !pass || !world) return { requeueAfter: poll };
    // Effects run only on a status that reached the API server: after a
    // conflict the informer brings the newer object and a new pass.
    if (!written) {
      if (starts) this.reserved--;
      return { requeueAfter: poll };
    }
    if (change !== 'none') this.lendingWritten.set(key, now.getTime());
    const outcome = { fleet, pass, verdict, deleting };
    if (!starts || !effects) return this.settle(key, fleet, { kind: 'lend', ...outcome, results: await this.runEffects(lending, fleet, world, pass, access, now) });
    const started = effects.runner.start(
      uid,
      `lend/${key}`,
      async (signal) => ({ kind: 'lend', ...outcome, results: await this.runEffects(lending, fleet, world, pass, access, now, signal) }),
      () => effects.requeue(key),
    );
    this.reserved--;
    // Refused only while the controller stops: the status holds the intent, and the next replica's recovery takes it up.
    if (!started) return;
  }

  /** What the pass that ran a PeerFleet's lending effects leaves once they ended: metrics, the finalizer, when to look again. */
  private async settle(key: string, fleet: PeerFleet, done: Extract<PeerFleetEffect, { kind: 'lend' }>): Promise<ReconcileResult> {
    const { pass, verdict, results } = done;
    const lending = this.deps.lending!;
    lending.metrics?.observe(fleet, pass, results);
    if (done.deleting && this.finished(done.fleet, pass, verdict)) await lending.finalizers.remove(fleet);
    const kept = this.observed.get(key);
    const now = this.now().getTime();
    const poll = kept ? Math.max(0, kept.until - now) : pollInterval(fleet);
    const missed = this.missed.delete(key);
    // A failed effect is tried again at the next poll, never in a tight loop.
    if (results.some((r) => r.outcome === 'error')) return { requeueAfter: Math.max(poll, UNREACHABLE_RETRY_MS) };
    // A mirror that finished while the effects ran woke a pass that decided
    // nothing: the node's next claim is made now, not at the next poll.
    if (missed || pass.again || results.some((r) => r.outcome === 'claimed' || r.outcome === 'started')) return { requeueAfter: 0 };
    const wake = pass.wakeAt === undefined ? poll : Math.max(0, Math.min(poll, pass.wakeAt - now + 100));
    return { requeueAfter: done.heldUntil === undefined ? wake : Math.min(wake, Math.max(0, done.heldUntil - now)) };
  }

  /** Takes an effect slot; false when every one is taken. */
  private reserve(): boolean {
    const effects = this.deps.effects!;
    if (effects.runner.inFlight('probe') + effects.runner.inFlight('lend') + this.reserved >= effects.concurrency) return false;
    this.reserved++;
    return true;
  }

  /** Keeps a reading until the next poll, counted from now: a slow probe's reading is still used by the pass that takes it. */
  private keep(key: string, fleet: PeerFleet, generation: number | undefined, reading: Reading): number {
    const poll = this.polls.next(key, fleet, judgeReadiness(reading.input));
    this.observed.set(key, { generation, until: this.now().getTime() + poll, input: reading.input, access: reading.access });
    return poll;
  }

  /**
   * The Secrets and the peer are read once per poll (sooner after a spec
   * change): with lending on, every change of a node or pod in our cluster
   * brings a pass, and those passes reuse the last reading rather than ask
   * the peer again. The namespace's Pod Security label comes from an
   * informer and is read every pass.
   */
  private async observeAtPoll(key: string, fleet: PeerFleet, now: Date): Promise<({ kind: 'read'; poll: number } & Reading) | { kind: 'probing'; wait?: number }> {
    const generation = fleet.metadata?.generation;
    const effects = this.deps.effects;
    // Without lending, a pass on the worker asks the peer every time; a probe on the runner is kept until the next poll.
    const kept = this.deps.lending || effects ? this.observed.get(key) : undefined;
    const lending = this.deps.lending;
    const podSecurity = lending?.podSecurity(fleet.metadata!.namespace!);
    const egress = lending?.egress(fleet);
    const withLabel = (input: VerdictInput, access: PeerAccess | undefined): VerdictInput => {
      if (!lending) return input;
      const overBudget = access ? lending.peerCutOff(access) : undefined;
      return { ...input, ...(podSecurity === undefined ? { namespaceUnread: true } : { podSecurity }), ...(egress === undefined ? {} : { egress }), ...(overBudget === undefined ? {} : { overBudget }) };
    };
    if (kept && kept.generation === generation && now.getTime() < kept.until) {
      return { kind: 'read', input: withLabel(kept.input, kept.access), ...(kept.access ? { access: kept.access } : {}), poll: kept.until - now.getTime() };
    }
    if (effects) {
      if (!this.reserve()) return { kind: 'probing', wait: EFFECT_SLOT_RETRY_MS };
      const uid = fleet.metadata?.uid ?? key;
      // Refused only while the controller stops; its end enqueues the PeerFleet.
      effects.runner.start(uid, `probe/${key}`, async (signal) => ({ kind: 'probe', generation, reading: await readPeer(this.deps, key, fleet, signal) }), () => effects.requeue(key));
      this.reserved--;
      return { kind: 'probing' };
    }
    const { input, access } = await readPeer(this.deps, key, fleet);
    const poll = this.keep(key, fleet, generation, { input, access });
    return { kind: 'read', input: withLabel(input, access), ...(access ? { access } : {}), poll };
  }

  private now(): Date {
    return (this.deps.now ?? (() => new Date()))();
  }

  private pass(lending: LendingDeps, fleet: PeerFleet, world: OurSide, verdict: Verdict, access: PeerAccess | undefined, now: Date): FleetPass {
    return lendingPass({
      fleet,
      ...world,
      mirrors: this.expectations.mirrors(world.mirrors, now.getTime()),
      peerFleets: new Set(this.deps.fleets.list().map(objectKey)),
      peerJobs: access ? this.written(fleet).view(lending.peerJobs(access), now.getTime()) : undefined,
      verdict,
      now: now.getTime(),
    });
  }

  /**
   * The PeerFleet may go once no mirror of it runs or waits and the peer has
   * every record; or when it never had a session, whatever the peer says.
   */
  private finished(fleet: PeerFleet, pass: FleetPass, verdict: Verdict): boolean {
    if (pass.unfinished > 0 || pass.effects.some((e) => e.kind !== 'deleteMirror' && e.kind !== 'freeNode')) return false;
    const sessions = (fleet.status?.hosts ?? []).some((h) => h.session) || pass.hosts.some((h) => h.session);
    return verdict.ready || !sessions;
  }

  private async runEffects(lending: LendingDeps, fleet: PeerFleet, world: OurSide, pass: FleetPass, access: PeerAccess | undefined, now: Date, signal?: AbortSignal): Promise<EffectResult[]> {
    if (!access || pass.effects.length === 0) return [];
    const ctx = {
      fleet,
      clusterID: world.clusterID,
      queue: lending.queue(access),
      nodes: new Map(world.nodes.map((n) => [n.metadata?.name ?? '', n])),
      holders: world.holders,
      created: (mirror: V1Job) => this.expectations.created(mirror, now.getTime()),
      wrote: (before: V1Job, after: V1Job) => this.written(fleet).record(before, after, this.now().getTime()),
      ...(signal ? { signal } : {}),
      now,
    };
    const run = async (effect: LendEffect): Promise<EffectResult> => {
      // Cancelled (the shutdown grace ran out, or the PeerFleet is gone): what has not begun is left to the next pass or replica, which decides again from the status.
      if (signal?.aborted) return { effect, outcome: 'error', error: 'not started: cancelled' };
      const result = await lending.operations.run(effect, ctx);
      if (signal?.aborted && result.outcome === 'error') return result;
      if (effect.kind === 'deleteMirror' && result.outcome === 'deleted') this.expectations.deleted(effect.mirror, this.now().getTime());
      if (result.note) await this.deps.events.record(fleet, result.note.type, result.note.reason, result.note.message);
      if (result.outcome === 'error') {
        await this.deps.events.record(fleet, 'Warning', 'LendingError', `${effect.kind}: ${result.error ?? 'failed'}; retried at the next pass`);
      }
      return result;
    };
    // Write-backs, releases and deletions touch one Job each and run side by
    // side; claims come after them. A pass makes at most one claim per node
    // and gives each Job to one node, each claim with the room the pass saw
    // on its own node, so claims run side by side too; each is still one
    // resourceVersion-guarded write for one Job.
    const [claims, rest] = [pass.effects.filter((e) => e.kind === 'claim'), pass.effects.filter((e) => e.kind !== 'claim')];
    const results = rest.length > 0 ? await atMost(EFFECTS_AT_ONCE, rest, run) : [];
    return [...results, ...(await atMost(EFFECTS_AT_ONCE, claims, run))];
  }

  private written(fleet: PeerFleet): PeerWrites {
    const key = `${fleet.metadata?.namespace}/${fleet.metadata?.name}`;
    const kept = this.peerWrites.get(key) ?? new PeerWrites();
    this.peerWrites.set(key, kept);
    return kept;
  }

  /** Writes the verdict and the pass when they changed, with an event when the verdict's code changed; false after a conflict. */
  private async record(fleet: PeerFleet, verdict: Verdict, pass: FleetPass | undefined): Promise<boolean> {
    const before = fleet.status?.verdict;
    const status = fleetStatus(fleet, verdict, pass, this.now());
    try {
      await this.deps.status.write(PEERFLEET_RESOURCE, fleet, status);
    } catch (err) {
      // The cache was behind our own last write: the informer brings the
      // newer object and with it another reconcile.
      if (isConflict(err)) return false;
      throw err;
    }
    if (before?.code !== verdict.code) {
      const text = verdict.ready ? `the peer API server at ${fleet.spec.origin} answered with our token` : verdict.reasons.join('; ');
      await this.deps.events.record(fleet, verdict.ready ? 'Normal' : 'Warning', verdict.code, text);
    }
    const key = `${fleet.metadata?.namespace}/${fleet.metadata?.name}`;
    const stood = this.standing.get(key);
    const stands = new Set<string>();
    for (const note of pass?.notes ?? []) {
      if (note.standing) {
        stands.add(note.message);
        if (stood?.has(note.message)) continue;
      }
      // What recurs with every Job and session (Claimed, Available, SessionEnded) counts on one Event per reason; a warning stands alone.
      if (note.type === 'Normal') await this.deps.events.recordSeries(fleet, note.type, note.reason, note.message);
      else await this.deps.events.record(fleet, note.type, note.reason, note.message);
    }
    if (pass) this.standing.set(key, stands);
    return true;
  }
}

/** `run` over every item, `n` at a time, each starting as soon as one before it ends; results in the items' order. */
async function atMost<T, R>(n: number, items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await run(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}
