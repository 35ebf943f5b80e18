// One lending pass of a PeerFleet, pure: from what the informers hold (our
// nodes, pods and mirror Jobs, the nodes' holder Leases, the watched peer
// queue) and the status of the last pass, each node's machine takes one
// step; the pass returns the status to write and the effects to run after
// it is written. Effects come in the safety order: what brings the peer up
// to date with a mirror first, then releases, then new claims (each claim
// names the node and its session, written in the status before the claim).
import type { V1Job, V1Node, V1Pod } from '@kubernetes/client-node';
import { durationMs, MIN_POLL_INTERVAL_MS, type PeerFleet, type PeerHostState } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { CLAIMED_BY_ANNOTATION, REFUSED_ANNOTATION, parseClaimant } from '../../../src/providers/peerqueue/types.js';
import { account } from './accounting.js';
import { drainDecision, type DrainReason } from './drain.js';
import { chooseJob, freeAllocatable, jobRequests, OrderedQueue, shortfall, type Resources } from './fit.js';
import { holding } from './holder.js';
import { idleClock, lentJobs, lentMirrorOf, occupancy } from './idle.js';
import { NODE_LABEL, PEER_JOB_UID_LABEL, PEERFLEET_LABEL } from '../labels.js';
import { restore, step, type HostEffect } from '../machine.js';
import { hostEvent } from './observe.js';
import { recover } from './recovery.js';
import { recordLedger, settleAccounts, unrecorded } from './ledger.js';
import { groupBy } from './group.js';
import { lostStatusWrite, peerStatusWrite } from './writeback.js';
import { MAX_HOSTS, planStep, summarize, withinHostBound, type PeerHost, type PlanStep } from './plan.js';

export type { PeerHost, PlanStep } from './plan.js';

import type { FleetPass, FleetWorld, HostNote, LendEffect } from './pass.js';

export type { FleetPass, FleetWorld, HostNote, LendEffect } from './pass.js';

/** The reason of a host whose node is not opted in for the PeerFleet's namespace. */
export const NOT_OPTED_IN = 'NotOptedIn';

/** Claimed Jobs recovery starts in one pass; the rest wait for the next. */
export const STARTS_PER_PASS = 4;
/** Claims a session's record keeps (mirrors not yet seen); a node runs far fewer Jobs at once. */
const RECORDED_CLAIMS = 64;

/** `<namespace>.<name>`: the PeerFleet part of a claim, unique in our cluster. */
export function fleetID(fleet: PeerFleet): string {
  return `${fleet.metadata?.namespace}.${fleet.metadata?.name}`;
}

/** `<namespace>/<name>`: the holder of a node's Lease. */
export const fleetKey = (fleet: PeerFleet) => `${fleet.metadata?.namespace}/${fleet.metadata?.name}`;

/** A DNS subdomain, as the peer's API server would have checked it. */
const VALID_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const finished = (job: V1Job) => job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ?? false;
const uidOf = (job: V1Job) => job.metadata?.labels?.[PEER_JOB_UID_LABEL] ?? '';

/** The exit code of a mirror's first container, from its last finished pod. */
export function exitCodeOf(mirror: V1Job, pods: readonly V1Pod[]): number | undefined {
  const uid = uidOf(mirror);
  const mine = pods.filter((p) => p.metadata?.namespace === mirror.metadata?.namespace && p.metadata?.labels?.[PEER_JOB_UID_LABEL] === uid);
  for (const pod of mine.reverse()) {
    const code = pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode;
    if (code !== undefined) return code;
  }
  return undefined;
}

/**
 * Room a mirror holds before its pod exists: the Job controller makes the
 * pod a moment after the mirror, and a pass in between must not give the
 * same room to a second peer Job.
 */
