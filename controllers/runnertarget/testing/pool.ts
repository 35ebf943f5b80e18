// Builders shared by the policy tests: a target spec, hosts, runners, jobs, VMs.
import type { RunnerHost, RunnerTargetSpec } from '../../../src/api/index.js';
import type { PoolRunner, PoolVM, WorkflowJob } from '../observation.js';

export const NOW = Date.parse('2026-12-03T12:00:00Z');
export const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, 'Z');
export const ago = (s: number) => iso(NOW - s * 1000);

export const spec: RunnerTargetSpec = {
  github: { org: 'swack-tools', repositories: ['swack-tools/oxidex'], runnerGroup: 'Default', hostReuse: 'ephemeral', tokenSecretRef: { name: 'gh', namespace: undefined, key: 'token' }, apiURL: 'https://api.github.com', rerunPreemptedJobs: false },
  gce: {
    project: 'my-project',
    zones: ['us-central1-a', 'us-central1-b'],
    machineTypeTiers: [
      { machineType: 'n2d-standard-8', pricePerHour: 0.07, standardPricePerHour: 0.35 },
      { machineType: 'n2d-standard-16', pricePerHour: 0.14, standardPricePerHour: 0.7 },
    ],
    serviceAccount: 'spot-runner-host@my-project.iam.gserviceaccount.com',
    fallbackToStandard: false,
    endpoint: 'https://compute.googleapis.com/compute/v1',
    maxRunDuration: '24h',
    externalIP: true,
  },
  floor: 1,
  maxHosts: 10,
  dailyBudgetUSD: 10,
  checkInterval: '5m',
  dryRun: false,
};

export function host(name: string, state: RunnerHost['state'], over: Partial<RunnerHost> = {}): RunnerHost {
  return { name, zone: 'us-central1-a', machineType: 'n2d-standard-8', provisioningModel: 'SPOT', pricePerHour: 0.07, state, createdAt: ago(3600), ...over };
}

export function runner(name: string, busy = false, over: Partial<PoolRunner> = {}): PoolRunner {
  return { id: name.length * 1000 + name.charCodeAt(name.length - 1), name, status: 'online', busy, labels: ['self-hosted', 'linux', 'x64'], ...over };
}

let nextJob = 1;
export function job(status: WorkflowJob['status'], labels: string[] = ['self-hosted'], over: Partial<WorkflowJob> = {}): WorkflowJob {
  return { id: nextJob++, repository: 'swack-tools/oxidex', status, labels, ...over };
}

export function vm(name: string, status: PoolVM['status'] = 'RUNNING', over: Partial<PoolVM> = {}): PoolVM {
  return { name, zone: 'us-central1-a', machineType: 'n2d-standard-8', status, createdAt: ago(3600), provisioningModel: 'SPOT', ...over };
}

export const times = <T>(n: number, make: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => make(i));
