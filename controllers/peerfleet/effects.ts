// The side effects of a lending pass, run after its status is written. Each
// is idempotent by name: a mirror is named from the peer Job's uid, a claim
// and a release carry the resourceVersion they were decided on, and a node's
// holder Lease is taken with its own. A claim goes in this order: hold the
// node, claim on the peer, start the mirror; a restart between any two is
// found again by policy/recovery.ts (a claim without a mirror is started or given
// back), so no peer Job is run twice or lost.
import { V1MicroTime, type BatchV1Api, type CoordinationV1Api, type CoreV1Api, type V1Job, type V1Lease, type V1Node } from '@kubernetes/client-node';
import { DEFAULT_MAX_JOB_DURATION, durationMs, type PeerFleet } from '../../src/api/index.js';
import { isConflict, isNotFound, statusCode } from '../../src/kube/client.js';
import { errorText } from '../../src/kube/errors.js';
import { CLAIMED_BY_ANNOTATION, claimant, type PeerQueue } from '../../src/providers/peerqueue/types.js';
import { HOLDER_LABEL, holderLeaseName } from './policy/holder.js';
import { fleetID, fleetKey, type HostNote, type LendEffect } from './policy/lending.js';
import { makeMirror, MIRROR_SERVICE_ACCOUNT, type LendingPolicy } from './policy/mirror.js';

export type Outcome = 'claimed' | 'conflict' | 'refused' | 'started' | 'released' | 'written' | 'deleted' | 'freed' | 'error';

export interface LendingApis {
  batch: Pick<BatchV1Api, 'createNamespacedJob' | 'deleteNamespacedJob'>;
  core: Pick<CoreV1Api, 'createNamespacedServiceAccount'>;
  coordination: Pick<CoordinationV1Api, 'createNamespacedLease' | 'replaceNamespacedLease' | 'deleteNamespacedLease'>;
  /** Where the nodes' holder Leases live: the controller's namespace. */
  leaseNamespace: string;
}

export interface EffectContext {
  fleet: PeerFleet;
  clusterID: string;
  queue: PeerQueue;
  nodes: ReadonlyMap<string, V1Node>;
  holders: ReadonlyMap<string, V1Lease>;
  /** A mirror this controller created, so that the next pass counts it before the informer shows it. */
  created(mirror: V1Job): void;
  /** A peer Job this controller wrote (`before`, the Job the effect was decided on; `after`, the peer's answer), so that the next pass judges the Job as written. */
  wrote?(before: V1Job, after: V1Job): void;
  signal?: AbortSignal;
  now: Date;
}

export interface EffectResult {
  effect: LendEffect;
  outcome: Outcome;
  note?: HostNote;
  error?: string;
}

/** How long a node's holder Lease stands without renewal: mirrors, not the Lease, keep a node once it lends. */
export const HOLDER_LEASE_SECONDS = 120;

const renewedAt = (lease: V1Lease) => new Date(lease.spec?.renewTime ?? lease.spec?.acquireTime ?? 0).getTime();

export class LendingEffects {
  private readonly accounts = new Set<string>();

  constructor(
    private readonly apis: LendingApis,
    private readonly policy: LendingPolicy,
  ) {}

  async run(effect: LendEffect, ctx: EffectContext): Promise<EffectResult> {
    try {
      return { effect, ...(await this.dispatch(effect, ctx)) };
    } catch (err) {
      return { effect, outcome: 'error', error: errorText(err) };
    }
  }

