import { describe, expect, it } from '@jest/globals';
import type { RunnerTarget } from '../../../src/api/index.js';
import { ProviderError } from '../../../src/providers/errors.js';
import { RunnerBusyError } from '../../../src/providers/github/errors.js';
import type { ChangeContext } from './changecontext.js';
import { deliverOver } from './deliver.js';
import { DurabilityGuard, NotDurableError } from './durability.js';
import { NOW, spec } from '../testing/pool.js';

const target = { metadata: { namespace: 'ci', name: 'pool', uid: 'u-1' }, spec } as RunnerTarget;

/** A host whose config file is there or not, and a GitHub that records what it is asked. */
function world(opts: { configOnHost: boolean; deleteFails?: Error; removeFails?: boolean; receiptOfConfig?: string }) {
  const calls: string[] = [];
  const commands: string[] = [];
  const guard = new DurabilityGuard();
  const session = {
    exec: async (command: string, o: { stdin?: string }) => {
      commands.push(command);
      if (command.startsWith('test -s')) {
        calls.push('ssh: is the config there');
        // A Register also reads the receipt named beside the config, which fails where none is.
        const asksReceipt = command.includes('jitconfig.receipt');
        const found = opts.configOnHost && (!asksReceipt || opts.receiptOfConfig !== undefined);
        return { code: found ? 0 : 1, stdout: found && asksReceipt ? `${opts.receiptOfConfig}\n` : '', stderr: '', truncated: false };
      }
      if (command.startsWith('rm -f')) {
        calls.push('ssh: remove the last config');
        return { code: opts.removeFails ? 1 : 0, stdout: '', stderr: opts.removeFails ? 'read-only file system' : '', truncated: false };
      }
      calls.push(`ssh: write ${o.stdin}`);
      return { code: 0, stdout: '', stderr: '', truncated: false };
    },
  };
  const github = {
    deleteRunner: async (id: number) => {
      calls.push(`github: delete runner ${id}`);
      if (opts.deleteFails) throw opts.deleteFails;
    },
    generateJitConfig: async (r: { name: string; runnerGroupId: number }) => {
      calls.push(`github: generate ${r.name} in group ${r.runnerGroupId}`);
      return { runner: { id: 99 }, encodedJitConfig: 'CONFIG' };
    },
  };
  const ctx = {
    target,
    clients: { gce: {} as never, github: github as never },
    observation: { at: NOW, jobs: [], runners: [], vms: [], probes: new Map() },
    installationID: 'abcd',
    host: { privateKey: '', publicKey: '', user: 'leasehold', port: 22 },
    guard,
    now: () => NOW,
    affordable: () => true,
    record: async () => true,
    settle: async () => true,
  } satisfies ChangeContext;
  return { session, ctx, calls, guard, commands };
}

