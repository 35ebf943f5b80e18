// The plan step driven check after check against a small simulated world
// (VMs, GitHub's runners and jobs, what SSH sees), as the e2e tests will
// drive the real controller: scale-up in zone and tier order, back to the
// floor when jobs finish, and no VM deleted while a job runs on it, even when
// GitHub's busy flag and job list lag behind the job's start.
import { describe, expect, it } from '@jest/globals';
import type { RunnerTargetSpec, RunnerTargetStatus } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import type { HostProbe, Observation, PoolRunner, PoolVM, WorkflowJob } from '../observation.js';
import { nextPlacement, type LaunchFailure } from './placement.js';
import { planCheck, plannedStatus } from './plan.js';
import { afterDeregister } from './scaledown.js';
import { NOW, spec } from '../testing/pool.js';

interface SimJob {
  id: number;
  state: 'queued' | 'running' | 'done';
  runner?: string;
  /** Checks left to run. */
  left: number;
  /** GitHub shows the job's start (busy flag, in_progress) only from this check on. */
  visibleFrom: number;
}

class World {
  check = 0;
  status: RunnerTargetStatus = {};
  vms = new Map<string, PoolVM>();
  runners = new Map<string, PoolRunner>();
  jobs: SimJob[] = [];
  /** VM deletions that would have killed a running job. */
  killed: string[] = [];
  launches: string[] = [];
  nextRunnerID = 1;
  /** "machineType zone" pairs without spot capacity (standard VMs still fit). */
  exhausted = new Set<string>();
  /** Machine types over quota. */
  overQuota = new Set<string>();

  constructor(
    readonly spec: RunnerTargetSpec,
    /** Checks between a job's start and GitHub showing it. */
    readonly lagChecks = 1,
  ) {}

  get now() {
    return NOW + this.check * 300_000;
  }

  queue(count: number, checks: number) {
    for (let i = 0; i < count; i++) this.jobs.push({ id: this.jobs.length + 1, state: 'queued', left: checks, visibleFrom: 0 });
  }

  private runningOn(name: string) {
    return this.jobs.some((j) => j.state === 'running' && j.runner === name);
  }

  /** GitHub gives queued jobs to idle online runners. */
  private assign() {
    for (const r of this.runners.values()) {
      if (r.status !== 'online' || this.runningOn(r.name)) continue;
      const job = this.jobs.find((j) => j.state === 'queued');
      if (!job) return;
      Object.assign(job, { state: 'running', runner: r.name, visibleFrom: this.check + this.lagChecks });
    }
  }

  private observe(): Observation {
    const jobs: WorkflowJob[] = this.jobs.flatMap((j): WorkflowJob[] => {
      if (j.state === 'done') return [];
      const shown = j.state === 'running' && this.check >= j.visibleFrom ? 'in_progress' : 'queued';
      // While GitHub lags, a started job is in neither list: it left the queue and is not yet in progress.
      if (j.state === 'running' && shown === 'queued') return [];
      return [{ id: j.id, repository: 'swack-tools/oxidex', status: shown, labels: ['self-hosted'], runnerName: shown === 'in_progress' ? j.runner : undefined }];
    });
    const runners = [...this.runners.values()].map((r) => ({ ...r, busy: this.jobs.some((j) => j.state === 'running' && j.runner === r.name && this.check >= j.visibleFrom) }));
    const probes = new Map<string, HostProbe>([...this.vms.keys()].map((n) => [n, { job: this.runningOn(n) ? 'running' : 'none' }]));
    return { at: this.now, jobs, runners, vms: [...this.vms.values()], probes };
  }

  /**
   * One check: observe, plan, then every change applied as the providers
   * would answer it. GitHub hands out jobs after the check has looked, so a
   * runner it saw idle may be running a job by the time it is deregistered.
   */
  step(arriving?: { count: number; checks: number }) {
    const observation = this.observe();
    if (arriving) this.queue(arriving.count, arriving.checks);
    this.assign();
    const plan = planCheck({ name: 'pool', spec: this.spec, status: this.status, observation });
    let status = plannedStatus(this.status, plan);
    const setHost = (name: string, patch: object) => (status = { ...status, hosts: status.hosts!.map((h) => (h.name === name ? { ...h, ...patch } : h)) });
    for (const c of plan.changes) {
      if (c.kind === 'resume') continue;
      const name = c.intent.hosts[0]!;
      switch (c.kind) {
        case 'launch': {
          const failures: LaunchFailure[] = [];
          let choice = nextPlacement(c.placements, failures);
          while (choice.kind === 'try') {
            const p = choice.placement;
            const code = this.overQuota.has(p.machineType) ? 'QUOTA_EXCEEDED' : p.provisioningModel === 'SPOT' && this.exhausted.has(`${p.machineType} ${p.zone}`) ? 'ZONE_RESOURCE_POOL_EXHAUSTED' : undefined;
            if (!code) break;
            failures.push({ placement: p, code, message: code });
            choice = nextPlacement(c.placements, failures);
          }
          if (choice.kind === 'none') {
            this.launches.push(choice.reason);
            setHost(name, { state: 'Launching' });
            break;
          }
          const { zone, machineType, provisioningModel } = choice.placement;
          this.launches.push(`${provisioningModel} ${machineType} ${zone}`);
          this.vms.set(name, { name, zone, machineType, status: 'RUNNING', createdAt: rfc3339(new Date(this.now)), provisioningModel });
          // The JIT config is delivered and the runner registers within the check.
          this.runners.set(name, { id: this.nextRunnerID++, name, status: 'online', busy: false, labels: ['self-hosted'] });
          break;
        }
        case 'deregister': {
          // GitHub refuses (422) only while its busy flag shows the job.
          const flagged = this.jobs.some((j) => j.state === 'running' && j.runner === name && this.check >= j.visibleFrom);
          if (!flagged) this.runners.delete(name);
          setHost(name, afterDeregister(status.hosts!.find((h) => h.name === name)!, flagged ? 'busy' : 'removed'));
          break;
        }
        case 'register':
          this.runners.set(name, { id: this.nextRunnerID++, name, status: 'online', busy: false, labels: ['self-hosted'] });
          setHost(name, { state: 'Registering' });
          break;
        case 'delete':
          if (this.runningOn(name)) this.killed.push(name);
          this.vms.delete(name);
          break;
        case 'removeRunner':
          this.runners.delete(name);
          break;
      }
    }
    this.status = status;
    for (const j of this.jobs) if (j.state === 'running' && --j.left <= 0) j.state = 'done';
    this.check++;
    return plan;
  }

