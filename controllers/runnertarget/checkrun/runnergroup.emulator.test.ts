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
const { observePool, TargetSpecError } = await import('./operations.js');

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
});
