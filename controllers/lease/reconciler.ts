// The Lease reconciler reads top to bottom as the lifecycle: observe, restore
// the machine from status, compute the transition purely, write status, then
// run the effects the transition planned.
import type { Logger } from 'pino';
import { parseWhere } from '../../src/api/where.js';
import type { Lease, Offer, LeaseStatus } from '../../src/api/index.js';
import { LEASE_RESOURCE } from '../../src/api/resources.js';
import { setCondition } from '../../src/kube/conditions.js';
import type { EventRecorder } from '../../src/kube/events.js';
import type { StatusWriter } from '../../src/kube/status.js';
import { splitKey } from '../../src/kube/resource.js';
import { restore, step, type LeaseEvent, type Phase, type Step } from './machine.js';
import { chooseOffer, type OfferCandidate } from './choose.js';

export interface ObjectCache<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(): T[];
}

export interface LeaseReconcilerDeps {
  leases: ObjectCache<Lease>;
  offers: ObjectCache<Offer>;
  status: StatusWriter;
  events: EventRecorder;
  log: Logger;
  now?: () => Date;
  random?: () => number;
}

export interface ReconcileResult {
  requeueAfter?: number;
}

/** The candidates an Offer contributes: one for a command offer. */
export function candidatesOf(offer: Offer): OfferCandidate[] {
  const name = offer.metadata?.name ?? '';
  const command = offer.spec.command;
  if (!command) return [];
  const shape = command.shape;
  return [
    {
      name,
      pricePerHour: offer.spec.pricePerHour,
      shape: {
        os: shape.os ?? 'linux',
        arch: shape.arch ?? 'amd64',
        cpus: shape.cpus,
        gpu: shape.gpu,
        gpus: shape.gpus ?? (shape.gpu ? 1 : 0),
        vramGiB: shape.vramGiB,
        tools: shape.tools,
      },
    },
  ];
}

export class LeaseReconciler {
  private readonly now: () => Date;
  private readonly random: () => number;

  constructor(private readonly deps: LeaseReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.random = deps.random ?? Math.random;
  }

  async reconcile(key: string): Promise<ReconcileResult | void> {
    const { namespace, name } = splitKey(key);
    const lease = this.deps.leases.get(namespace, name);
    if (!lease) return;
    const phase = (lease.status?.phase ?? 'Pending') as Phase;
    const snapshot = restore(phase, {
      reason: lease.status?.reason ?? 'Created',
      message: lease.status?.message ?? '',
      attempt: lease.status?.launch?.attempt ?? 0,
    });

    const event = this.observe(lease, phase);
    if (!event) return;
    const next = step(snapshot, event);
    if (!next.accepted) return;
    await this.apply(lease, next, event);
  }

  /** Turns what the world says into one machine event. */
  private observe(lease: Lease, phase: Phase): LeaseEvent | undefined {
    if (phase !== 'Pending') return undefined;
    const parsed = parseWhere(lease.spec.where);
    if (!parsed.ok) return { type: 'UNSCHEDULABLE', reason: 'InvalidSpec', message: `spec.where: ${parsed.error}` };
    const candidates = this.deps.offers.list().flatMap(candidatesOf);
    const choice = chooseOffer(parsed.value, lease.spec.where, candidates, lease.spec.offer, this.random);
    if (!choice.ok) return { type: 'UNSCHEDULABLE', reason: 'NoMatchingOffer', message: choice.message };
    const price = choice.candidate.pricePerHour;
    return {
      type: 'OFFER_CHOSEN',
      offer: choice.candidate.name,
      message: `leasing from ${choice.candidate.name}${price === undefined ? '' : ` ($${price.toFixed(2)}/h)`}`,
    };
  }

  private async apply(lease: Lease, next: Step, event: LeaseEvent): Promise<void> {
    const now = this.now();
    const generation = lease.metadata?.generation;
    const scheduled = next.phase === 'Pending'
      ? { type: 'Scheduled', status: 'False' as const, reason: next.context.reason, message: next.context.message }
      : { type: 'Scheduled', status: 'True' as const, reason: 'OfferChosen', message: next.context.message };
    const parsed = parseWhere(lease.spec.where);
    const status: LeaseStatus = {
      ...lease.status,
      observedGeneration: generation,
      phase: next.phase,
      reason: next.context.reason,
      message: next.context.message,
      conditions: setCondition(lease.status?.conditions, scheduled, generation, now),
      ...(parsed.ok ? { parsedWhere: parsed.value } : {}),
      ...(event.type === 'OFFER_CHOSEN' ? { offer: event.offer } : {}),
    };
    // Intent before effect: the status (with its resourceVersion) is written
    // first; only a durable write lets the planned effects run.
    const written = await this.deps.status.write(LEASE_RESOURCE, lease, status);
    if (written === lease) return;
    if (next.effects.includes('announce')) {
      const type = next.phase === 'Pending' || next.phase === 'Failed' ? 'Warning' : 'Normal';
      await this.deps.events.record(written, type, next.context.reason, next.context.message);
    }
  }
}