  run(checks: number) {
    for (let i = 0; i < checks; i++) this.step();
  }
}

const pool: RunnerTargetSpec = { ...spec, floor: 1, maxHosts: 10, dailyBudgetUSD: 1000 };

describe('simulated checks', () => {
  it('a 20-job queue scales to maxHosts in zone and tier order, then jobs finishing bring the pool back to the floor', () => {
    const w = new World(pool);
    w.queue(20, 3);
    const first = w.step();
    expect(first.plan.launch).toBe(10);
    expect(new Set(w.launches)).toEqual(new Set(['SPOT n2d-standard-8 us-central1-a']));
    w.run(20);
    expect(w.jobs.every((j) => j.state === 'done')).toBe(true);
    expect(w.vms.size).toBe(1);
    expect(w.status.hosts?.map((h) => h.state)).toEqual(['Idle']);
    expect(w.killed).toEqual([]);
  });

  it('jobs started within the busy-flag lag are never cut off by a scale-down', () => {
    const w = new World({ ...pool, floor: 0 }, 2);
    w.queue(3, 1);
    w.run(2);
    // Three idle hosts, surplus to an empty queue; while the check drains them, two jobs arrive
    // and start on two of them, and GitHub shows neither the jobs nor the busy flags for two checks.
    const draining = w.step({ count: 2, checks: 4 });
    expect(draining.plan.drain).toHaveLength(3);
    expect(w.status.hosts?.filter((h) => h.state === 'Draining')).toHaveLength(3);
    const next = w.step();
    expect(next.plan.delete).toHaveLength(1);
    expect(next.events.filter((e) => e.reason === 'JobFoundOnDrain')).toHaveLength(2);
    w.run(10);
    expect(w.killed).toEqual([]);
    expect(w.jobs.every((j) => j.state === 'done')).toBe(true);
    expect(w.vms.size).toBe(0);
  });

  it.each<[string, string[], string[], boolean, string]>([
    ['zone exhausted: the next zone', ['n2d-standard-8 us-central1-a'], [], false, 'SPOT n2d-standard-8 us-central1-b'],
    ['quota: the next tier', [], ['n2d-standard-8'], false, 'SPOT n2d-standard-16 us-central1-a'],
    ['no spot anywhere, fallbackToStandard: a standard VM', ['n2d-standard-8 us-central1-a', 'n2d-standard-8 us-central1-b', 'n2d-standard-16 us-central1-a', 'n2d-standard-16 us-central1-b'], [], true, 'STANDARD n2d-standard-8 us-central1-a'],
    ['no spot anywhere and no fallback: nothing launched', ['n2d-standard-8 us-central1-a', 'n2d-standard-8 us-central1-b'], ['n2d-standard-16'], false, 'NoCapacity'],
  ])('%s', (_name, exhausted, overQuota, fallbackToStandard, launched) => {
    const w = new World({ ...pool, gce: { ...pool.gce, fallbackToStandard } });
    w.exhausted = new Set(exhausted);
    w.overQuota = new Set(overQuota);
    w.queue(2, 2);
    w.step();
    expect(w.launches).toEqual([launched, launched]);
  });

  it('a preempted host is replaced while jobs wait, and its ghost runner removed', () => {
    const w = new World({ ...pool, maxHosts: 2, floor: 0 });
    w.queue(4, 3);
    w.run(2);
    const [victim] = [...w.vms.keys()];
    // Spot preemption with instanceTerminationAction DELETE: the VM goes, the registration stays.
    w.vms.delete(victim!);
    const next = w.step();
    expect(next.events).toContainEqual(expect.objectContaining({ reason: 'Preempted' }));
    expect(next.plan.removeRunners).toEqual([victim]);
    expect(next.plan.launch).toBe(1);
    expect(w.runners.has(victim!)).toBe(false);
    expect(w.vms.size).toBe(2);
  });

  it('a long stream of short jobs with a lagging GitHub never loses one', () => {
    const w = new World({ ...pool, floor: 0, maxHosts: 4 }, 1);
    for (let round = 0; round < 10; round++) {
      w.queue(round % 3, 1 + (round % 4));
      w.step();
    }
    w.run(15);
    expect(w.killed).toEqual([]);
    expect(w.jobs.every((j) => j.state === 'done')).toBe(true);
  });
});