  private async dispatch(effect: LendEffect, ctx: EffectContext): Promise<Omit<EffectResult, 'effect'>> {
    const by = (node: string) => claimant(ctx.clusterID, fleetID(ctx.fleet), node);
    switch (effect.kind) {
      case 'claim':
        return this.claim(effect.node, effect.job, by(effect.node), ctx);
      case 'start':
        return this.start(effect.node, effect.job, ctx);
      case 'release': {
        const ours = effect.job.metadata?.annotations?.[CLAIMED_BY_ANNOTATION] ?? '';
        const r = await ctx.queue.release(effect.job.metadata!.name!, effect.job.metadata!.resourceVersion!, ours, ctx.signal);
        if (r.kind !== 'claimed') return { outcome: 'conflict' };
        ctx.wrote?.(effect.job, r.job);
        return { outcome: 'released', note: { type: 'Normal', reason: 'Released', message: effect.message } };
      }
      case 'writeBack': {
        const after = await ctx.queue.writeStatus(effect.job.metadata!.name!, effect.write, ctx.signal);
        ctx.wrote?.(effect.job, after);
        return { outcome: 'written' };
      }
      case 'deleteMirror':
        try {
          await this.apis.batch.deleteNamespacedJob({ name: effect.mirror.metadata!.name!, namespace: effect.mirror.metadata!.namespace!, propagationPolicy: 'Background' });
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        return { outcome: 'deleted' };
      case 'freeNode':
        return this.freeNode(effect.node, ctx);
    }
  }

  private async claim(node: string, job: V1Job, by: string, ctx: EffectContext): Promise<Omit<EffectResult, 'effect'>> {
    const nodeObj = ctx.nodes.get(node);
    if (!nodeObj) return { outcome: 'conflict' };
    const fleet = { name: ctx.fleet.metadata!.name!, namespace: ctx.fleet.metadata!.namespace!, uid: ctx.fleet.metadata?.uid };
    const mirror = makeMirror({ peerJob: job, fleet, node: nodeObj, policy: this.policy, maxJobSeconds: durationMs(ctx.fleet.spec.maxJobDuration ?? DEFAULT_MAX_JOB_DURATION) / 1000 });
    const name = job.metadata!.name!;
    if (mirror.kind === 'refused') {
      // Refused on the peer so that no lender tries it again; the owner reads why there.
      const reason = mirror.reasons.join('; ').slice(0, 1024);
      const r = await ctx.queue.refuse(name, job.metadata!.resourceVersion!, reason, ctx.signal);
      if (r.kind === 'conflict') return { outcome: 'conflict' };
      ctx.wrote?.(job, r.job);
      return { outcome: 'refused', note: { type: 'Warning', reason: 'Refused', message: `peer Job ${name} cannot be made safe to run here: ${reason}` } };
    }
    if (!(await this.hold(node, ctx))) return { outcome: 'conflict' };
    const claimed = await ctx.queue.claim(name, job.metadata!.resourceVersion!, by, ctx.signal);
    if (claimed.kind === 'conflict') return { outcome: 'conflict' };
    ctx.wrote?.(job, claimed.job);
    await this.createMirror(mirror.job, ctx);
    return { outcome: 'claimed' };
  }

  private async start(node: string, job: V1Job, ctx: EffectContext): Promise<Omit<EffectResult, 'effect'>> {
    const nodeObj = ctx.nodes.get(node);
    if (!nodeObj) return { outcome: 'conflict' };
    const fleet = { name: ctx.fleet.metadata!.name!, namespace: ctx.fleet.metadata!.namespace!, uid: ctx.fleet.metadata?.uid };
    const mirror = makeMirror({ peerJob: job, fleet, node: nodeObj, policy: this.policy, maxJobSeconds: durationMs(ctx.fleet.spec.maxJobDuration ?? DEFAULT_MAX_JOB_DURATION) / 1000 });
    if (mirror.kind === 'refused') return { outcome: 'refused' };
    await this.createMirror(mirror.job, ctx);
    return { outcome: 'started' };
  }

  private async createMirror(job: V1Job, ctx: EffectContext): Promise<void> {
    const namespace = job.metadata!.namespace!;
    await this.ensureServiceAccount(namespace);
    try {
      ctx.created(await this.apis.batch.createNamespacedJob({ namespace, body: job }));
    } catch (err) {
      // Named from the peer Job's uid: one that exists is this same mirror.
      if (statusCode(err) !== 409) throw err;
      ctx.created(job);
    }
  }

  /** The mirrors' identity: no token, and bound to nothing. */
  private async ensureServiceAccount(namespace: string): Promise<void> {
    if (this.accounts.has(namespace)) return;
    try {
      await this.apis.core.createNamespacedServiceAccount({
        namespace,
        body: {
          metadata: { name: MIRROR_SERVICE_ACCOUNT, namespace, labels: { 'app.kubernetes.io/managed-by': 'leasehold' } },
          automountServiceAccountToken: false,
        },
      });
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
    }
    this.accounts.add(namespace);
  }

  /** Takes or renews the node's holder Lease; false when another PeerFleet wrote it first. */
  private async hold(node: string, ctx: EffectContext): Promise<boolean> {
    const { coordination, leaseNamespace: namespace } = this.apis;
    const name = holderLeaseName(node);
    // MicroTime: V1MicroTime writes the six fractional digits the API server requires.
    const now = new V1MicroTime(ctx.now.getTime());
    const spec = { holderIdentity: fleetKey(ctx.fleet), leaseDurationSeconds: HOLDER_LEASE_SECONDS, renewTime: now, acquireTime: now };
    const have = ctx.holders.get(node);
    // A session's next claim keeps a Lease that is ours and has more than
    // half its term left: no other PeerFleet takes a Lease before it
    // expires, and the running mirrors, not the Lease, hold a lending node.
    if (have?.spec?.holderIdentity === spec.holderIdentity && ctx.now.getTime() < renewedAt(have) + (HOLDER_LEASE_SECONDS * 1000) / 2) return true;
    try {
      if (!have) {
        await coordination.createNamespacedLease({ namespace, body: { metadata: { name, namespace, labels: { [HOLDER_LABEL]: 'true' } }, spec } });
      } else {
        const keep = have.spec?.holderIdentity === spec.holderIdentity ? { acquireTime: have.spec?.acquireTime } : {};
        await coordination.replaceNamespacedLease({ name, namespace, body: { ...have, spec: { ...have.spec, ...spec, ...keep } as never } });
      }
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  private async freeNode(node: string, ctx: EffectContext): Promise<Omit<EffectResult, 'effect'>> {
    const have = ctx.holders.get(node);
    if (!have || have.spec?.holderIdentity !== fleetKey(ctx.fleet)) return { outcome: 'freed' };
    try {
      await this.apis.coordination.deleteNamespacedLease({
        name: have.metadata!.name!,
        namespace: this.apis.leaseNamespace,
        body: { preconditions: { resourceVersion: have.metadata?.resourceVersion } },
      });
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
    return { outcome: 'freed' };
  }
}
