// Pending: choose an Offer within maxLeases. The decision is pure; the slots
// it counts are kept by Slots, because a Lease this controller has just
// moved out of Pending may not show as active in the cache yet.
import { ACTIVE_PHASES, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_LIFETIME, durationMs, parseWhere, type Lease, type LeaseStatus, type Offer } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import type { CacheIndex } from '../../../src/kube/cache.js';
import { parsePublicKey } from '../../../src/machine/keys.js';
import { installationPrefix } from '../../../src/providers/types.js';
import { stampOf } from '../policy/ownership.js';
import { selects } from '../../../src/kube/selector.js';
import { chooseOffer, type Choice, type OfferCandidate } from '../policy/choose.js';
import type { Decision } from '../decision.js';
import { candidatesOf } from '../offers.js';
import { phaseOf } from '../status.js';
import type { NamespaceLimit } from '../policy/limits.js';

export interface ScheduleInput {
  lease: Lease;
  offers: readonly Offer[];
  /** Active Leases other than this one. */
  active: number;
  maxLeases: number;
  /** The Lease's namespace: its labels, and the Offer of each other active Lease in it. */
  namespace?: { labels: Readonly<Record<string, string>>; activeOffers: readonly string[] };
  /** Active Leases one namespace may have (the controller's flag); 0 or absent: no limit. */
  maxLeasesPerNamespace?: number;
  /** The admin's caps for the Lease's namespace (Helm leaseLimits). */
  namespaceLimit?: NamespaceLimit;
  /** Machine names carry it, so another installation sharing the cloud account never takes the machine for its own. */
  installationID: string;
  now: number;
  random: () => number;
  /** Refusals already decided for the same where, spec.offer and namespace state, while the Offers are unchanged (see Refusals). */
  refusals?: Refusals;
}

/**
 * The refusals decided since the Offers last changed, by what else a
 * refusal depends on (where, spec.offer, the namespace, its labels, the
 * Offers of its active Leases, its caps). Thousands of waiting Leases share
 * a few where-expressions; each would otherwise weigh every Offer again at
 * every wake. The owner clears it on any change of an Offer. A choice that
 * succeeds is never kept: it draws at random among equal offers.
 */
export class Refusals {
  private readonly known = new Map<string, Choice>();
  static readonly MAX = 10_000;

  clear(): void {
    this.known.clear();
  }

  decide(key: string, choose: () => Choice): Choice {
    const known = this.known.get(key);
    if (known) return known;
    const choice = choose();
    if (!choice.ok) {
      if (this.known.size >= Refusals.MAX) this.known.clear();
      this.known.set(key, choice);
    }
    return choice;
  }
}

/** How long a Lease whose launch the price cap refused waits for its Offer to list again before it looks anyway. */
export const OVER_PRICE_CAP_RETRY_MS = 5 * 60_000;

