import { describe, expect, it } from '@jest/globals';
import type { LabelSelector } from '../api/common.js';
import { selects } from './selector.js';

const team = { team: 'ml', tier: 'gold' };

describe('selects', () => {
  it.each<[string, LabelSelector | undefined, Record<string, string>, boolean]>([
    ['an absent selector selects all', undefined, {}, true],
    ['an empty selector selects all', {}, {}, true],
    ['matchLabels equal', { matchLabels: { team: 'ml' } }, team, true],
    ['matchLabels differ', { matchLabels: { team: 'web' } }, team, false],
    ['matchLabels missing', { matchLabels: { owner: 'x' } }, team, false],
    ['In holds', { matchExpressions: [{ key: 'tier', operator: 'In', values: ['gold', 'silver'] }] }, team, true],
    ['In without the label', { matchExpressions: [{ key: 'owner', operator: 'In', values: ['x'] }] }, team, false],
    ['NotIn holds without the label', { matchExpressions: [{ key: 'owner', operator: 'NotIn', values: ['x'] }] }, team, true],
    ['NotIn refuses', { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['gold'] }] }, team, false],
    ['Exists', { matchExpressions: [{ key: 'team', operator: 'Exists' }] }, team, true],
    ['DoesNotExist', { matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, team, false],
    ['all must hold', { matchLabels: { team: 'ml' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['bronze'] }] }, team, false],
  ])('%s', (_name, selector, labels, want) => {
    expect(selects(selector, labels)).toBe(want);
  });
});
