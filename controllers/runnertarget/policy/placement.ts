// Where a launch goes: the pool's tier in each zone (most preferred first),
// then the following tiers, then the ones below it. A capacity error moves
// to the next zone; a quota error moves to the next tier (quota is counted
// per region and machine family, so another zone would fail the same way);
// a standard VM is tried only when spot failed everywhere and
// gce.fallbackToStandard allows it. Any other error stops the launch.
import type { RunnerTargetSpec } from '../../../src/api/index.js';

export interface Placement {
  zone: string;
  machineType: string;
  /** Index in spec.gce.machineTypeTiers. */
  tier: number;
  provisioningModel: 'SPOT' | 'STANDARD';
  pricePerHour: number;
}

export const CAPACITY_CODES = ['ZONE_RESOURCE_POOL_EXHAUSTED', 'ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS'] as const;
export const QUOTA_CODES = ['QUOTA_EXCEEDED'] as const;

export type LaunchErrorKind = 'capacity' | 'quota' | 'other';

/** The kind of a Compute Engine error code, from a zone Operation's error.errors[].code or a synchronous HTTP error. */
export function launchErrorKind(code: string | undefined): LaunchErrorKind {
  if ((CAPACITY_CODES as readonly string[]).includes(code ?? '')) return 'capacity';
  if ((QUOTA_CODES as readonly string[]).includes(code ?? '')) return 'quota';
  return 'other';
}

export interface LaunchFailure {
  placement: Placement;
  code: string;
  message: string;
}

/** Tiers from the pool's tier up, then down from just below it. */
export function tierOrder(count: number, start: number): number[] {
  const from = Math.min(Math.max(0, start), count - 1);
  const up = Array.from({ length: count - from }, (_, i) => from + i);
  const down = Array.from({ length: from }, (_, i) => from - 1 - i);
  return [...up, ...down];
}

/** Every placement a launch may try, in order. */
export function placementOrder(gce: Pick<RunnerTargetSpec['gce'], 'zones' | 'machineTypeTiers' | 'fallbackToStandard'>, startTier: number): Placement[] {
  const tiers = tierOrder(gce.machineTypeTiers.length, startTier);
  const spot = tiers.flatMap((tier) => {
    const t = gce.machineTypeTiers[tier]!;
    return gce.zones.map((zone): Placement => ({ zone, machineType: t.machineType, tier, provisioningModel: 'SPOT', pricePerHour: t.pricePerHour }));
  });
  if (!gce.fallbackToStandard) return spot;
  const standard = spot.map((p): Placement => ({ ...p, provisioningModel: 'STANDARD', pricePerHour: gce.machineTypeTiers[p.tier]!.standardPricePerHour ?? p.pricePerHour }));
  return [...spot, ...standard];
}

export type PlacementChoice =
  | { kind: 'try'; placement: Placement; skipped: string[] }
  /** Nothing left to try, or an error that another placement would not fix. */
  | { kind: 'none'; reason: 'NoCapacity' | 'OverBudget' | 'LaunchFailed'; message: string };

const key = (p: Pick<Placement, 'zone' | 'machineType' | 'provisioningModel'>) => `${p.provisioningModel} ${p.machineType} ${p.zone}`;

/**
 * The next placement after the failures so far. `affordable` says whether
 * one more host at a price fits the daily budget.
 */
export function nextPlacement(order: readonly Placement[], failures: readonly LaunchFailure[], affordable: (pricePerHour: number) => boolean = () => true): PlacementChoice {
  const other = failures.find((f) => launchErrorKind(f.code) === 'other');
  if (other) {
    return { kind: 'none', reason: 'LaunchFailed', message: `launching ${other.placement.machineType} in ${other.placement.zone} failed: ${other.code}: ${other.message}` };
  }
  const noCapacity = new Set(failures.filter((f) => launchErrorKind(f.code) === 'capacity').map((f) => key(f.placement)));
  const noQuota = new Set(failures.filter((f) => launchErrorKind(f.code) === 'quota').map((f) => `${f.placement.provisioningModel} ${f.placement.machineType}`));
  const skipped: string[] = [];
  let overBudget = false;
  for (const p of order) {
    if (noCapacity.has(key(p)) || noQuota.has(`${p.provisioningModel} ${p.machineType}`)) continue;
    if (!affordable(p.pricePerHour)) {
      overBudget = true;
      skipped.push(`${key(p)}: ${p.pricePerHour} USD/h would pass dailyBudgetUSD`);
      continue;
    }
    return { kind: 'try', placement: p, skipped };
  }
  const tried = failures.map((f) => `${key(f.placement)}: ${f.code}`).join('; ');
  if (overBudget) return { kind: 'none', reason: 'OverBudget', message: `no placement fits dailyBudgetUSD${tried ? ` (${tried})` : ''}; raise spec.dailyBudgetUSD or wait for the next UTC day` };
  const fallback = order.some((p) => p.provisioningModel === 'STANDARD') ? '' : '; set spec.gce.fallbackToStandard to launch standard VMs then, or add zones or machineTypeTiers';
  return { kind: 'none', reason: 'NoCapacity', message: `no zone and tier had capacity: ${tried || 'nothing to try'}${fallback}` };
}
