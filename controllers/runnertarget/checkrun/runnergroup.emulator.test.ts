// spec.github.runnerGroup: the name looked up once per check against the
// GitHub emulator's runner groups, its id passed to generate-jitconfig, and an
// unknown name a condition reason naming the field (never a stuck teardown).
import { describe, it, expect, beforeAll, afterAll, jest } from '@jest/globals';
import type { RunnerTarget } from '../../../src/api/index.js';
import type { SshSession } from '../../../src/machine/ssh.js';
import { GitHubClient } from '../../../src/providers/github/client.js';
import { startGitHubEmulator, type GitHubEmulator } from '../../../e2e/fakes/github/server.js';
import type { ChangeContext } from './changecontext.js';
import { DurabilityGuard } from './durability.js';
import type { Observation } from '../observation.js';
import { NOW, spec } from '../testing/pool.js';

// The host side of a delivery is SSH (covered end to end); here it only records what was written.
const written: string[] = [];
const opened: string[] = [];
jest.unstable_mockModule('./hostssh.js', () => ({
  SSH_TIMEOUT_MS: 30_000,
  openHost: async (name: string) => {
    opened.push(name);
    const session = { exec: async (_cmd: string, o: { stdin?: string }) => (written.push(o.stdin ?? ''), { code: 0, stdout: '', stderr: '' }), close: () => undefined };
    return { session: session as unknown as SshSession };
  },
}));
const { deliverRunnerConfig } = await import('./deliver.js');
const { observePool, TargetSpecError } = await import('./providers.js');
const { groupRef, RunnerGroupIds } = await import('./runnergroupids.js');

