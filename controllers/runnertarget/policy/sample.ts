// When a check's sample of the runners counts for the tier policy. Pressure
// streaks compare samples taken one check interval apart: a sample counts
// only 300 to 450 s after the previous counted one, so a quick retry or a
// delayed check never doubles or stretches the evidence. A check that
// reaches its sample a little early waits for the boundary (at most 2 min)
// and reads the runners again; one that is much earlier does not count.

export interface SampleWindow {
  /** The earliest a sample counts after the previous one, in ms. */
  minMs: number;
  /** The latest a sample continues the series, in ms; later ones start a new series. */
  maxMs: number;
  /** The longest a check waits for the window to open, in ms. */
  maxWaitMs: number;
}

export const SAMPLE_WINDOW: SampleWindow = { minMs: 300_000, maxMs: 450_000, maxWaitMs: 120_000 };

/** The window scaled by a factor (a controller flag, so that tests need not wait minutes). */
export function sampleWindow(scale = 1): SampleWindow {
  if (!(scale > 0) || !Number.isFinite(scale)) throw new RangeError(`the sample window scale must be a positive number, not ${scale}`);
  return { minMs: SAMPLE_WINDOW.minMs * scale, maxMs: SAMPLE_WINDOW.maxMs * scale, maxWaitMs: SAMPLE_WINDOW.maxWaitMs * scale };
}

export type SampleTiming =
  /** Counts and continues the series. */
  | { kind: 'count'; elapsedMs: number }
  /** Counts as the first of a new series: no previous sample, or one too old (streaks restart). */
  | { kind: 'restart'; reason: string }
  /** Early by at most maxWaitMs: wait waitMs, then read the runners again and take the sample. */
  | { kind: 'wait'; waitMs: number; at: number }
  /** Too early to wait for: this check's sample does not count. */
  | { kind: 'early'; elapsedMs: number; reason: string };

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;

export function sampleTiming(previousAt: string | undefined, now: number, window: SampleWindow = SAMPLE_WINDOW): SampleTiming {
  const previous = Date.parse(previousAt ?? '');
  if (!Number.isFinite(previous)) return { kind: 'restart', reason: 'no counted sample yet' };
  const elapsed = now - previous;
  // A previous sample in the future means the clock moved back: its streak cannot be trusted.
  if (elapsed < 0) return { kind: 'restart', reason: `the last sample (${previousAt}) is in the future; the clock moved back` };
  if (elapsed > window.maxMs) {
    return { kind: 'restart', reason: `${seconds(elapsed)} since the last sample, more than ${seconds(window.maxMs)}: pressure streaks start again` };
  }
  if (elapsed >= window.minMs) return { kind: 'count', elapsedMs: elapsed };
  const waitMs = window.minMs - elapsed;
  if (waitMs <= window.maxWaitMs) return { kind: 'wait', waitMs, at: previous + window.minMs };
  return {
    kind: 'early',
    elapsedMs: elapsed,
    reason: `${seconds(elapsed)} since the last sample, less than ${seconds(window.minMs)}, and the boundary is more than ${seconds(window.maxWaitMs)} away: this sample does not count`,
  };
}
