// What an Offer means to a Lease: the candidates it contributes to the
// choice, and the facts its machine must then measure up to.
import { DEFAULT_MAX_PRICE_PER_HOUR, type Lease, type Offer } from '../../src/api/index.js';
import type { Claim } from '../../src/machine/facts.js';
import { candidateShape } from '../../src/providers/lambda/catalog.js';
import type { OfferCandidate } from './policy/choose.js';

type Listed = NonNullable<NonNullable<Offer['status']>['candidates']>[number];

/**
 * The candidates an Offer contributes: one for a command offer; for a
 * Lambda offer, each instance type of its last listing (or one unavailable
 * candidate saying why there is no listing).
 */
export function candidatesOf(offer: Offer): readonly OfferCandidate[] {
  let known = indexed.get(offer);
  if (!known) indexed.set(offer, (known = Object.freeze(listCandidates(offer))));
  return known;
}

/**
 * The candidates of each Offer object the cache holds, made once per change:
 * a cached object is replaced, never changed, when its Offer changes, and
 * every waiting Lease's scheduling decision reads all of them.
 */
const indexed = new WeakMap<Offer, readonly OfferCandidate[]>();

function listCandidates(offer: Offer): OfferCandidate[] {
  const name = offer.metadata?.name ?? '';
  const command = offer.spec.command;
  if (command) {
    const shape = command.shape;
    return [
      {
        name,
        offer: name,
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
  if (!offer.spec.lambda) return [];
  const ready = offer.status?.conditions?.find((c) => c.type === 'Ready');
  const listed = offer.status?.candidates ?? [];
  if (ready?.status !== 'True' || listed.length === 0) {
    const why = ready?.status === 'False' ? `${ready.reason}: ${ready.message}` : 'not listed yet';
    return [{ name, offer: name, shape: { os: 'linux', arch: 'amd64', gpus: 0 }, unavailable: `Offer is not Ready (${why})` }];
  }
  const cap = offer.spec.lambda.maxPricePerHour ?? DEFAULT_MAX_PRICE_PER_HOUR;
  return listed.map((c) => ({
    name: `${name}/${c.name}`,
    offer: name,
    instanceType: c.instanceType,
    region: c.region,
    // The listed price of this type: the one the price cap checks at launch.
    pricePerHour: c.pricePerHour,
    shape: candidateShape(c),
    unavailable: c.available ? undefined : c.reason ?? 'unavailable',
    noCapacity: !c.available && !c.region,
    // Capacity in a wanted region, and only the price cap in the way.
    ...(!c.available && c.region && cap > 0 && c.pricePerHour > cap ? { blockedBy: 'OverPriceCap' as const } : {}),
  }));
}

/**
 * What the Lease's machine must measure up to: a command Offer's declared
 * shape, or the listed instance type a Lambda machine was rented as.
 * Undefined when there is nothing to check against.
 */
export function claimOf(offer: Offer | undefined, lease: Lease): Claim | undefined {
  if (offer?.spec.command) return offer.spec.command.shape;
  if (!offer?.spec.lambda) return undefined;
  const listed = offer.status?.candidates?.find((c) => c.instanceType === lease.status?.instanceType);
  return listed ? listedClaim(listed) : undefined;
}

function listedClaim(c: Listed): Claim {
  // Only a parsed model is claimed: a free-text description would never be
  // contained in the name nvidia-smi reports.
  return { os: 'linux', arch: c.arch, cpus: c.cpus, memoryGiB: c.memoryGiB, gpus: c.gpus, gpu: c.gpus ? c.gpuModel : undefined, vramGiB: c.vramGiB };
}

/**
 * Whether an Offer's update changes anything a scheduling decision reads of
 * it: its spec (and generation), the candidates it offers, or when it last
 * listed (a price-cap refusal waits for that).
 */
export function offerChangedForScheduling(offer: Offer, old: Offer): boolean {
  if (offer === old) return false;
  if (offer.metadata?.generation !== old.metadata?.generation || offer.status?.lastListTime !== old.status?.lastListTime) return true;
  if (JSON.stringify(offer.spec) !== JSON.stringify(old.spec)) return true;
  return JSON.stringify(candidatesOf(offer)) !== JSON.stringify(candidatesOf(old));
}