describe('runner group against the GitHub emulator', () => {
  let gh: GitHubEmulator;
  let github: GitHubClient;
  let spot: number;
  beforeAll(async () => {
    gh = await startGitHubEmulator({ org: 'swack-tools' });
    github = new GitHubClient({ org: gh.org, credentials: { token: gh.token }, api: gh.url });
    spot = gh.addRunnerGroup('spot-runners', 'selected');
    // A repository exists at the emulator once it has a run.
    gh.queueRun('oxidex', [{ labels: ['self-hosted'] }]);
  });
  afterAll(() => gh.stop());

  const target = (runnerGroup: string, deleting = false): RunnerTarget => ({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'RunnerTarget',
    metadata: { namespace: 'ci', name: 'pool', uid: 'u-1', ...(deleting ? { deletionTimestamp: new Date(NOW).toISOString() as never } : {}) },
    spec: { ...spec, github: { ...spec.github, runnerGroup } },
  });
  const clients = () => ({ gce: { list: async () => [], listAll: async () => ({ instances: [], unreachable: [] }) } as never, github });
  const groupLookups = () => gh.requests.filter((r) => r.op === 'list-runner-groups').length;

  it('a check looks the group up once and observes its id', async () => {
    const before = groupLookups();
    const seen = await observePool(target('spot-runners'), clients(), 'abcd');
    expect(seen.runnerGroupId).toBe(spot);
    expect(groupLookups() - before).toBe(1);
  });

  it('an unknown group ends the check with reason RunnerGroupUnknown, naming the field', async () => {
    const err = await observePool(target('gpu'), clients(), 'abcd').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TargetSpecError);
    expect(err).toMatchObject({ reason: 'RunnerGroupUnknown', message: expect.stringContaining('spec.github.runnerGroup "gpu"') });
  });

  it('a pool being deleted is observed without its group, so an unknown group does not hold the teardown', async () => {
    const seen = await observePool(target('gpu', true), clients(), 'abcd');
    expect(seen.runnerGroupId).toBeUndefined();
  });

  const context = (observation: Partial<Observation>, runnerGroup = 'spot-runners'): ChangeContext => ({
    target: target(runnerGroup),
    clients: clients(),
    observation: { at: NOW, jobs: [], runners: [], vms: [], probes: new Map(), ...observation },
    installationID: 'abcd',
    host: { privateKey: '', publicKey: '', user: 'leasehold', port: 22 },
    guard: new DurabilityGuard(),
    now: () => NOW,
    affordable: () => true,
    record: async () => true,
    settle: async () => true,
  });

  it('generate-jitconfig gets the id of the group, and the runner joins it', async () => {
    const outcome = await deliverRunnerConfig('pool-a1', 'us-central1-a', 'r-1', context({ runnerGroupId: spot }), context({}).host);
    expect(outcome).toMatchObject({ ok: true, event: { reason: 'RunnerConfigDelivered' } });
    expect(gh.runners().find((r) => r.name === 'pool-a1')).toMatchObject({ runner_group_id: spot });
    expect(written).toHaveLength(1);
  });

  it('without a group id the host is not opened and nothing is asked of GitHub', async () => {
    const before = gh.mutations.length;
    const outcome = await deliverRunnerConfig('pool-a2', 'us-central1-a', 'r-2', context({}, 'gpu'), context({}).host);
    expect(outcome).toMatchObject({ ok: false, event: { type: 'Warning', reason: 'RunnerGroupUnknown', message: expect.stringContaining('spec.github.runnerGroup "gpu"') } });
    expect(opened).not.toContain('pool-a2');
    expect(gh.mutations.length).toBe(before);
  });

  describe('kept between checks', () => {
    it('two checks list the groups once', async () => {
      const ids = new RunnerGroupIds();
      const before = groupLookups();
      expect((await observePool(target('spot-runners'), clients(), 'abcd', undefined, ids)).runnerGroupId).toBe(spot);
      expect((await observePool(target('spot-runners'), clients(), 'abcd', undefined, ids)).runnerGroupId).toBe(spot);
      expect(groupLookups() - before).toBe(1);
    });

    it('a group GitHub no longer knows is looked up again at the next check, and its new id used', async () => {
      const ids = new RunnerGroupIds();
      const old = gh.addRunnerGroup('renamed-later', 'selected');
      const t = target('renamed-later');
      expect((await observePool(t, clients(), 'abcd', undefined, ids)).runnerGroupId).toBe(old);
      // Removed and made again under the same name: the kept id is stale.
      gh.removeRunnerGroup(old);
      const fresh = gh.addRunnerGroup('renamed-later', 'selected');
      const before = groupLookups();
      const stale = await observePool(t, clients(), 'abcd', undefined, ids);
      expect(stale.runnerGroupId).toBe(old);
      expect(groupLookups() - before).toBe(0);
      const ctx = { ...context({ runnerGroupId: old }, 'renamed-later'), runnerGroupGone: (id: number) => ids.forget(groupRef(t.spec.github), id) };
      const outcome = await deliverRunnerConfig('pool-a3', 'us-central1-a', 'r-3', ctx, ctx.host);
      expect(outcome).toMatchObject({ ok: false, event: { type: 'Warning', reason: 'RunnerGroupUnknown', message: expect.stringContaining(`runner group ${old}`) } });
      const next = await observePool(t, clients(), 'abcd', undefined, ids);
      expect(next.runnerGroupId).toBe(fresh);
      expect(groupLookups() - before).toBe(1);
    });
  });
});

describe('RunnerGroupIds', () => {
  const ref = { org: 'o', runnerGroup: 'g' };
  it('looks a kept id up again after its time, and a failed lookup keeps nothing', async () => {
    let now = 0;
    const ids = new RunnerGroupIds({ ttlMs: 1000, now: () => now });
    let calls = 0;
    const lookUp = async () => ++calls;
    await expect(ids.resolve(ref, async () => Promise.reject(new Error('502')))).rejects.toThrow('502');
    expect(await ids.resolve(ref, lookUp)).toBe(1);
    now = 999;
    expect(await ids.resolve(ref, lookUp)).toBe(1);
    now = 1000;
    expect(await ids.resolve(ref, lookUp)).toBe(2);
  });

  it('forgets only the id GitHub refused, per org and name', async () => {
    const ids = new RunnerGroupIds();
    await ids.resolve(ref, async () => 5);
    await ids.resolve({ org: 'other', runnerGroup: 'g' }, async () => 6);
    ids.forget(ref, 4);
    expect(await ids.resolve(ref, async () => 9)).toBe(5);
    ids.forget(ref, 5);
    expect(await ids.resolve(ref, async () => 9)).toBe(9);
    expect(await ids.resolve({ org: 'other', runnerGroup: 'g' }, async () => 7)).toBe(6);
  });
});
