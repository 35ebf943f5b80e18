// The followed repositories a check could not see: GitHub answers 404 for a
// repository that was renamed or deleted, and for one the token (or the
// App installation) has no access to; it cannot tell which. The check serves
// the others and says which ones it left out, and how to fix each cause.
import type { ConditionInput } from '../../src/kube/conditions.js';

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
