// Every host is inserted with a lifetime Compute Engine enforces itself
// (scheduling.maxRunDuration, then DELETE), so a VM outlives a controller
// that is gone for good by at most that long. The controller replaces idle
// hosts before the bound: an idle host older than the bound less a margin is
// drained the usual way (runner removed, no job confirmed over SSH, VM
// deleted), and demand launches a new one if jobs need it. The margin covers
// the checks a drain takes, so Compute Engine's deletion never meets an idle
// host that could take a job in between.
import type { RunnerHost, RunnerTargetSpec } from '../../../src/api/index.js';
import { DEFAULT_MAX_RUN_DURATION } from '../../../src/api/runnertarget-gce.js';
import { durationMs } from '../../../src/api/duration.js';
import type { PoolRunner } from '../observation.js';

/** The least margin before the bound: time for a drain's few checks. */
export const LIFETIME_MARGIN_MIN_MS = 30 * 60_000;

export const maxRunDurationMs = (spec: Pick<RunnerTargetSpec, 'gce'>) => durationMs(spec.gce.maxRunDuration ?? DEFAULT_MAX_RUN_DURATION);

/** How long before the bound an idle host is replaced: two check intervals, at least 30 min, at most half the bound. */
export function lifetimeMarginMs(spec: Pick<RunnerTargetSpec, 'gce' | 'checkInterval'>): number {
  const bound = maxRunDurationMs(spec);
  return Math.min(bound / 2, Math.max(LIFETIME_MARGIN_MIN_MS, 2 * durationMs(spec.checkInterval)));
}

export interface LifetimeOptions {
  /** How long a host must have been seen idle first: GitHub's busy flag lags this much behind a job's start. */
  lagMs: number;
  /** The bound and margin times this (--runner-lifetime-scale; below 1 only for tests). Default 1. */
  scale?: number;
}

/** Idle hosts with an online runner that are old enough to be replaced before Compute Engine deletes them, with why. */
export function lifetimeDrains(
  hosts: readonly RunnerHost[],
  runners: readonly PoolRunner[],
  busy: ReadonlySet<string>,
  spec: Pick<RunnerTargetSpec, 'gce' | 'checkInterval'>,
  now: number,
  { lagMs, scale = 1 }: LifetimeOptions,
): { name: string; reason: string }[] {
  const bound = maxRunDurationMs(spec) * scale;
  const margin = lifetimeMarginMs(spec) * scale;
  const online = new Set(runners.filter((r) => r.status === 'online').map((r) => r.name));
  const idleLongEnough = (h: RunnerHost) => now - Date.parse(h.idleSince ?? '') >= lagMs;
  return hosts
    .filter((h) => h.state === 'Idle' && online.has(h.name) && !busy.has(h.name) && idleLongEnough(h) && now - Date.parse(h.createdAt) >= bound - margin)
    .map((h) => ({
      name: h.name,
      reason: `host ${h.name} is ${Math.floor((now - Date.parse(h.createdAt)) / 60_000)} min old and idle; Compute Engine deletes it at spec.gce.maxRunDuration (${spec.gce.maxRunDuration ?? DEFAULT_MAX_RUN_DURATION}), so it is replaced now, while no job runs on it`,
    }));
}
