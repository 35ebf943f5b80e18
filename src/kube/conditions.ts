// Conditions per the Kubernetes API conventions: lastTransitionTime moves
// only when status changes, and every condition records the generation it
// was computed from.

import type { Condition } from '../api/common.js';

export type { Condition };
export type ConditionStatus = Condition['status'];

export type ConditionInput = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

/** Returns a new list with `input` set; the input list is not modified. */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  input: ConditionInput,
  generation: number | undefined,
  now: Date,
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const prev = i >= 0 ? list[i] : undefined;
  const next: Condition = {
    ...input,
    lastTransitionTime: prev && prev.status === input.status ? prev.lastTransitionTime : rfc3339(now),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

export function getCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return getCondition(conditions, type)?.status === 'True';
}

/** RFC 3339 with second precision, as Kubernetes stores metav1.Time. */
export function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