export function schedule(input: ScheduleInput): Decision {
  const { lease, now } = input;
  if (lease.metadata?.deletionTimestamp) return { event: { type: 'DELETE_REQUESTED', message: 'deleted before a machine was rented' } };
  const parsed = parseWhere(lease.spec.where);
  if (!parsed.ok) return { event: { type: 'UNSCHEDULABLE', reason: 'InvalidSpec', message: `spec.where: ${parsed.error}` } };
  const where = { parsedWhere: parsed.value as LeaseStatus['parsedWhere'] };
  // Admission checks the shape of each key line, not its key data: a key the
  // machine could never be given is refused before anything is rented.
  const badKey = invalidSshKey(lease.spec.sshKeys ?? []);
  if (badKey) return { event: { type: 'UNSCHEDULABLE', reason: 'InvalidSpec', message: `${badKey}; fix or remove it and the Lease is scheduled` }, status: where };
  const refusedAt = overPriceCapRefusal(lease, input.offers);
  if (refusedAt !== undefined && now < refusedAt + OVER_PRICE_CAP_RETRY_MS) return { requeueAfter: refusedAt + OVER_PRICE_CAP_RETRY_MS - now };
  const ns = lease.metadata?.namespace ?? '';
  const here = input.namespace ?? { labels: {}, activeOffers: [] };
  const cap = input.namespaceLimit;
  const choose = (): Choice => {
    const candidates: OfferCandidate[] = [];
    for (const o of input.offers) {
      const policy = namespacePolicy(o, ns, here);
      for (const c of candidatesOf(o)) {
        const capped = priceCap(c, ns, cap);
        // Most candidates pass both policies: those are shared, not copied, for every waiting Lease.
        candidates.push(policy === OPEN && capped === OPEN ? c : { ...c, ...policy, ...capped });
      }
    }
    return chooseOffer(parsed.value, lease.spec.where, candidates, lease.spec.offer, input.random);
  };
  const choice = input.refusals
    ? input.refusals.decide(JSON.stringify([lease.spec.where, lease.spec.offer ?? null, ns, here.labels, [...here.activeOffers].sort(), cap ?? null]), choose)
    : choose();
  if (!choice.ok && choice.noCapacity) {
    return { event: { type: 'REFUSED', reason: 'NoCapacity', message: `${choice.message}; Leasehold does not wait for capacity` }, status: where };
  }
  if (!choice.ok) return { event: { type: 'UNSCHEDULABLE', reason: choice.reason ?? 'NoMatchingOffer', message: choice.message }, status: where };
  const perNamespace = input.maxLeasesPerNamespace ?? 0;
  if (perNamespace > 0 && here.activeOffers.length >= perNamespace) {
    return {
      event: {
        type: 'UNSCHEDULABLE',
        reason: 'MaxLeasesPerNamespace',
        message: `namespace ${ns} has ${here.activeOffers.length} active leases, the controller's maxLeasesPerNamespace is ${perNamespace}; waiting for one of them to end (a platform admin raises maxLeasesPerNamespace in the Helm values to allow more)`,
      },
      status: where,
    };
  }
  if (cap && cap.maxLeases > 0 && here.activeOffers.length >= cap.maxLeases) {
    return {
      event: {
        type: 'UNSCHEDULABLE',
        reason: 'MaxLeasesPerNamespace',
        message: `namespace ${ns} has ${here.activeOffers.length} active leases, the platform admin's ${cap.source}.maxLeases is ${cap.maxLeases}; waiting for one of them to end (a platform admin raises it in the Helm values to allow more)`,
      },
      status: where,
    };
  }
  if (input.active >= input.maxLeases) {
    return {
      event: {
        type: 'UNSCHEDULABLE',
        reason: 'MaxLeases',
        message: `${input.active} leases are active, the controller's maxLeases is ${input.maxLeases}; waiting for one to end (raise maxLeases in the Helm values to allow more)`,
      },
      status: where,
    };
  }
  const chosen = choice.candidate;
  const offer = input.offers.find((o) => o.metadata?.name === chosen.offer)!;
  const price = chosen.pricePerHour;
  const leaseID = lease.metadata!.uid!.replace(/-/g, '').slice(0, 8);
  return {
    event: {
      type: 'OFFER_CHOSEN',
      offer: chosen.offer,
      message: `leasing ${chosen.name}${chosen.region ? ` in ${chosen.region}` : ''}${price === undefined ? '' : ` at $${price.toFixed(2)}/h`}`,
    },
    status: {
      ...where,
      offer: chosen.offer,
      ...(price === undefined ? {} : { pricePerHour: price }),
      ...(chosen.instanceType ? { instanceType: chosen.instanceType } : {}),
      ...(chosen.region ? { region: chosen.region } : {}),
      leaseID,
      machineName: `${installationPrefix(input.installationID)}${leaseID}`,
      launch: { attempt: (lease.status?.launch?.attempt ?? 0) + 1, startedAt: rfc3339(new Date(now)), offerGeneration: offer.metadata?.generation },
      release: offer.spec.lambda
        ? { provider: 'lambda', lambda: { apiKeySecretRef: offer.spec.lambda.apiKeySecretRef, endpoint: offer.spec.lambda.endpoint } }
        : { provider: 'command', command: offer.spec.command!.release },
      idleTimeout: offer.spec.idleTimeout ?? DEFAULT_IDLE_TIMEOUT,
      // maxLifetime counts from the launch, so a slow boot cannot stretch it.
      expiresAt: rfc3339(new Date(now + durationMs(offer.spec.maxLifetime ?? DEFAULT_MAX_LIFETIME))),
    } as Partial<LeaseStatus>,
  };
}

/**
 * What an Offer's namespace fields say of a Lease in namespace `ns`: nothing
 * when it may lease there, or why not, as an unavailable candidate.
 */
function namespacePolicy(offer: Offer, ns: string, here: NonNullable<ScheduleInput['namespace']>): Partial<OfferCandidate> {
  const name = offer.metadata?.name ?? '';
  if (!selects(offer.spec.namespaceSelector, here.labels)) {
    return {
      unavailable: `spec.namespaceSelector of Offer ${name} does not select namespace ${ns}; a platform admin labels the namespace to match it, or widens spec.namespaceSelector`,
      blockedBy: 'NamespaceNotAllowed',
      noCapacity: false,
    };
  }
  const cap = offer.spec.maxLeasesPerNamespace;
  const used = here.activeOffers.filter((o) => o === name).length;
  if (cap !== undefined && used >= cap) {
    return {
      unavailable: `namespace ${ns} has ${used} active leases from Offer ${name}, its spec.maxLeasesPerNamespace is ${cap}; waiting for one to end (a platform admin raises spec.maxLeasesPerNamespace)`,
      blockedBy: 'MaxLeasesPerNamespace',
      noCapacity: false,
    };
  }
  return OPEN;
}

/** What a policy that keeps nothing from a Lease says. */
const OPEN: Partial<OfferCandidate> = Object.freeze({});