describe('deliverOver', () => {
  it('a host with no registration yet: one config made and written', async () => {
    const { session, ctx, calls } = world({ configOnHost: false });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1 });
    expect(calls).toEqual(['github: generate pool-1 in group 1', 'ssh: write CONFIG']);
    expect(out).toMatchObject({ ok: true, event: { reason: 'RunnerConfigDelivered' } });
    expect(out.phase).toBeUndefined();
  });

  it.each([
    ['removed already', undefined],
    ['already gone at GitHub', new ProviderError('NotFound', 'no such runner')],
  ])('an offline registration whose config never reached the host (%s): it goes, then a new config is made and written', async (_what, deleteFails) => {
    const { session, ctx, calls } = world({ configOnHost: false, ...(deleteFails ? { deleteFails } : {}) });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, stale: { id: 7 } });
    expect(calls).toEqual(['ssh: is the config there', 'github: delete runner 7', 'github: generate pool-1 in group 1', 'ssh: write CONFIG']);
    expect(out).toMatchObject({ ok: true, event: { reason: 'RunnerConfigDelivered' } });
  });

  it('an offline registration whose config is on the host: its runner is starting; nothing is made or removed', async () => {
    const { session, ctx, calls } = world({ configOnHost: true });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, stale: { id: 7 } });
    expect(calls).toEqual(['ssh: is the config there']);
    expect(out).toMatchObject({ ok: true, receiptID: 'r-1', event: { type: 'Normal', reason: 'RunnerStarting' } });
    expect(out.phase).toBeUndefined();
  });

  it('a host that had a runner (a Register): the last config goes before the new registration is made', async () => {
    const { session, ctx, calls } = world({ configOnHost: true });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, replace: true });
    expect(calls).toEqual(['ssh: remove the last config', 'github: generate pool-1 in group 1', 'ssh: write CONFIG']);
    expect(out).toMatchObject({ ok: true, event: { reason: 'RunnerConfigDelivered' } });
  });

  it('a reused host whose last runner is still listed offline: that registration goes before the new one takes its name', async () => {
    const { session, ctx, calls } = world({ configOnHost: true });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, replace: true, finished: { id: 7 } });
    expect(calls).toEqual(['ssh: remove the last config', 'github: delete runner 7', 'github: generate pool-1 in group 1', 'ssh: write CONFIG']);
    expect(out).toMatchObject({ ok: true, event: { reason: 'RunnerConfigDelivered' } });
  });

  it('GitHub says the last runner still holds a job: no new registration', async () => {
    const { session, ctx, calls } = world({ configOnHost: true, deleteFails: new RunnerBusyError('Runner "pool-1" is still running a job') });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, replace: true, finished: { id: 7 } });
    expect(calls).toEqual(['ssh: remove the last config', 'github: delete runner 7']);
    expect(out).toMatchObject({ ok: false, event: { reason: 'RunnerBusy' } });
  });

  it('a resumed receipt whose config is on the host and whose runner GitHub no longer lists: the runner came and went; no second runner', async () => {
    const { session, ctx, calls } = world({ configOnHost: true });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, resumed: true });
    expect(calls).toEqual(['ssh: is the config there']);
    expect(out).toMatchObject({ ok: true, phase: 'Done', runnerLeft: true, event: { reason: 'RunnerLeft' } });
  });

  it('a resumed receipt with no config on the host: the config is made and written', async () => {
    const { session, ctx, calls } = world({ configOnHost: false });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, resumed: true, replace: true });
    expect(calls).toEqual(['ssh: is the config there', 'ssh: remove the last config', 'github: generate pool-1 in group 1', 'ssh: write CONFIG']);
    expect(out.runnerLeft).toBeUndefined();
  });

  it('a Register names its receipt beside the config, before the config takes its place', async () => {
    const { session, ctx, commands } = world({ configOnHost: true });
    await deliverOver(session, 'pool-1', 'register-0123456789ab', ctx, { groupId: 1, replace: true });
    const write = commands.at(-1)!;
    expect(write).toContain(`printf '%s\\n' 'register-0123456789ab' > "$HOME/.leasehold/jitconfig.receipt"`);
    expect(write.indexOf('jitconfig.receipt')).toBeLessThan(write.indexOf('&& mv '));
  });

  it('a resumed Register whose finished runner is still listed and whose host still has that runner\'s config: the old registration and config go, one new runner is made', async () => {
    // A check died with the receipt written, before the last config was removed: the config there is the finished runner's.
    for (const receiptOfConfig of [undefined, 'register-older']) {
      const { session, ctx, calls } = world({ configOnHost: true, ...(receiptOfConfig ? { receiptOfConfig } : {}) });
      const out = await deliverOver(session, 'pool-1', 'register-now', ctx, { groupId: 1, replace: true, resumed: true, stale: { id: 7 } });
      expect(calls).toEqual(['ssh: is the config there', 'github: delete runner 7', 'ssh: remove the last config', 'github: generate pool-1 in group 1', 'ssh: write CONFIG']);
      expect(out).toMatchObject({ ok: true, event: { reason: 'RunnerConfigDelivered' } });
    }
  });

  it('a resumed Register with no runner listed and the last runner\'s config still there: not taken for a runner that came and went', async () => {
    const { session, ctx, calls } = world({ configOnHost: true, receiptOfConfig: 'register-older' });
    const out = await deliverOver(session, 'pool-1', 'register-now', ctx, { groupId: 1, replace: true, resumed: true });
    expect(calls).toEqual(['ssh: is the config there', 'ssh: remove the last config', 'github: generate pool-1 in group 1', 'ssh: write CONFIG']);
    expect(out.runnerLeft).toBeUndefined();
  });

  it('a resumed Register whose own config is on the host: its runner is starting, or came and went, as for a launch', async () => {
    const starting = world({ configOnHost: true, receiptOfConfig: 'register-now' });
    expect(await deliverOver(starting.session, 'pool-1', 'register-now', starting.ctx, { groupId: 1, replace: true, resumed: true, stale: { id: 9 } })).toMatchObject({ ok: true, event: { reason: 'RunnerStarting' } });
    expect(starting.calls).toEqual(['ssh: is the config there']);
    const left = world({ configOnHost: true, receiptOfConfig: 'register-now' });
    expect(await deliverOver(left.session, 'pool-1', 'register-now', left.ctx, { groupId: 1, replace: true, resumed: true })).toMatchObject({ ok: true, phase: 'Done', runnerLeft: true });
    expect(left.calls).toEqual(['ssh: is the config there']);
  });

  it('between checks (unlisted), a config already on the host is left as it is: no registration made, no RunnerLeft guessed without the runner list', async () => {
    const { session, ctx, calls } = world({ configOnHost: true });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, unlisted: true });
    expect(calls).toEqual(['ssh: is the config there']);
    expect(out).toMatchObject({ ok: true, configOnHost: true, event: { reason: 'RunnerStarting' } });
    expect(out.phase).toBeUndefined();
    expect(out.runnerLeft).toBeUndefined();
  });

  it('between checks (unlisted), a host with no config gets one', async () => {
    const { session, ctx, calls } = world({ configOnHost: false });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, unlisted: true });
    expect(calls).toEqual(['ssh: is the config there', 'github: generate pool-1 in group 1', 'ssh: write CONFIG']);
    expect(out).toMatchObject({ ok: true, configOnHost: true, event: { reason: 'RunnerConfigDelivered' } });
  });

  it('the last config cannot be removed: no registration is made, and the next check tries again', async () => {
    const { session, ctx, calls } = world({ configOnHost: true, removeFails: true });
    const out = await deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, replace: true });
    expect(calls).toEqual(['ssh: remove the last config']);
    expect(out).toMatchObject({ ok: false, event: { reason: 'DeliveryFailed', message: expect.stringMatching(/read-only file system/) } });
  });

  it('a removal that fails otherwise stops the delivery: no second registration under the name', async () => {
    const { session, ctx, calls } = world({ configOnHost: false, deleteFails: new ProviderError('Unknown', 'socket hang up', { answerLost: true }) });
    await expect(deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, stale: { id: 7 } })).rejects.toThrow('socket hang up');
    expect(calls).toEqual(['ssh: is the config there', 'github: delete runner 7']);
  });

  it('once status is not durable, the stale registration is not touched', async () => {
    const { session, ctx, calls, guard } = world({ configOnHost: false });
    guard.record({ kind: 'conflict', message: '409' });
    await expect(deliverOver(session, 'pool-1', 'r-1', ctx, { groupId: 1, stale: { id: 7 } })).rejects.toThrow(NotDurableError);
    expect(calls).toEqual(['ssh: is the config there']);
    expect(guard.refused).toEqual(['github.deleteRunner pool-1']);
  });
});
