// Runners are the pool's only when they carry its owner labels (the target's
// UID and the installation) as well as its name prefix: a runner of another
// target with the same gce.namePrefix, or of another installation, is never
// in the pool's list, so no cleanup path can remove it.
import { describe, expect, it } from '@jest/globals';
import type { RunnerTarget } from '../../../src/api/index.js';
import { ownerLabels, ownsRunner } from './naming.js';
import { observePool, type TargetClients } from '../checkrun/providers.js';
import { spec } from '../testing/pool.js';

describe('ownsRunner', () => {
  const owner = ownerLabels('uid-1', 'inst');
  it.each([
    ['both owner labels', ['self-hosted', 'linux', 'leasehold-target-uid-1', 'leasehold-installation-inst'], true],
    ['both, in another case', ['LEASEHOLD-TARGET-UID-1', 'Leasehold-Installation-Inst'], true],
    ['another target of the installation', ['leasehold-target-uid-2', 'leasehold-installation-inst'], false],
    ['the target under another installation', ['leasehold-target-uid-1', 'leasehold-installation-other'], false],
    ['no owner labels (a name alike)', ['self-hosted', 'linux', 'x64'], false],
  ])('%s: %s', (_what, labels, owned) => {
    expect(ownsRunner(labels, owner)).toBe(owned);
  });
});

describe('observePool', () => {
  it("lists only the runners carrying the target's UID and installation, whatever their names", async () => {
    const target: RunnerTarget = {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'RunnerTarget',
      metadata: { namespace: 'team-a', name: 'pool', uid: 'uid-a' },
      spec: { ...spec, gce: { ...spec.gce, namePrefix: 'shared' }, github: { ...spec.github, repositories: [] } },
    };
    const runner = (id: number, name: string, labels: string[]) => ({ id, name, status: 'online', busy: false, labels, runnerGroupId: 1, ephemeral: true });
    const clients = {
      gce: { list: async () => [], listAll: async () => ({ instances: [], unreachable: [] }) },
      github: {
        listRunnerGroups: async () => [{ id: 1, name: 'Default', default: true }],
        listRunners: async () => [
          runner(1, 'shared-0000000a', ['self-hosted', ...ownerLabels('uid-a', 'inst')]),
          runner(2, 'shared-0000000b', ['self-hosted', ...ownerLabels('uid-b', 'inst')]),
          runner(3, 'shared-0000000c', ['self-hosted', ...ownerLabels('uid-a', 'other')]),
          runner(4, 'shared-0000000d', ['self-hosted']),
        ],
      },
    } as unknown as TargetClients;
    const seen = await observePool(target, clients, 'inst');
    expect(seen.runners.map((r) => r.name)).toEqual(['shared-0000000a']);
  });
});
