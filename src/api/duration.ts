// Durations in Go's time.ParseDuration syntax ("20m", "1h30m", "90s",
// "500ms", "1.5h", "0"), restricted to non-negative values, which is all a
// timeout or interval in Leasehold can be.

const UNITS_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3, // U+00B5 MICRO SIGN
  'μs': 1e-3, // U+03BC GREEK SMALL LETTER MU
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const UNIT_ALT = 'ns|us|µs|μs|ms|s|m|h';
const NUMBER = '([0-9]+(\\.[0-9]*)?|\\.[0-9]+)';

/** Longest duration string accepted. */
export const DURATION_MAX_LENGTH = 64;

/**
 * A regular expression (string, anchored) accepting exactly the non-negative
 * Go durations; valid in ECMAScript and RE2, so usable as an OpenAPI pattern.
 */
export const DURATION_PATTERN = `^(0|(${NUMBER}(${UNIT_ALT}))+)$`;

const DURATION_RE = new RegExp(DURATION_PATTERN);
const PART_RE = new RegExp(`${NUMBER}(${UNIT_ALT})`, 'gy');

/** Go's limit: durations are int64 nanoseconds. */
const MAX_MS = 9_223_372_036_854.775;

/** True when `s` is a duration parseDuration accepts. */
export function isDuration(s: string): boolean {
  return typeof s === 'string' && s.length <= DURATION_MAX_LENGTH && DURATION_RE.test(s);
}

/**
 * Parses a Go-style duration into milliseconds (possibly fractional for
 * sub-millisecond units). Throws an Error saying what is wrong.
 */
export function parseDuration(s: string): number {
  if (typeof s !== 'string' || s.length === 0) {
    throw new Error('duration is empty: write a number with a unit, e.g. "20m", "1h30m", "90s" or "500ms"');
  }
  if (s.startsWith('-')) throw new Error(`duration ${JSON.stringify(s)} is negative: durations here cannot be`);
  if (s.length > DURATION_MAX_LENGTH || !DURATION_RE.test(s)) {
    const hint = /^[0-9.]+$/.test(s) ? '; add a unit (ns, us, ms, s, m, h)' : '';
    throw new Error(
      `duration ${JSON.stringify(s)} is not valid: write a number with a unit, e.g. "20m", "1h30m", "90s" or "500ms"${hint}`,
    );
  }
  if (s === '0') return 0;
  let total = 0;
  PART_RE.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = PART_RE.exec(s)) !== null) {
    total += Number(m[1]) * (UNITS_MS[m[3] ?? ''] ?? NaN);
  }
  if (!Number.isFinite(total) || total > MAX_MS) {
    throw new Error(`duration ${JSON.stringify(s)} is too long: the limit is about 2562047h`);
  }
  return total;
}

/**
 * Formats milliseconds as a compact Go-style duration that parseDuration
 * reads back: "1h30m", "20m", "1m30s", "1.5s", "500ms", "0s".
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new Error(`cannot format ${ms} as a duration`);
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms === 0) return '0s';
  if (ms < 1) {
    const us = ms * 1000;
    if (us >= 1) return `${trim(us)}us`;
    return `${trim(ms * 1e6)}ns`;
  }
  if (ms < 1000) return `${trim(ms)}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  let out = '';
  if (h > 0) out += `${h}h`;
  if (m > 0) out += `${m}m`;
  if (s > 0) out += `${trim(s)}s`;
  return out;
}

function trim(n: number): string {
  // At most millisecond (or finer, for the small units) precision, no trailing zeros.
  return String(Math.round(n * 1000) / 1000);
}

// Durations copied into status (a Lease's idleTimeout) are read on every
// check; the few distinct values a cluster has are parsed once each.
const parsed = new Map<string, number>();

/** parseDuration, remembering each distinct value (at most 256 of them). */
export function durationMs(s: string): number {
  let ms = parsed.get(s);
  if (ms === undefined) {
    ms = parseDuration(s);
    if (parsed.size < 256) parsed.set(s, ms);
  }
  return ms;
}
