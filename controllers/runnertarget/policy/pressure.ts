// Pressure evidence read over SSH from each host, parsed here from the text
// of the kernel files, and the tier it argues for. Only busy hosts vote: an
// idle host's calm says nothing about whether jobs fit their machines. A
// tier moves only after several counted samples in a row agree (sample.ts
// decides which samples count), up quickly and down slowly.
import type { RunnerTargetSpec, RunnerTargetTier } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import type { SampleTiming } from './sample.js';

export interface PressureLine {
  avg10: number;
  avg60: number;
  avg300: number;
  /** Total stall time, in microseconds. */
  total: number;
}

export interface PressureFile {
  some: PressureLine;
  full?: PressureLine | undefined;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const LINE = /^(some|full) avg10=(\d+(?:\.\d+)?) avg60=(\d+(?:\.\d+)?) avg300=(\d+(?:\.\d+)?) total=(\d+)$/;

/** A PSI file (/proc/pressure/* or a cgroup's *.pressure): a "some" line and, on newer kernels, a "full" line. */
export function parsePressure(text: string): Parsed<PressureFile> {
  const lines: Partial<Record<'some' | 'full', PressureLine>> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const m = LINE.exec(line);
    if (!m) return { ok: false, message: `not a pressure line: ${JSON.stringify(line.slice(0, 80))}` };
    lines[m[1] as 'some' | 'full'] = { avg10: Number(m[2]), avg60: Number(m[3]), avg300: Number(m[4]), total: Number(m[5]) };
  }
  if (!lines.some) return { ok: false, message: 'no "some" line' };
  return { ok: true, value: { some: lines.some, full: lines.full } };
}

/** A cgroup v2 flat-keyed file (memory.events, cpu.stat): "key value" lines. */
export function parseFlatKeyed(text: string): Parsed<Map<string, number>> {
  const out = new Map<string, number>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const m = /^([a-z_]+) (\d+)$/.exec(line);
    if (!m) return { ok: false, message: `not a "key value" line: ${JSON.stringify(line.slice(0, 80))}` };
    out.set(m[1]!, Number(m[2]));
  }
  return { ok: true, value: out };
}

/** A cgroup v2 single value (memory.current, memory.max): bytes, or "max" for no limit. */
export function parseCgroupValue(text: string): Parsed<number | 'max'> {
  const v = text.trim();
  if (v === 'max') return { ok: true, value: 'max' };
  return /^\d+$/.test(v) ? { ok: true, value: Number(v) } : { ok: false, message: `not a number of bytes or "max": ${JSON.stringify(v.slice(0, 40))}` };
}

/** Splits the output of `head -n 50 FILE...` (the "==> FILE <==" headers) into the files' texts. */
export function splitHeadOutput(text: string): Map<string, string> {
  const files = new Map<string, string>();
  let name: string | undefined;
  let body: string[] = [];
  const flush = () => name !== undefined && files.set(name, body.join('\n').trim());
  for (const line of text.split('\n')) {
    const m = /^==> (.+) <==$/.exec(line);
    if (!m) {
      body.push(line);
      continue;
    }
    flush();
    name = m[1]!;
    body = [];
  }
  flush();
  return files;
}

export interface PressureEvidence {
  cpu: PressureFile;
  memory: PressureFile;
  io: PressureFile;
  /** The runner's cgroup memory use against its limit (0..1), when it has a limit. */
  cgroupMemoryUse?: number | undefined;
  /** OOM kills in the runner's cgroup (memory.events oom_kill), since it was made. */
  cgroupOOMKills?: number | undefined;
}

/** The files a host is asked for, in the order the SSH command reads them. */
export const EVIDENCE_FILES = {
  cpu: '/proc/pressure/cpu',
  memory: '/proc/pressure/memory',
  io: '/proc/pressure/io',
  memoryCurrent: 'memory.current',
  memoryMax: 'memory.max',
  memoryEvents: 'memory.events',
} as const;

/** The evidence of one host from its files (cgroup files by base name); the system-wide ones are required. */
export function parseEvidence(files: ReadonlyMap<string, string>): Parsed<PressureEvidence> {
  const psi: Partial<Record<'cpu' | 'memory' | 'io', PressureFile>> = {};
  for (const kind of ['cpu', 'memory', 'io'] as const) {
    const path = EVIDENCE_FILES[kind];
    const text = files.get(path);
    if (text === undefined) return { ok: false, message: `${path} is missing (the kernel needs PSI: CONFIG_PSI=y, not psi=0)` };
    const parsed = parsePressure(text);
    if (!parsed.ok) return { ok: false, message: `${path}: ${parsed.message}` };
    psi[kind] = parsed.value;
  }
  const evidence: PressureEvidence = { cpu: psi.cpu!, memory: psi.memory!, io: psi.io! };
  const current = parseCgroupValue(files.get(EVIDENCE_FILES.memoryCurrent) ?? '');
  const max = parseCgroupValue(files.get(EVIDENCE_FILES.memoryMax) ?? '');
  if (current.ok && max.ok && max.value !== 'max' && current.value !== 'max' && max.value > 0) evidence.cgroupMemoryUse = current.value / max.value;
  const events = parseFlatKeyed(files.get(EVIDENCE_FILES.memoryEvents) ?? '');
  if (events.ok && events.value.has('oom_kill')) evidence.cgroupOOMKills = events.value.get('oom_kill');
  return { ok: true, value: evidence };
}

