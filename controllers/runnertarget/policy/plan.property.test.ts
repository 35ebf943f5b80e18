// Properties of the plan over random pools: whatever GitHub, Compute Engine
// and SSH report, no runner that may be busy is deregistered, no drained host
// is deleted unless its runner is gone and SSH saw no job, and launches never
// take the pool past maxHosts.
import { describe, expect, it } from '@jest/globals';
import * as fc from 'fast-check';
import type { RunnerHost, RunnerTargetStatus } from '../../../src/api/index.js';
import type { HostProbe, Observation, PoolRunner, PoolVM, WorkflowJob } from '../observation.js';
import { planCheck } from './plan.js';
import { NOW, ago, host, spec } from '../testing/pool.js';

const NAMES = ['pool-00000001', 'pool-00000002', 'pool-00000003', 'pool-00000004', 'pool-00000005', 'pool-00000006'];
const STATES: RunnerHost['state'][] = ['Launching', 'Registering', 'Idle', 'Busy', 'Draining', 'Deleting'];
const VM_STATUSES: (PoolVM['status'] | 'absent')[] = ['absent', 'PROVISIONING', 'RUNNING', 'RUNNING', 'STOPPING', 'TERMINATED'];

const member = fc.record({
  state: fc.constantFrom(...STATES),
  idleFor: fc.integer({ min: 0, max: 3600 }),
  vm: fc.constantFrom(...VM_STATUSES),
  runner: fc.constantFrom('absent', 'idle', 'busy', 'offline'),
  jobOnIt: fc.boolean(),
  probe: fc.constantFrom<HostProbe['job'] | 'absent'>('absent', 'none', 'running', 'unknown'),
});

const pool = fc.record({
  members: fc.array(member, { minLength: 0, maxLength: NAMES.length }),
  queued: fc.integer({ min: 0, max: 30 }),
  maxHosts: fc.integer({ min: 1, max: 8 }),
  floor: fc.integer({ min: 0, max: 3 }),
  spent: fc.integer({ min: 0, max: 1200 }).map((cents) => cents / 100),
});

describe('planCheck properties', () => {
  it('never deregisters a runner that may be busy, never deletes a drained host unconfirmed, never passes maxHosts', () => {
    fc.assert(
      fc.property(pool, ({ members, queued, maxHosts, floor, spent }) => {
        const hosts = members.map((m, i) => host(NAMES[i]!, m.state, { idleSince: ago(m.idleFor) }));
        const vms: PoolVM[] = members.flatMap((m, i) => (m.vm === 'absent' ? [] : [{ name: NAMES[i]!, zone: 'us-central1-a', machineType: 'n2d-standard-8', status: m.vm, createdAt: ago(7200), provisioningModel: 'SPOT' as const }]));
        const runners: PoolRunner[] = members.flatMap((m, i) =>
          m.runner === 'absent' ? [] : [{ id: i + 1, name: NAMES[i]!, status: m.runner === 'offline' ? ('offline' as const) : ('online' as const), busy: m.runner === 'busy', labels: ['self-hosted'] }],
        );
        const jobs: WorkflowJob[] = [
          ...members.flatMap((m, i) => (m.jobOnIt ? [{ id: 1000 + i, repository: 'swack-tools/oxidex', status: 'in_progress' as const, labels: ['self-hosted'], runnerName: NAMES[i]! }] : [])),
          ...Array.from({ length: queued }, (_, i) => ({ id: i, repository: 'swack-tools/oxidex', status: 'queued' as const, labels: ['self-hosted'] })),
        ];
        const probes = new Map<string, HostProbe>(members.flatMap((m, i) => (m.probe === 'absent' ? [] : [[NAMES[i]!, { job: m.probe }] as const])));
        const status: RunnerTargetStatus = { hosts, spendDay: '2026-12-03', spendEndedUSD: spent };
        const observation: Observation = { at: NOW, jobs, runners, vms, probes };
        const p = planCheck({ name: 'pool', spec: { ...spec, floor: Math.min(floor, maxHosts), maxHosts }, status, observation });

        for (const c of p.changes) {
          if (c.kind === 'resume') continue;
          const name = c.intent.hosts[0]!;
          const m = members[NAMES.indexOf(name)];
          if (c.kind === 'deregister') {
            expect(m).toBeDefined();
            expect({ name, runner: m!.runner, jobOnIt: m!.jobOnIt, probe: m!.probe }).toEqual({ name, runner: expect.stringMatching(/^(idle|offline)$/), jobOnIt: false, probe: expect.not.stringMatching(/^running$/) });
          }
          if (c.kind === 'delete' && c.reason === 'Drained' && m?.state === 'Draining') {
            expect({ name, runner: m.runner, probe: m.probe }).toEqual({ name, runner: 'absent', probe: 'none' });
          }
        }
        const launches = p.changes.filter((c) => c.kind === 'launch').length;
        if (launches > 0) expect(p.hosts.length).toBeLessThanOrEqual(maxHosts);
        expect(p.spend.todayUSD).toBeGreaterThanOrEqual(spent);
      }),
      { numRuns: 400 },
    );
  });
});
