// spec.github.runnerGroup: the name found among the org's runner groups, an
// unknown one a problem naming the field and the fix. The lookup and the
// delivery against the GitHub emulator are in runnergroup.emulator.test.ts.
import { describe, it, expect } from '@jest/globals';
import type { RunnerGroup } from '../../../src/providers/github/types.js';
import { findRunnerGroup } from './providers.js';

const groups: RunnerGroup[] = [
  { id: 1, name: 'Default', isDefault: true, visibility: 'all' },
  { id: 7, name: 'spot-runners', isDefault: false, visibility: 'selected' },
];

describe('findRunnerGroup', () => {
  it.each([
    ['Default', { id: 1 }],
    ['spot-runners', { id: 7 }],
    ['Spot-Runners', { problem: expect.stringContaining('did you mean "spot-runners"?') }],
    ['gpu', { problem: expect.stringContaining('the org has: Default, spot-runners') }],
  ])('%s', (name, want) => {
    expect(findRunnerGroup(groups, name, 'swack-tools')).toEqual(want);
  });

  it('names the field and the fix', () => {
    expect(findRunnerGroup(groups, 'gpu', 'swack-tools')).toEqual({ problem: expect.stringMatching(/^spec\.github\.runnerGroup "gpu" is not a runner group of the GitHub org swack-tools .*set spec\.github\.runnerGroup to an existing one$/) });
  });
});
