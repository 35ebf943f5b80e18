// From Lambda's instance-type listing to the candidates a Lambda Offer shows
// and Leases choose from. Pure: no I/O, no clock.
import type { OfferCandidate } from '../../api/offer.js';
import { ARCHES, matchShape, parseWhere, type Arch, type MachineShape } from '../../api/where.js';
import type { LambdaInstanceType } from './client.js';

export interface CatalogSettings {
  /** spec.lambda.instanceTypes: only these, when set. */
  instanceTypes?: readonly string[] | undefined;
  /** spec.lambda.regions, most preferred first; empty or unset means any. */
  regions?: readonly string[] | undefined;
  /** When file systems are attached, the one region that holds them. */
  onlyRegion?: string | undefined;
  /** US dollars per hour; 0 means no cap. */
  maxPricePerHour: number;
  /** Architectures the agent can serve. */
  arches: readonly Arch[];
}

/** Lambda's name with hyphens, as users see it (gpu_1x_h100_sxm5 → gpu-1x-h100-sxm5). */
export function candidateName(instanceType: string): string {
  return instanceType.replace(/_/g, '-');
}

/** "H100 (80 GB SXM5)" → model "H100", 80 GiB per GPU. */
export function parseGpuDescription(desc: string): { model?: string; vramGiB?: number } {
  const text = desc.trim();
  if (!text) return {};
  const model = text.replace(/\s*\(.*$/, '').trim();
  const vram = /(\d+(?:\.\d+)?)\s*GB/i.exec(text);
  return { ...(model ? { model } : {}), ...(vram ? { vramGiB: Math.round(Number(vram[1])) } : {}) };
}

/** Lambda lists no architecture field: its Grace Hopper (GH200) and other ARM types say so in their names. */
export function archOf(t: Pick<LambdaInstanceType, 'name' | 'description' | 'gpuDescription'>): Arch | string {
  const text = `${t.name} ${t.description} ${t.gpuDescription}`.toLowerCase();
  if (/gh200|grace|arm64|aarch64/.test(text)) return 'arm64';
  return 'amd64';
}

/** The region a type would launch in: the first wanted region with capacity. */
export function pickRegion(capacity: readonly string[], wanted: readonly string[] | undefined, onlyRegion?: string): string | undefined {
  if (onlyRegion) return capacity.includes(onlyRegion) ? onlyRegion : undefined;
  if (!wanted || wanted.length === 0) return capacity[0];
  return wanted.find((r) => capacity.includes(r));
}

export function priceOf(t: Pick<LambdaInstanceType, 'priceCentsPerHour'>): number {
  return Math.round(t.priceCentsPerHour) / 100;
}

/** Why the cap refuses a price, or undefined when it allows it. */
export function overCap(price: number, cap: number): string | undefined {
  if (cap === 0 || price <= cap) return undefined;
  return `listed at $${price.toFixed(2)}/h, above the cap of $${cap.toFixed(2)}/h; raise spec.lambda.maxPricePerHour to rent it`;
}

export function buildCandidates(types: readonly LambdaInstanceType[], s: CatalogSettings): OfferCandidate[] {
  const wanted = s.instanceTypes && s.instanceTypes.length ? new Set(s.instanceTypes) : undefined;
  const out: OfferCandidate[] = [];
  for (const t of types) {
    if (wanted && !wanted.has(t.name)) continue;
    const gpu = parseGpuDescription(t.gpuDescription);
    const arch = archOf(t);
    const price = priceOf(t);
    const region = pickRegion(t.regions, s.regions, s.onlyRegion);
    let reason: string | undefined;
    if (!(s.arches as readonly string[]).includes(arch)) {
      reason = `the agent is not available for ${arch}; this controller serves ${s.arches.join(', ')}`;
    } else if (!region) {
      reason = s.onlyRegion
        ? `no capacity in ${s.onlyRegion}, the region of spec.lambda.fileSystems`
        : s.regions?.length
          ? `no capacity in ${s.regions.join(', ')}${t.regions.length ? ` (capacity only in ${t.regions.join(', ')}; add one to spec.lambda.regions)` : ''}`
          : 'no capacity in any region';
    } else {
      reason = overCap(price, s.maxPricePerHour);
    }
    out.push({
      name: candidateName(t.name),
      instanceType: t.name,
      ...(region ? { region } : {}),
      gpus: t.gpus,
      ...(t.gpuDescription ? { gpuDescription: t.gpuDescription } : {}),
      ...(gpu.model && t.gpus > 0 ? { gpuModel: gpu.model } : {}),
      ...(gpu.vramGiB !== undefined && t.gpus > 0 ? { vramGiB: gpu.vramGiB } : {}),
      cpus: t.vcpus,
      ...(t.memoryGiB ? { memoryGiB: t.memoryGiB } : {}),
      arch: (arch === 'arm64' ? 'arm64' : 'amd64') as Arch,
      pricePerHour: price,
      available: reason === undefined,
      ...(reason ? { reason } : {}),
    });
  }
  // Cheapest first, as users read the list.
  return out.sort((a, b) => a.pricePerHour - b.pricePerHour || a.name.localeCompare(b.name));
}

/** The shape a Lease's where is matched against: the listing's facts (a GPU's description when no model was parsed from it). */
export function candidateShape(c: OfferCandidate): MachineShape {
  return { os: 'linux', arch: c.arch, cpus: c.cpus, gpu: c.gpuModel ?? (c.gpus > 0 ? c.gpuDescription : undefined), gpus: c.gpus, vramGiB: c.vramGiB };
}

/**
 * A listed type that would serve `where` and has capacity in a wanted
 * region, with only the price cap in the way (the cheapest such), or
 * undefined: what a launch refused for capacity names so the cap can be raised.
 */
export function dearerWithCapacity(types: readonly LambdaInstanceType[], s: Omit<CatalogSettings, 'arches'>, where: string): OfferCandidate | undefined {
  const parsed = parseWhere(where);
  if (!parsed.ok || s.maxPricePerHour === 0) return undefined;
  return buildCandidates(types, { ...s, arches: ARCHES }).find(
    (c) => c.region !== undefined && c.pricePerHour > s.maxPricePerHour && matchShape(parsed.value, candidateShape(c)).ok,
  );
}