/** A candidate above the admin's price cap for the namespace, as an unavailable one; an unpriced one (a command Offer without pricePerHour) is not capped. */
function priceCap(c: OfferCandidate, ns: string, cap: NamespaceLimit | undefined): Partial<OfferCandidate> {
  if (cap?.maxPricePerHour === undefined || c.pricePerHour === undefined || c.pricePerHour <= cap.maxPricePerHour) return OPEN;
  return {
    unavailable: `costs $${c.pricePerHour.toFixed(2)}/h, above the platform admin's ${cap.source}.maxPricePerHour ${cap.maxPricePerHour} for namespace ${ns}; lease a cheaper machine, or ask a platform admin to raise it in the Helm values`,
    blockedBy: 'NamespacePriceCap',
    noCapacity: false,
  };
}

/**
 * When the Lease's last launch was refused by the price cap (nothing was
 * rented), and its Offer has not listed again since: the listing that chose
 * the sold-out type would choose it again. Undefined otherwise.
 */
function overPriceCapRefusal(lease: Lease, offers: readonly Offer[]): number | undefined {
  const st = lease.status;
  if (st?.reason !== 'OverPriceCap') return undefined;
  const refused = Date.parse(st.conditions?.find((c) => c.type === 'Scheduled')?.lastTransitionTime ?? '');
  const offer = offers.find((o) => o.metadata?.name === st.offer);
  const listed = Date.parse(offer?.status?.lastListTime ?? '');
  if (!Number.isFinite(refused) || !st.launch || listed > refused) return undefined;
  return refused;
}

/** Why one of spec.sshKeys cannot go into authorized_keys, naming it, or undefined when all can. */
export function invalidSshKey(keys: readonly string[]): string | undefined {
  for (const [i, key] of keys.entries()) {
    const parsed = parsePublicKey(key);
    if (!parsed.ok) return `spec.sshKeys[${i}] is not an OpenSSH public key: ${parsed.error}`;
  }
  return undefined;
}

/**
 * The maxLeases slots: Leases active in the cache plus those this
 * controller has claimed at a scheduling decision and the cache may not
 * show as active yet. A ledger kept from the cache's changes, so that a
 * scheduling decision costs the active Leases, never all of them.
 */
export class Slots implements CacheIndex<Lease> {
  private readonly claimed = new Map<string, Slot>();
  /** What the cache last said of each Lease that settles its slot: held (active) or 'ended' (none, whatever was claimed). */
  private readonly cached = new Map<string, Slot | 'ended'>();
  /** The slot each Lease holds now, from the two above. */
  private readonly held = new Map<string, Slot>();

  constructor(
    /** Leases another installation stamped hold its slots, not this one's. */
    private readonly installationID: string,
  ) {}

  observe(lease: Lease): void {
    const uid = lease.metadata?.uid ?? '';
    const state = cachedSlot(lease, this.installationID);
    if (state === undefined) this.cached.delete(uid);
    else this.cached.set(uid, state);
    this.settle(uid);
  }

  gone(lease: Lease): void {
    const uid = lease.metadata?.uid ?? '';
    this.cached.delete(uid);
    this.settle(uid);
  }

  claim(uid: string, slot: Slot): void {
    this.claimed.set(uid, slot);
    this.settle(uid);
  }

  free(uid: string): void {
    this.claimed.delete(uid);
    this.settle(uid);
  }

  /** Active Leases other than `except` (the one being scheduled). */
  activeExcept(except: string): number {
    return this.held.size - (this.held.has(except) ? 1 : 0);
  }

  /** Where each active Lease other than `except` holds its slot. */
  holders(except: string): Slot[] {
    const out: Slot[] = [];
    for (const [uid, slot] of this.held) if (uid !== except) out.push(slot);
    return out;
  }

  private settle(uid: string): void {
    const cached = this.cached.get(uid);
    // The cache outranks a claim once it shows the Lease active or ended; a Pending one still counts its claim.
    const slot = cached === 'ended' ? undefined : cached ?? this.claimed.get(uid);
    if (slot) this.held.set(uid, slot);
    else this.held.delete(uid);
  }
}

/**
 * What one cached Lease says of its slot: held where it is active, none once
 * it has ended, and nothing (a claim stands) while Pending or another
 * installation's.
 */
export function cachedSlot(lease: Lease, installationID: string): Slot | 'ended' | undefined {
  const stamp = stampOf(lease);
  // Unstamped active Leases count: after an upgrade, this installation's own are stamped only as each is reconciled.
  if (stamp !== undefined && stamp !== installationID) return undefined;
  const phase = phaseOf(lease);
  if (ACTIVE_PHASES.includes(phase)) return { namespace: lease.metadata?.namespace ?? '', offer: lease.status?.offer ?? '' };
  return phase === 'Pending' ? undefined : 'ended';
}

/** The namespace and Offer of a Lease holding a slot. */
export interface Slot {
  namespace: string;
  offer: string;
}
