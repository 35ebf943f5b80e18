// spec.github.runnerGroup names the org's runner group the runners join;
// generate-jitconfig takes its id, so each check looks the name up once
// (GET /orgs/{org}/actions/runner-groups) and every runner config of that
// check uses the answer.
import type { GitHubActions, RunnerGroup } from '../../../src/providers/github/types.js';
import { TargetSpecError } from '../specerror.js';

/** The id of the group named `name` (exactly as GitHub shows it), or why there is none. */
export function findRunnerGroup(groups: readonly RunnerGroup[], name: string, org: string): { id: number } | { problem: string } {
  const found = groups.find((g) => g.name === name);
  if (found) return { id: found.id };
  const near = groups.find((g) => g.name.toLowerCase() === name.toLowerCase());
  const names = groups.map((g) => g.name).slice(0, 20).join(', ') || 'none';
  const hint = near ? `did you mean "${near.name}"? Names are compared exactly` : `the org has: ${names}`;
  return { problem: `spec.github.runnerGroup "${name}" is not a runner group of the GitHub org ${org} (${hint}); create the group in the org's Actions settings, or set spec.github.runnerGroup to an existing one` };
}

/** Looks the target's runner group up; TargetSpecError (reason RunnerGroupUnknown) when the org has none of that name. */
export async function resolveRunnerGroup(github: GitHubActions, name: string, org: string, signal?: AbortSignal): Promise<number> {
  const found = findRunnerGroup(await github.listRunnerGroups(signal), name, org);
  if ('problem' in found) throw new TargetSpecError(found.problem, 'RunnerGroupUnknown');
  return found.id;
}
