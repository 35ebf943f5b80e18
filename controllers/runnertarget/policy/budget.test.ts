import { describe, expect, it } from '@jest/globals';
import { affordableLaunches, budgetCondition, costUSD, fitsBudget, spendToday, utcDay, type LaunchBudget } from './budget.js';

const T = (s: string) => Date.parse(s);

describe('spendToday', () => {
  const now = T('2026-12-03T12:00:00Z');
  it.each<[string, Parameters<typeof spendToday>[0], Parameters<typeof spendToday>[1], Parameters<typeof spendToday>[2], number, number]>([
    ['no hosts', {}, [], [], 0, 0],
    ['one host since 10:00 at 0.5/h', {}, [{ createdAt: '2026-12-03T10:00:00Z', pricePerHour: 0.5 }], [], 0, 1],
    ['a host since yesterday counts from midnight', {}, [{ createdAt: '2026-12-02T20:00:00Z', pricePerHour: 1 }], [], 0, 12],
    ['carried ended spend of today', { spendDay: '2026-12-03', spendEndedUSD: 2.5 }, [], [], 2.5, 2.5],
    ['ended spend of yesterday is dropped', { spendDay: '2026-12-02', spendEndedUSD: 9 }, [], [], 0, 0],
    [
      'a host that ended today adds its hours of today',
      { spendDay: '2026-12-03', spendEndedUSD: 1 },
      [],
      [{ createdAt: '2026-12-02T23:00:00Z', endedAt: '2026-12-03T02:00:00Z', pricePerHour: 2 }],
      5,
      5,
    ],
    ['a host that ended yesterday adds nothing', {}, [], [{ createdAt: '2026-12-02T10:00:00Z', endedAt: '2026-12-02T23:00:00Z', pricePerHour: 2 }], 0, 0],
    ['an unreadable createdAt counts from midnight', {}, [{ createdAt: 'soon', pricePerHour: 1 }], [], 0, 12],
    ['live and ended together', { spendDay: '2026-12-03', spendEndedUSD: 0.25 }, [{ createdAt: '2026-12-03T11:30:00Z', pricePerHour: 0.14 }], [], 0.25, 0.32],
  ])('%s', (_name, previous, live, ended, endedUSD, todayUSD) => {
    expect(spendToday(previous, live, ended, now)).toEqual({ day: '2026-12-03', endedUSD, todayUSD });
  });

  it('across midnight: the new day starts from the running hosts alone', () => {
    const before = spendToday({}, [{ createdAt: '2026-12-03T22:00:00Z', pricePerHour: 1 }], [], T('2026-12-03T23:59:00Z'));
    expect(before.todayUSD).toBeCloseTo(1.983333, 5);
    const after = spendToday({ spendDay: before.day, spendEndedUSD: 3 }, [{ createdAt: '2026-12-03T22:00:00Z', pricePerHour: 1 }], [], T('2026-12-04T00:30:00Z'));
    expect(after).toEqual({ day: '2026-12-04', endedUSD: 0, todayUSD: 0.5 });
  });

  it('costUSD counts only the overlap', () => {
    expect(costUSD(0, 7_200_000, 3, 3_600_000, 10_800_000)).toBe(3);
    expect(costUSD(0, 1000, 3, 5000, 9000)).toBe(0);
  });

  it('utcDay is the UTC date', () => expect(utcDay(T('2026-12-03T23:59:59-05:00'))).toBe('2026-12-04'));
});

describe('affordableLaunches', () => {
  const noon = T('2026-12-03T12:00:00Z');
  it.each<[string, number, number[], number, number, number, number]>([
    ['empty pool, plenty of budget', 0, [], 0.5, 10, noon, 20],
    ['spend so far and live hosts leave room for 2', 6, [1, 1], 0.9, 10, noon, 2],
    ['exactly at the budget', 9, [], 1, 10, noon, 1],
    ['a cent short', 9.01, [], 1, 10, noon, 0],
    ['already past the budget', 11, [], 0.1, 10, noon, 0],
    ['running hosts alone pass it', 9, [2], 0.1, 10, noon, 0],
    ['30 min before midnight the horizon is 30 min', 9, [], 2, 10, T('2026-12-03T23:30:00Z'), 1],
  ])('%s', (_name, todayUSD, live, price, budget, now, launches) => {
    expect(affordableLaunches({ todayUSD }, live, price, budget, now).launches).toBe(launches);
  });

  it('a free tier never limits', () => expect(affordableLaunches({ todayUSD: 1 }, [], 0, 10, noon).launches).toBe(Number.MAX_SAFE_INTEGER));

  it('BudgetExhausted names the field to change', () => {
    const none = affordableLaunches({ todayUSD: 10 }, [], 1, 10, noon);
    expect(budgetCondition(none)).toMatchObject({ status: 'True', reason: 'DailyBudgetReached', message: expect.stringMatching(/raise spec.dailyBudgetUSD/) });
    expect(budgetCondition(affordableLaunches({ todayUSD: 0 }, [], 1, 10, noon))).toMatchObject({ status: 'False', reason: 'WithinBudget' });
  });
});

describe('fitsBudget: every launch of a check, first try or fallback, against what the check already launched', () => {
  const noon = T('2026-12-03T12:00:00Z');
  // 10 USD a day, 4 spent, one live host at 1/h: 5 USD left over the one-hour horizon.
  const budget: LaunchBudget = { todayUSD: 4, livePricesPerHour: [1], dailyBudgetUSD: 10, now: noon, horizonMs: 3_600_000 };
  it.each<[string, number[], number, boolean]>([
    ['first launch at the spot price', [], 1, true],
    ['a dearer standard fallback that still fits', [], 5, true],
    ['a fallback dearer than what is left', [], 5.5, false],
    ['the plan counted four spot launches; one fell over to standard at 3/h, so the next spot launch still fits', [3], 1, true],
    ['after that, a second spot launch passes the budget', [3, 1], 1.5, false],
    ['a dearer fallback after cheaper launches passes it, though it alone would fit', [1, 1], 4, false],
    ['free hosts never limit', [9], 0, true],
  ])('%s', (_name, launched, price, fits) => {
    expect(fitsBudget(budget, launched, price)).toBe(fits);
  });
});
