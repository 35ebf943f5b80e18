// Spend of the pool in the current UTC day, from host-hours times each
// host's price at launch, and how many launches the daily budget still
// allows. A host that ran across midnight counts only its hours of today;
// hosts that ended today are carried in status (spendEndedUSD), because
// they are no longer in status.hosts.
import type { RunnerTargetStatus } from '../../../src/api/index.js';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** The UTC day of an instant, YYYY-MM-DD. */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}

export function dayStart(now: number): number {
  return Math.floor(now / DAY_MS) * DAY_MS;
}

/** US dollars rounded to a millionth, so that sums over many checks do not drift. */
export const roundUSD = (usd: number) => Math.round(usd * 1e6) / 1e6;

/** Cost of one host over the part of [start, end) that falls in [from, to). */
export function costUSD(start: number, end: number, pricePerHour: number, from: number, to: number): number {
  const ms = Math.max(0, Math.min(end, to) - Math.max(start, from));
  return (ms / HOUR_MS) * pricePerHour;
}

export interface PricedHost {
  /** RFC 3339 */
  createdAt: string;
  pricePerHour: number;
}

export interface EndedHost extends PricedHost {
  /** RFC 3339: when the VM was deleted or found gone. */
  endedAt: string;
}

export interface Spend {
  day: string;
  /** Hosts that ended today, including those in `ended`. */
  endedUSD: number;
  /** endedUSD plus the live hosts' hours of today. */
  todayUSD: number;
}

const at = (t: string, fallback: number) => {
  const ms = Date.parse(t);
  return Number.isFinite(ms) ? ms : fallback;
};

/**
 * Spend today. `ended` are the hosts this check saw end (deleted or
 * preempted), to add to what status carries; a new UTC day starts from 0.
 */
export function spendToday(
  previous: Pick<RunnerTargetStatus, 'spendDay' | 'spendEndedUSD'>,
  live: readonly PricedHost[],
  ended: readonly EndedHost[],
  now: number,
): Spend {
  const day = utcDay(now);
  const from = dayStart(now);
  const carried = previous.spendDay === day ? (previous.spendEndedUSD ?? 0) : 0;
  // A host with an unreadable createdAt is counted from midnight: spend is never under-counted.
  const endedUSD = roundUSD(carried + ended.reduce((sum, h) => sum + costUSD(at(h.createdAt, from), at(h.endedAt, now), h.pricePerHour, from, now), 0));
  const liveUSD = live.reduce((sum, h) => sum + costUSD(at(h.createdAt, from), now, h.pricePerHour, from, now), 0);
  return { day, endedUSD, todayUSD: roundUSD(endedUSD + liveUSD) };
}

/** How far ahead a launch is priced: the new host and every live host for this long (never past midnight). */
export const LAUNCH_HORIZON_MS = HOUR_MS;

export interface Affordability {
  /** Launches of a host at `pricePerHour` that fit. */
  launches: number;
  /** Spend by the end of the horizon with no launch. */
  projectedUSD: number;
  message: string;
}

/**
 * Launches that keep the projected spend within dailyBudgetUSD: spend so
 * far, plus the live hosts and the new ones over the horizon, capped at
 * the end of the UTC day (tomorrow has its own budget).
 */
export function affordableLaunches(
  spend: Pick<Spend, 'todayUSD'>,
  livePricesPerHour: readonly number[],
  pricePerHour: number,
  dailyBudgetUSD: number,
  now: number,
  horizonMs = LAUNCH_HORIZON_MS,
): Affordability {
  const hours = Math.max(0, Math.min(now + horizonMs, dayStart(now) + DAY_MS) - now) / HOUR_MS;
  const projectedUSD = roundUSD(spend.todayUSD + livePricesPerHour.reduce((s, p) => s + p, 0) * hours);
  const left = dailyBudgetUSD - projectedUSD;
  const each = pricePerHour * hours;
  const launches = left < 0 ? 0 : each <= 0 ? Number.MAX_SAFE_INTEGER : Math.floor(roundUSD(left / each));
  const message =
    launches > 0
      ? `spend today ${spend.todayUSD.toFixed(2)} USD, ${projectedUSD.toFixed(2)} USD projected with the running hosts; dailyBudgetUSD ${dailyBudgetUSD} leaves room for ${launches === Number.MAX_SAFE_INTEGER ? 'any number of' : launches} host${launches === 1 ? '' : 's'} at ${pricePerHour} USD/h`
      : `spend today ${spend.todayUSD.toFixed(2)} USD, ${projectedUSD.toFixed(2)} USD projected with the running hosts: a host at ${pricePerHour} USD/h would pass dailyBudgetUSD ${dailyBudgetUSD}; raise spec.dailyBudgetUSD or wait for the next UTC day`;
  return { launches, projectedUSD, message };
}

/** What one check's launches are priced against: fixed when the check is planned. */
export interface LaunchBudget {
  todayUSD: number;
  /** Prices of the hosts live when the check was planned. */
  livePricesPerHour: readonly number[];
  dailyBudgetUSD: number;
  now: number;
  horizonMs: number;
}

/**
 * Whether one more host at `pricePerHour` fits, on top of the hosts this
 * check already launched. The plan counts its launches at the first
 * placement's price; a launch that fell over to a dearer placement (another
 * zone, a standard VM) spends more, so every launch, first try or fallback,
 * is judged here against what the check has actually launched.
 */
export function fitsBudget(budget: LaunchBudget, launchedPricesPerHour: readonly number[], pricePerHour: number): boolean {
  const { todayUSD, livePricesPerHour, dailyBudgetUSD, now, horizonMs } = budget;
  if (pricePerHour <= 0) return true;
  return affordableLaunches({ todayUSD }, [...livePricesPerHour, ...launchedPricesPerHour], pricePerHour, dailyBudgetUSD, now, horizonMs).launches > 0;
}

/** The BudgetExhausted condition: True when not even one launch fits. */
export function budgetCondition(a: Affordability): { type: 'BudgetExhausted'; status: 'True' | 'False'; reason: string; message: string } {
  return a.launches > 0
    ? { type: 'BudgetExhausted', status: 'False', reason: 'WithinBudget', message: a.message }
    : { type: 'BudgetExhausted', status: 'True', reason: 'DailyBudgetReached', message: a.message };
}