export interface PressureThresholds {
  /** "some avg60" percentages at or above which a host is under pressure. */
  high: { cpu: number; memory: number; io: number; cgroupMemoryUse: number };
  /** Below all of these a host is calm. */
  low: { cpu: number; memory: number; io: number; cgroupMemoryUse: number };
}

export const PRESSURE_THRESHOLDS: PressureThresholds = {
  high: { cpu: 50, memory: 10, io: 30, cgroupMemoryUse: 0.9 },
  low: { cpu: 10, memory: 1, io: 5, cgroupMemoryUse: 0.5 },
};

export type PressureLevel = 'high' | 'normal' | 'low';

export function hostPressure(e: PressureEvidence, t: PressureThresholds = PRESSURE_THRESHOLDS): PressureLevel {
  const use = e.cgroupMemoryUse ?? 0;
  // Just-in-time runners take one job per host, so any OOM kill in the runner's cgroup is this job's: it did not fit.
  if ((e.cgroupOOMKills ?? 0) > 0) return 'high';
  if (e.cpu.some.avg60 >= t.high.cpu || e.memory.some.avg60 >= t.high.memory || e.io.some.avg60 >= t.high.io || use >= t.high.cgroupMemoryUse) return 'high';
  if (e.cpu.some.avg60 < t.low.cpu && e.memory.some.avg60 < t.low.memory && e.io.some.avg60 < t.low.io && use < t.low.cgroupMemoryUse) return 'low';
  return 'normal';
}

export interface PoolPressure {
  /** undefined when no busy host gave evidence: the sample says nothing about tiers. */
  level?: PressureLevel | undefined;
  /** The highest "some avg60" of the busy hosts, for status.lastSample.pressure. */
  summary: { cpu: number; memory: number; io: number; hosts: number };
}

/** One host under pressure is enough to go up; every busy host must be calm to go down. */
export function poolPressure(busyEvidence: readonly PressureEvidence[], t: PressureThresholds = PRESSURE_THRESHOLDS): PoolPressure {
  const summary = {
    cpu: Math.max(0, ...busyEvidence.map((e) => e.cpu.some.avg60)),
    memory: Math.max(0, ...busyEvidence.map((e) => e.memory.some.avg60)),
    io: Math.max(0, ...busyEvidence.map((e) => e.io.some.avg60)),
    hosts: busyEvidence.length,
  };
  if (busyEvidence.length === 0) return { summary };
  const levels = busyEvidence.map((e) => hostPressure(e, t));
  const level = levels.includes('high') ? 'high' : levels.every((l) => l === 'low') ? 'low' : 'normal';
  return { level, summary };
}

export interface TierRule {
  /** Counted samples in a row with high pressure that move the pool up. */
  upAfter: number;
  /** Counted samples in a row with low pressure that move the pool down. */
  downAfter: number;
}

export const TIER_RULE: TierRule = { upAfter: 2, downAfter: 6 };

export interface TierStep {
  tier: RunnerTargetTier;
  change?: 'up' | 'down' | undefined;
  reason: string;
}

/** The tier after this check's sample. Uncounted samples (wait, early) change nothing. */
export function tierStep(
  previous: RunnerTargetTier | undefined,
  tiers: RunnerTargetSpec['gce']['machineTypeTiers'],
  level: PressureLevel | undefined,
  timing: SampleTiming['kind'],
  now: number,
  rule: TierRule = TIER_RULE,
): TierStep {
  const index = tiers.findIndex((t) => t.machineType === previous?.machineType);
  if (index < 0) {
    const tier = { machineType: tiers[0]!.machineType, high: 0, low: 0 };
    const why = previous ? `the tier ${previous.machineType} is no longer in spec.gce.machineTypeTiers` : 'no tier yet';
    return { tier, reason: `${why}: the pool starts on ${tier.machineType}` };
  }
  const at = tiers[index]!.machineType;
  if (timing === 'wait' || timing === 'early') return { tier: previous!, reason: `the sample does not count; the pool stays on ${at}` };
  // A broken series starts again from this sample.
  const base = timing === 'restart' ? { high: 0, low: 0 } : { high: previous!.high, low: previous!.low };
  if (level === undefined) return { tier: { ...previous!, ...base }, reason: `no busy host gave pressure evidence; the pool stays on ${at}` };
  const high = level === 'high' ? base.high + 1 : 0;
  const low = level === 'low' ? base.low + 1 : 0;
  const move = (to: number, change: 'up' | 'down', why: string): TierStep => ({
    tier: { machineType: tiers[to]!.machineType, high: 0, low: 0, changedAt: rfc3339(new Date(now)) },
    change,
    reason: `${why}: the pool moves ${change} from ${at} to ${tiers[to]!.machineType}`,
  });
  if (high >= rule.upAfter && index + 1 < tiers.length) return move(index + 1, 'up', `${high} counted samples in a row with high pressure on busy hosts`);
  if (low >= rule.downAfter && index > 0) return move(index - 1, 'down', `${low} counted samples in a row with low pressure on busy hosts`);
  const tier = { ...previous!, high, low };
  if (high >= rule.upAfter) return { tier, reason: `high pressure on busy hosts, and ${at} is already the largest tier` };
  return { tier, reason: `pressure ${level} (${high} high, ${low} low in a row); the pool stays on ${at}` };
}
