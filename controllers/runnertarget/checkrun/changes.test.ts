import { describe, expect, it } from '@jest/globals';
import type { Receipt, RunnerTarget } from '../../../src/api/index.js';
import { ProviderError } from '../../../src/providers/errors.js';
import { CapacityExhausted } from '../../../src/providers/gce/errors.js';
import { RunnerBusyError } from '../../../src/providers/github/errors.js';
import type { ChangeContext } from './changecontext.js';
import { runChange } from './changes.js';
import { DurabilityGuard, NotDurableError } from './durability.js';
import { placementOrder } from '../policy/placement.js';
import { receiptFor } from '../policy/receipts.js';
import { NOW, spec } from '../testing/pool.js';

const target = { metadata: { namespace: 'ci', name: 'pool', uid: 'u-1' }, spec } as RunnerTarget;

function context(gce: Record<string, unknown>, github: Record<string, unknown> = {}) {
  const calls: string[] = [];
  const guard = new DurabilityGuard();
  let now = NOW;
  const ctx: ChangeContext = {
    target,
    clients: { gce: gce as never, github: github as never },
    observation: { at: NOW, jobs: [], runners: [], vms: [], probes: new Map() },
    installationID: 'abcd',
    host: { privateKey: '', publicKey: 'ssh-ed25519 AAAA', user: 'leasehold', port: 22 },
    guard,
    now: () => ++now,
    affordable: () => true,
    record: async (r) => (calls.push(`record ${r.zone} ${r.machineType}`), true),
    settle: async (_id, phase) => (calls.push(`settle ${phase}`), true),
  };
  return { ctx, calls, guard };
}

const launch = (): { change: Parameters<typeof runChange>[0]; receipt: Receipt } => {
  const placements = placementOrder(spec.gce, 0);
  const intent = { action: 'Launch' as const, hosts: ['pool-00000001'], zone: placements[0]!.zone, machineType: placements[0]!.machineType, provisioningModel: 'SPOT' as const };
  return { change: { kind: 'launch', intent, placements }, receipt: receiptFor(intent, NOW, 'u-1') };
};

describe('runChange', () => {
  it('a launch whose first placement no longer fits the budget (an earlier launch of the check went dearer) sends no insert and settles OverBudget', async () => {
    const inserts: string[] = [];
    const { ctx } = context({ insert: async (s: { zone: string }) => (inserts.push(s.zone), { name: 'op', zone: s.zone }), waitOperation: async () => ({}) });
    ctx.affordable = () => false;
    const { change, receipt } = launch();
    const out = await runChange(change, receipt, ctx);
    expect(out).toMatchObject({ ok: false, phase: 'Failed', receiptID: receipt.id, event: { reason: 'OverBudget' } });
    expect(out.message).toContain('spec.dailyBudgetUSD');
    expect(inserts).toEqual([]);
  });

  it('an insert whose answer was lost leaves its receipt Intended, for the next check to look', async () => {
    const { ctx, calls } = context({ insert: async () => Promise.reject(new ProviderError('Unknown', 'socket hang up', { answerLost: true })) });
    const { change, receipt } = launch();
    const out = await runChange(change, receipt, ctx);
    expect(out).toMatchObject({ ok: false, receiptID: receipt.id });
    expect(out.phase).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('a zone without capacity: its receipt settled Failed, a new receipt for the next zone written before that insert', async () => {
    const inserts: string[] = [];
    const { ctx, calls } = context({
      insert: async (s: { zone: string; requestId: string }) => {
        inserts.push(`${s.zone} ${s.requestId}`);
        calls.push(`insert ${s.zone}`);
        if (s.zone === 'us-central1-a') throw new CapacityExhausted('no room', 503, 'ZONE_RESOURCE_POOL_EXHAUSTED', { zone: s.zone, machineType: 'n2d-standard-8' });
        return { name: 'op', zone: s.zone };
      },
      waitOperation: async () => ({}),
    });
    const { change, receipt } = launch();
    const out = await runChange(change, receipt, ctx);
    expect(calls).toEqual(['insert us-central1-a', 'settle Failed', 'record us-central1-b n2d-standard-8', 'insert us-central1-b']);
    expect(out).toMatchObject({ ok: true, event: { reason: 'Launched' } });
    expect(out.phase).toBeUndefined();
    expect(out.receiptID).not.toBe(receipt.id);
    expect(new Set(inserts.map((i) => i.split(' ')[1])).size).toBe(2);
  });

  it('once status is not durable, no provider call is made', async () => {
    const { ctx, guard, calls } = context({ insert: async () => calls.push('insert') });
    guard.record({ kind: 'conflict', message: '409' });
    const { change, receipt } = launch();
    await expect(runChange(change, receipt, ctx)).rejects.toThrow(NotDurableError);
    expect(calls).toEqual([]);
    expect(guard.refused).toEqual(['compute.instances.insert us-central1-a/pool-00000001']);
  });

  it.each([
    ['gone already', new ProviderError('NotFound', 'no such runner'), { ok: true, phase: 'Done', deregistered: 'gone' }],
    ['busy (422)', new RunnerBusyError('still running a job'), { ok: false, phase: 'Failed', deregistered: 'busy' }],
  ])('removing a runner that is %s', async (_what, err, expected) => {
    const { ctx } = context({}, { deleteRunner: async () => Promise.reject(err) });
    const intent = { action: 'Deregister' as const, hosts: ['pool-00000001'] };
    expect(await runChange({ kind: 'deregister', intent, runnerID: 7 }, receiptFor(intent, NOW), ctx)).toMatchObject(expected);
  });
});