function podlessMirrors(node: string, mirrors: readonly V1Job[], withPods: ReadonlySet<string>): Resources {
  const held: Resources = {};
  for (const m of mirrors) {
    if (m.metadata?.labels?.[NODE_LABEL] !== node || finished(m) || withPods.has(uidOf(m))) continue;
    const r = jobRequests(m);
    if (r.ok) for (const [k, v] of Object.entries(r.requests)) held[k] = (held[k] ?? 0n) + v;
  }
  return held;
}

export function lendingPass(world: FleetWorld): FleetPass {
  const { fleet, now } = world;
  const spec = fleet.spec;
  const me = fleetKey(fleet);
  const prefix = `${world.clusterID}/${fleetID(fleet)}/`;
  const deleting = !!fleet.metadata?.deletionTimestamp;
  const mine = world.mirrors.filter((m) => m.metadata?.namespace === fleet.metadata?.namespace && m.metadata?.labels?.[PEERFLEET_LABEL] === fleet.metadata?.name);
  const claims = (world.peerJobs ?? []).filter((j) => j.metadata?.annotations?.[CLAIMED_BY_ANNOTATION]?.startsWith(prefix));
  const mirrored = new Set(mine.map(uidOf));
  const waitingClaims = claims.filter((j) => !mirrored.has(j.metadata?.uid ?? '') && !finished(j) && !j.status?.startTime);
  // A Job with a mirror of ours is taken even while the watch still shows it
  // unclaimed. The peer is not trusted to send Kubernetes names: a Job whose
  // name could not go into our status or an event is never claimed.
  const queue = (world.peerJobs ?? []).filter((j) => {
    const a = j.metadata?.annotations ?? {};
    return VALID_NAME.test(j.metadata?.name ?? '') && !a[CLAIMED_BY_ANNOTATION] && !a[REFUSED_ANNOTATION] && !finished(j) && !mirrored.has(j.metadata?.uid ?? '');
  });
  const windowMs = durationMs(spec.idleWindow);
  const previous = new Map((fleet.status?.hosts ?? []).map((h) => [h.node, h]));
  const out: FleetPass = { hosts: [], summary: '', effects: [], notes: [], drains: [], sessionsStarted: 0, unfinished: 0, forged: 0 };
  // The claims each node's session recorded before writing them, as the last pass left them.
  const recordedOn = new Map<string, Set<string>>();
  for (const h of fleet.status?.hosts ?? []) for (const uid of h.session?.claims ?? []) recordedOn.set(uid, (recordedOn.get(uid) ?? new Set()).add(h.node));
  const isRecorded = (job: V1Job, node: string) => recordedOn.get(job.metadata?.uid ?? '')?.has(node) ?? false;
  const peerByUID = new Map((world.peerJobs ?? []).map((j) => [j.metadata?.uid ?? '', j]));
  const claimByUID = new Map(claims.map((j) => [j.metadata?.uid ?? '', j]));
  // A recorded uid whose Job is still queued is the Job its node set aside
  // to claim next: that claim is in the written status already.
  const queuedUIDs = new Set(queue.map((j) => j.metadata?.uid ?? ''));
  const setAside = new Map<string, string>();
  const asideBy = new Map<string, Set<string>>();
  const putAside = (uid: string, node: string) => {
    setAside.set(uid, node);
    asideBy.set(node, (asideBy.get(node) ?? new Set()).add(uid));
  };
  for (const h of fleet.status?.hosts ?? []) for (const uid of h.session?.claims ?? []) if (queuedUIDs.has(uid) && !setAside.has(uid)) putAside(uid, h.node);
  const asideFor = (node: string) => ({ mine: asideBy.get(node) ?? new Set<string>(), owner: setAside });
  const freeOn = new Map<string, Resources>();
  // Lending nodes that have no Job set aside, each to choose one once every node has made its claim.
  const toSetAside: { host: PeerHost; node: V1Node; withheld: number; pods: V1Pod[] }[] = [];
  // A recorded claim is kept until its mirror is seen, or the peer shows the
  // Job gone, finished or held by someone else; while the watch may still lag
  // behind our own claim, it stays.
  const stillWaiting = (uid: string) => {
    if (mirrored.has(uid)) return false;
    if (world.peerJobs === undefined) return true;
    const job = peerByUID.get(uid);
    if (!job || finished(job)) return false;
    const by = job.metadata?.annotations?.[CLAIMED_BY_ANNOTATION];
    return !by || by.startsWith(prefix);
  };
  const plan: PlanStep[] = [];
  const claimsNow: LendEffect[] = [];
  // Indexes by node and by peer Job, so that a pass costs in proportion to
  // nodes plus pods, not their product. A node's view is the pods bound to
  // it and those bound to none yet: every pod its occupancy and room can count.
  const unbound = world.pods.filter((p) => !p.spec?.nodeName);
  const boundTo = groupBy(world.pods.filter((p) => p.spec?.nodeName), (p) => p.spec!.nodeName!);
  const podsOn = (node: string) => [...(boundTo.get(node) ?? []), ...unbound];
  const lentMirrors = lentJobs(world.mirrors, world.peerFleets);
  // Only a mirror's own pods speak for it (the room it holds, the exit code the peer is told), never a pod that merely carries its label.
  const podsOfJob = new Map<string, V1Pod[]>();
  for (const p of world.pods) {
    const uid = lentMirrorOf(p, lentMirrors)?.peerJobUID;
    if (uid === undefined) continue;
    const list = podsOfJob.get(uid);
    if (list) list.push(p);
    else podsOfJob.set(uid, [p]);
  }
  const withPods = new Set(podsOfJob.keys());
  const mirrorsOn = groupBy(world.mirrors, (m) => m.metadata?.labels?.[NODE_LABEL] ?? '');
  const mineOn = groupBy(mine, (m) => m.metadata?.labels?.[NODE_LABEL] ?? '');
  const ordered = new OrderedQueue(queue);
  const waitingOn = groupBy(waitingClaims, (j) => parseClaimant(j.metadata?.annotations?.[CLAIMED_BY_ANNOTATION])?.node ?? '');
  const wake = (at: number | undefined) => {
    if (at !== undefined && at > now && (out.wakeAt === undefined || at < out.wakeAt)) out.wakeAt = at;
  };

  const { lent, beyond } = withinHostBound(world.nodes, previous);
  // A mirror of ours on a node this pass no longer lends (cordoned, its
  // label or opt-in removed) still runs: it holds the PeerFleet's finalizer
  // like any other, or a deleted PeerFleet would go before the peer has its
  // record.
  const lentNames = new Set(lent.map((n) => n.metadata?.name ?? ''));
  out.unfinished += mine.filter((m) => !finished(m) && !lentNames.has(m.metadata?.labels?.[NODE_LABEL] ?? '')).length;
  for (const node of lent) {
    const name = node.metadata?.name ?? '';
    const prev = previous.get(name);
    const pods = podsOn(name);
    const occ = occupancy(node, pods, lentMirrors);
    const clock = idleClock(occ.kind === 'idle', prev?.idleSince, now, windowMs);
    const drain = drainDecision({ spec, deleting, node, occupancy: occ, sessionStartedAt: prev?.session?.startedAt, now });
    const running = (mineOn.get(name) ?? []).filter((m) => !finished(m)).length;
    // Only claims we recorded hold the node: one the peer wrote in our name must not keep it, or a deleted PeerFleet, forever.
    const pending = (waitingOn.get(name) ?? []).filter((j) => isRecorded(j, name)).length;
    const onNode = mirrorsOn.get(name) ?? [];
    const lendingTo = [...new Set(onNode
      .filter((m) => !finished(m))
      .map((m) => `${m.metadata?.namespace}/${m.metadata?.labels?.[PEERFLEET_LABEL]}`))];
    const hold = holding({ lease: world.holders.get(name), me, node: name, lendingTo, now });
    const free = freeAllocatable(node, pods, drain.drain ? 0 : drain.withheldGPUs);
    for (const [k, v] of Object.entries(podlessMirrors(name, onNode, withPods))) free[k] = (free[k] ?? 0n) - v;
    const aside = asideFor(name);
    freeOn.set(name, free);
    const choice = world.peerJobs === undefined
      ? { kind: 'none' as const, message: 'the peer queue has not been read yet' }
      : chooseJob(ordered, node, free, aside);
    const state: PeerHostState = prev?.state ?? 'Busy';
    const observation = { state, node: name, mirrorsRunning: running + pending, occupancy: occ, clock, drain, verdict: world.verdict, holding: hold, choice, dryRun: spec.dryRun ?? false };
    const event = hostEvent(observation);
    const snapshot = restore(state, { reason: prev?.reason ?? 'Observed', message: prev?.message ?? '', drainReason: prev?.session?.drainReason as DrainReason | undefined });
    const next = event ? step(snapshot, event) : { state, context: snapshot.context, effects: [] as HostEffect[], accepted: false };
    out.unfinished += running + pending;

    const host: PeerHost = {
      node: name,
      state: next.state,
      since: next.state === state && prev?.since ? prev.since : rfc3339(new Date(now)),
      ...(clock.idleSince ? { idleSince: clock.idleSince } : {}),
      ...(next.context.reason ? { reason: next.context.reason } : {}),
      ...(next.context.message ? { message: next.context.message.slice(0, 1024) } : {}),
      ...(prev?.session && (next.state === 'Lending' || next.state === 'Draining') ? { session: { ...prev.session } } : {}),
      ...(prev?.lent ? { lent: prev.lent } : {}),
    };
    const lends = next.state === 'Lending' && !drain.drain && !spec.dryRun;
    if (host.session) {
      if (next.context.drainReason) host.session.drainReason = next.context.drainReason;
      else delete host.session.drainReason;
      // A claim made from a Job set aside wrote no status: its node's Job is named once its mirror is seen.
      const started = (host.session.claims ?? []).filter((uid) => mirrored.has(uid)).pop();
      if (started) host.session.job = peerByUID.get(started)?.metadata?.name ?? host.session.job;
      // A node that no longer lends keeps no Job set aside.
      const waiting = (host.session.claims ?? []).filter((uid) => stillWaiting(uid) && (lends || setAside.get(uid) !== name));
      if (waiting.length > 0) host.session.claims = waiting;
      else delete host.session.claims;
    }
    for (const effect of next.effects) {
      if (effect === 'startSession' && choice.kind === 'claim') {
        host.session = { job: choice.job.metadata?.name ?? '', startedAt: rfc3339(new Date(now)) };
        out.sessionsStarted++;
      }
      if (effect === 'claim' && choice.kind === 'claim') {
        if (host.session) {
          host.session.job = choice.job.metadata?.name ?? '';
          // Recorded in the status this pass writes, before the claim goes to the peer.
          const uid = choice.job.metadata?.uid ?? '';
          // A Job set aside is recorded already.
          if (!host.session.claims?.includes(uid)) host.session.claims = [...(host.session.claims ?? []), uid].slice(-RECORDED_CLAIMS);
        }
        out.notes.push({ type: 'Normal', reason: 'Claimed', message: next.context.message, node: name });
        claimsNow.push({ kind: 'claim', node: name, job: choice.job });
        // One Job per pass for all nodes: the next node chooses among the rest.
        ordered.remove(choice.job);
      }
      if (effect === 'announce' && !next.effects.includes('claim')) {
        const draining = next.state === 'Draining';
        if (draining && next.context.drainReason) out.drains.push(next.context.drainReason);
        out.notes.push({ type: draining || next.state === 'Unlisted' ? 'Warning' : 'Normal', reason: draining ? 'Drain' : next.context.reason, message: next.context.message });
      }
    }
    const claimedNow = choice.kind === 'claim' && next.effects.includes('claim') ? choice.job.metadata?.uid : undefined;
    if (host.session && claimedNow && !aside.mine.has(claimedNow) && aside.mine.size > 0) {
      // It claimed another Job than the one it set aside (that one no longer fits): that one is let go.
      host.session.claims = host.session.claims?.filter((uid) => !aside.mine.has(uid));
      for (const uid of aside.mine) setAside.delete(uid);
      asideBy.delete(name);
      aside.mine = new Set();
    }
    if (host.session && lends && world.peerJobs !== undefined && world.verdict.ready && ![...aside.mine].some((uid) => uid !== claimedNow)) {
      toSetAside.push({ host, node, withheld: drain.withheldGPUs, pods });
    }
    // A Lease this PeerFleet holds with no session on the node is given up
    // where another PeerFleet could lend the node (whether that one appeared
    // during the session or after it), and everywhere once this one is deleted.
    if (hold.kind === 'mine' && !host.session && running + pending === 0 && (deleting || world.shared.has(name))) out.effects.push({ kind: 'freeNode', node: name });
    if (next.effects.includes('endSession')) out.notes.push({ type: 'Normal', reason: 'SessionEnded', message: `node ${name}: the lending session ended (${next.context.message})` });
    out.hosts.push(host);

    if (spec.dryRun) plan.push(planStep(name, observation.verdict.ready, occ.kind, clock, drain, hold.kind === 'held' ? hold.message : undefined, choice));
    if (next.state === 'Waiting') wake(clock.windowEndsAt);
    // A node claims only from Available: one that just became so claims in the next pass, at once.
    if (next.state === 'Available' && event?.type === 'AVAILABLE' && choice.kind === 'claim' && !spec.dryRun && !drain.drain) out.again = true;
    const max = durationMs(spec.maxSessionDuration);
    if (host.session && max > 0) wake(Date.parse(host.session.startedAt) + max);
  }

  // A lending node sets its next Job aside while its current one runs,
  // recorded with the status this pass writes: when the room frees, that
  // claim goes out at once, without waiting for a status write. Chosen after
  // every claim of the pass, so that no free node waits for a busy one's Job.
  for (const { host, node, withheld, pods } of toSetAside) {
    const roomWhenDone = freeAllocatable(node, pods.filter((p) => !mirrored.has(lentMirrorOf(p, lentMirrors)?.peerJobUID ?? '')), withheld);
    const ahead = chooseJob(ordered, node, roomWhenDone, { mine: new Set(), owner: setAside, takeOthers: false });
    if (ahead.kind !== 'claim') continue;
    const uid = ahead.job.metadata?.uid ?? '';
    host.session!.claims = [...(host.session!.claims ?? []), uid].slice(-RECORDED_CLAIMS);
    putAside(uid, host.node);
    ordered.remove(ahead.job);
  }

  // Recorded in the status this pass writes, before any effect: a mirror is
  // deleted only after a pass that saw it complete wrote its entry.
  const ledger = spec.dryRun ? fleet.status?.ledger : recordLedger(fleet.status?.ledger, mine);
  if (ledger) out.ledger = ledger;
  const waitsForLedger = spec.dryRun ? new Set<string>() : unrecorded(ledger, mine);

  // The peer's records are judged only from a complete list and while the
  // peer answers: a stale or partial view proves nothing.
  if (world.peerJobs !== undefined && world.verdict.ready && !spec.dryRun) {
    const lendingNodes = new Set(out.hosts.filter((h) => h.state === 'Lending').map((h) => h.node));
    const nodes = new Map(world.nodes.map((n) => [n.metadata?.name ?? '', n]));
    let starts = 0;
    // Room is asked too: a claim recorded ahead (a Job set aside) that the
    // peer wrote in our name before the node freed waits, never queues behind it.
    const fits = (node: string, job: V1Job) => {
      const r = jobRequests(job);
      return r.ok && shortfall(r.requests, freeOn.get(node) ?? {}).length === 0;
    };
    for (const r of recover({ claims, mirrors: mine, mayStart: (node, job) => lendingNodes.has(node) && nodes.has(node) && fits(node, job), recorded: (node, job) => isRecorded(job, node) })) {
      if (r.kind === 'writeBack' || r.kind === 'deleteMirror') {
        const mirror = r.mirror;
        const job = r.kind === 'writeBack' ? r.peerJob : claimByUID.get(uidOf(mirror));
        const node = mirror.metadata?.labels?.[NODE_LABEL] ?? '';
        const write = job && peerStatusWrite({ peerJob: job, mirror, host: `${world.clusterID}/${node}`, exitCode: exitCodeOf(mirror, podsOfJob.get(uidOf(mirror)) ?? []) });
        // A mirror goes only once the peer has all of its record, the exit code included.
        if (job && write) out.effects.push({ kind: 'writeBack', job, write });
        else if (r.kind === 'deleteMirror' && !waitsForLedger.has(uidOf(mirror))) out.effects.push({ kind: 'deleteMirror', mirror });
      } else if (r.kind === 'start') {
        if (starts++ < STARTS_PER_PASS) out.effects.push({ kind: 'start', node: r.node, job: r.peerJob });
        else out.again = true;
      } else if (r.kind === 'forged') {
        out.forged++;
        out.notes.push({ type: 'Warning', reason: 'ForgedClaim', message: r.message, standing: true });
      } else if (r.kind === 'release') {
        out.effects.push({ kind: 'release', job: r.peerJob, message: r.message });
      } else if (r.kind === 'reportLost') {
        const node = parseClaimant(r.peerJob.metadata?.annotations?.[CLAIMED_BY_ANNOTATION])?.node ?? '';
        out.effects.push({ kind: 'writeBack', job: r.peerJob, write: lostStatusWrite(r.peerJob, `${world.clusterID}/${node}`, new Date(now)), lost: true });
        out.notes.push({ type: 'Warning', reason: 'MirrorLost', message: r.message });
      }
    }
    // The write-back follows within a pass or two; a peer record still unfinished after that differs.
    const grace = 2 * Math.max(MIN_POLL_INTERVAL_MS, durationMs(spec.pollInterval)) + 60_000;
    const settled = settleAccounts(out.hosts, account(claims, spec.pricePerGPUHour, now), ledger, world.peerJobs, spec.pricePerGPUHour, now, grace);
    out.accounting = settled.accounting;
    for (const message of settled.warnings) out.notes.push({ type: 'Warning', reason: 'LedgerMismatch', message, standing: true });
  } else if (fleet.status?.accounting) {
    out.accounting = fleet.status.accounting;
  }
  out.effects.push(...claimsNow);
  reportNotOptedIn(out, plan, world, previous, spec.dryRun ?? false);
  out.summary = summarize(out.hosts, beyond);
  if (spec.dryRun) out.plan = plan;
  return out;
}

/**
 * Selected nodes that are not opted in for the PeerFleet's namespace, as
 * Unlisted hosts after the lent ones, while the status has room: the tenant
 * sees why its selector's nodes are not lent, and what the admin would run.
 */
function reportNotOptedIn(out: FleetPass, plan: PlanStep[], world: FleetWorld, previous: ReadonlyMap<string, PeerHost>, dryRun: boolean): void {
  const names = [...(world.notOptedIn?.keys() ?? [])].sort((a, b) => a.localeCompare(b));
  for (const node of names.slice(0, Math.max(0, MAX_HOSTS - out.hosts.length))) {
    const message = world.notOptedIn!.get(node)!.slice(0, 1024);
    const prev = previous.get(node);
    const since = prev?.state === 'Unlisted' && prev.reason === NOT_OPTED_IN && prev.since ? prev.since : rfc3339(new Date(world.now));
    out.hosts.push({ node, state: 'Unlisted', since, reason: NOT_OPTED_IN, message });
    if (dryRun) plan.push({ node, action: 'None', message });
  }
}
