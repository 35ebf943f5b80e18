import { describe, expect, it } from '@jest/globals';
import type { ConditionInput } from '../../src/kube/conditions.js';
import { checkConditions, type ConditionFacts } from './conditions.js';
import { CHECK_STATES, restore, type CheckState } from './machine.js';

const durableTrue = { type: 'Durable' as const, status: 'True' as const, reason: 'StatusWritten', message: 'ok' };
const durableFalse = { type: 'Durable' as const, status: 'False' as const, reason: 'StatusConflict', message: '409' };
const budget: ConditionInput = { type: 'BudgetExhausted', status: 'False', reason: 'WithinBudget', message: 'room for 3' };
const facts = (over: Partial<ConditionFacts> = {}): ConditionFacts => ({ holder: 'replica-a', durable: durableTrue, budget, ...over });
const summary = (list: ConditionInput[] | undefined) => list?.map((c) => `${c.type}=${c.status}/${c.reason}`);

describe('checkConditions', () => {
  it.each<[CheckState, boolean, ConditionFacts, string[] | undefined]>([
    ['Held', false, facts(), undefined],
    ['Idle', false, facts(), undefined],
    ['Holding', false, facts(), undefined],
    ['Observing', false, facts(), ['Held=True/CheckRunning']],
    ['Recording', false, facts(), ['Held=True/CheckRunning']],
    ['Observing', true, facts(), []],
    ['Done', false, facts(), ['Ready=True/CheckCompleted', 'Durable=True/StatusWritten', 'BudgetExhausted=False/WithinBudget', 'Held=False/CheckEnded']],
    ['NotDurable', false, facts({ durable: durableFalse }), ['Ready=False/NotDurable', 'Durable=False/StatusConflict', 'Held=False/CheckEnded']],
    ['DryRun', true, facts(), ['Ready=True/DryRun', 'BudgetExhausted=False/WithinBudget']],
    ['Failed', false, facts({ budget: undefined }), ['Ready=False/ObserveFailed', 'Held=False/CheckEnded']],
    ['Failed', true, facts({ budget: undefined }), ['Ready=False/ObserveFailed']],
  ])('%s (dry run %s)', (state, dryRun, f, want) => {
    expect(summary(checkConditions({ state, context: { ...restore(state).context, dryRun, reason: 'ObserveFailed' } }, f))).toEqual(want);
  });

  it('a check held elsewhere writes no status, wherever it is asked', () => {
    for (const state of CHECK_STATES) if (state === 'Held') expect(checkConditions({ state, context: restore(state).context }, facts())).toBeUndefined();
  });

  it('a dry run never claims or releases the lease', () => {
    for (const state of CHECK_STATES) {
      const list = checkConditions({ state, context: { ...restore(state).context, dryRun: true } }, facts()) ?? [];
      expect({ state, held: list.some((c) => c.type === 'Held') }).toEqual({ state, held: false });
    }
  });
});
