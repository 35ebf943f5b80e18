// The conditions a check writes, from where its machine is. A check that
// found the lease held elsewhere writes no status at all: any write would
// move the object's resourceVersion under the holder, whose next receipt
// write would then conflict and stop its check. RepositoryMissing names the
// followed repositories a check could not see: GitHub answers 404 for a
// repository that was renamed or deleted, and for one the token (or the App
// installation) has no access to; it cannot tell which. The check serves the
// others and says which ones it left out, and how to fix each cause.
import type { RunnerTargetStatus } from '../../src/api/index.js';
import { setCondition, type ConditionInput } from '../../src/kube/conditions.js';
import type { DurableCondition } from './checkrun/durability.js';
import type { CheckStep } from './machine.js';
import type { Observation } from './observation.js';
import { rateLimitedCondition } from './policy/ratelimit.js';

export interface ConditionFacts {
  /** The identity holding the lease (this controller, once acquired). */
  holder: string;
  durable: DurableCondition;
  /** BudgetExhausted from the plan, when the check got that far. */
  budget?: ConditionInput | undefined;
}

/** The conditions to set after `step`, or undefined when this check must not write status. */
export function checkConditions(step: Pick<CheckStep, 'state' | 'context'>, facts: ConditionFacts): ConditionInput[] | undefined {
  const { state, context } = step;
  const budget = facts.budget ? [facts.budget] : [];
  // A dry run holds no lease, so it never says anything about one.
  const released: ConditionInput[] = context.dryRun ? [] : [{ type: 'Held', status: 'False', reason: 'CheckEnded', message: `${facts.holder} released the check lease` }];
  switch (state) {
    case 'Held':
    case 'Idle':
    case 'Holding':
      return undefined;
    case 'Done':
      return [{ type: 'Ready', status: 'True', reason: 'CheckCompleted', message: context.message }, facts.durable, ...budget, ...released];
    case 'DryRun':
      return [{ type: 'Ready', status: 'True', reason: 'DryRun', message: 'spec.dryRun: the check only planned (status.plan); nothing was changed' }, ...budget];
    case 'NotDurable':
      return [{ type: 'Ready', status: 'False', reason: 'NotDurable', message: context.message }, facts.durable, ...released];
    case 'Failed':
      return [{ type: 'Ready', status: 'False', reason: context.reason, message: context.message }, ...released];
    default:
      // A check under way: the holder says it holds the lease; a dry run holds none.
      return context.dryRun ? [] : [{ type: 'Held', status: 'True', reason: 'CheckRunning', message: `${facts.holder} holds the check lease` }];
  }
}

/** Where a check stands, as its status conditions tell it. */
export interface CheckStanding {
  step: Pick<CheckStep, 'state' | 'context'>;
  facts: ConditionFacts;
  /** The GitHub rate limit that stopped the check, if one did. */
  limited: { until: number; message: string } | undefined;
  observation: Pick<Observation, 'missingRepositories'> | undefined;
  generation: number | undefined;
  /** The time each condition is set at; called once per condition. */
  now: () => Date;
}

/** `conditions` with the check's own set over them, and GitHub's: a rate limit and missing repositories. */
export function checkStatusConditions(conditions: RunnerTargetStatus['conditions'], check: CheckStanding): RunnerTargetStatus['conditions'] {
  const own = checkConditions(check.step, check.facts);
  const was = (type: string) => conditions?.some((c) => c.type === type && c.status === 'True');
  const github: ConditionInput[] = [];
  if (own !== undefined) {
    // Each says True while it holds, and False once, after it held, so that the fix shows.
    if (check.limited) github.push(rateLimitedCondition(check.limited));
    else if (check.observation && was('RateLimited')) github.push(rateLimitedCondition(undefined));
    const missing = check.observation?.missingRepositories;
    if (missing?.length || (check.observation && was('RepositoryMissing'))) github.push(repositoriesCondition(missing));
  }
  let list = conditions;
  for (const c of [...(own ?? []), ...github]) list = setCondition(list, c, check.generation, check.now());
  return list;
}

export function repositoriesCondition(missing: readonly string[] | undefined): ConditionInput {
  if (missing && missing.length) {
    const names = missing.join(', ');
    return {
      type: 'RepositoryMissing',
      status: 'True',
      reason: 'RepositoryNotFound',
      message: `GitHub answers 404 for ${names} in spec.github.repositories (renamed, deleted, or the token cannot see it); its jobs are not served, the other repositories are. Fix: correct or remove the name in spec.github.repositories, or give the token (or the GitHub App installation) access to the repository`.slice(0, 1000),
    };
  }
  return { type: 'RepositoryMissing', status: 'False', reason: 'AllFound', message: 'GitHub lists every repository in spec.github.repositories' };
}
