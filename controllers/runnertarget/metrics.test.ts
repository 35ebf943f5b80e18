// RunnerTarget metrics as a scrape shows them: the pool gauges from status
// and spec, and preemptions counted from what a check found.
import { describe, it, expect } from '@jest/globals';
import { Registry } from 'prom-client';
import { RUNNER_HOST_STATES, type RunnerTarget } from '../../src/api/index.js';
import { RunnerTargetMetrics } from './metrics.js';
import { host, spec } from './testing/pool.js';

const target: RunnerTarget = {
  apiVersion: 'leasehold.dev/v1alpha1',
  kind: 'RunnerTarget',
  metadata: { namespace: 'ci', name: 'pool' },
  spec: { ...spec, dailyBudgetUSD: 12.5 },
  status: { hosts: [host('pool-a', 'Idle'), host('pool-b', 'Busy'), host('pool-c', 'Busy')], counts: { hosts: 3, busy: 2, idle: 1, queued: 4 }, spendTodayUSD: 3.25 },
};

async function scrape(registry: Registry, name: string): Promise<{ labels: Record<string, string>; value: number }[]> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values ?? []).map((v) => ({ labels: v.labels as Record<string, string>, value: v.value }));
}

describe('RunnerTargetMetrics', () => {
  it.each([
    ['leasehold_runnertarget_daily_budget_usd', [{ labels: { namespace: 'ci', runnertarget: 'pool' }, value: 12.5 }]],
    ['leasehold_runnertarget_spend_today_usd', [{ labels: { namespace: 'ci', runnertarget: 'pool' }, value: 3.25 }]],
    ['leasehold_runnertarget_queued_jobs', [{ labels: { namespace: 'ci', runnertarget: 'pool' }, value: 4 }]],
  ])('%s', async (name, want) => {
    const registry = new Registry();
    new RunnerTargetMetrics(registry, () => [target]);
    expect(await scrape(registry, name)).toEqual(want);
  });

  it('hosts by state, every state present', async () => {
    const registry = new Registry();
    new RunnerTargetMetrics(registry, () => [target]);
    const hosts = await scrape(registry, 'leasehold_runnertarget_hosts');
    expect(hosts).toHaveLength(RUNNER_HOST_STATES.length);
    expect(hosts).toEqual(expect.arrayContaining([expect.objectContaining({ labels: expect.objectContaining({ state: 'Busy' }), value: 2 }), expect.objectContaining({ labels: expect.objectContaining({ state: 'Launching' }), value: 0 })]));
  });

  it('counts the hosts a check found preempted, and nothing else it found', async () => {
    const registry = new Registry();
    const m = new RunnerTargetMetrics(registry, () => [target]);
    m.found(target, [
      { type: 'Warning', reason: 'Preempted', message: 'host pool-a was preempted' },
      { type: 'Warning', reason: 'Preempted', message: 'host pool-b was preempted' },
      { type: 'Warning', reason: 'OrphanVM', message: 'VM pool-x has no runner' },
    ]);
    m.found(target, []);
    expect(await scrape(registry, 'leasehold_runnertarget_preemptions_total')).toEqual([{ labels: { namespace: 'ci', runnertarget: 'pool' }, value: 2 }]);
  });

  it('counts the jobs a preemption cut', async () => {
    const registry = new Registry();
    const m = new RunnerTargetMetrics(registry, () => [target]);
    m.found(target, [
      { type: 'Warning', reason: 'Preempted', message: 'host pool-a was preempted' },
      { type: 'Warning', reason: 'PreemptedJob', message: 'job 1 of workflow run 2 was running on host pool-a' },
    ]);
    expect(await scrape(registry, 'leasehold_runnertarget_preempted_jobs_total')).toEqual([{ labels: { namespace: 'ci', runnertarget: 'pool' }, value: 1 }]);
  });
});
