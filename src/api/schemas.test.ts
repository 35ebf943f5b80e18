import { describe, it, expect } from '@jest/globals';
import type { z } from 'zod';
import {
  ConditionSchema,
  LeaseSchema,
  LeaseSpecSchema,
  LeaseStatusSchema,
  OfferSchema,
  OfferSpecSchema,
  PeerFleetSchema,
  PeerFleetSpecSchema,
  RunnerTargetSchema,
  RunnerTargetSpecSchema,
  parseWhere,
  type Lease,
  type LeaseStatus,
} from './index.js';

const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop';
const RSA = 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7== work';
const TS = '2026-01-02T03:04:05Z';

/** Parses and returns the first issue as "path: message", or "ok". */
function first(schema: z.ZodType, value: unknown): string {
  const r = schema.safeParse(value);
  if (r.success) return 'ok';
  const issue = r.error.issues[0]!;
  return `${issue.path.join('.')}: ${issue.message}`;
}

const meta = { name: 'x', namespace: 'default' };
const command = { acquire: ['/bin/acquire', 'gpu_1x_h100'], release: ['/bin/release'], shape: { gpu: 'H100 80GB', cpus: 26 } };
const lambda = { apiKeySecretRef: { name: 'lambda', namespace: 'leasehold-system' } };
const peer = {
  origin: 'https://peer.example.com:6443',
  namespace: 'queue',
  credentialSecretRef: { name: 'peer' },
  lendableNodes: { matchLabels: { 'leasehold.dev/lend': 'true' } },
  pricePerGPUHour: 1.5,
};
const runners = {
  github: { org: 'swack-tools', repositories: ['swack-tools/oxidex'], tokenSecretRef: { name: 'gh' } },
  gce: {
    project: 'my-project',
    zones: ['us-central1-a'],
    machineTypeTiers: [{ machineType: 'n2d-standard-16', pricePerHour: 0.14, maxPricePerHour: 0.3 }],
    serviceAccount: 'spot-runner-host@my-project.iam.gserviceaccount.com',
  },
  maxHosts: 5,
  dailyBudgetUSD: 10,
};

describe('Lease', () => {
  it('parses a full object and fills defaults', () => {
    const lease = LeaseSchema.parse({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Lease',
      metadata: { ...meta, uid: 'abc', generation: 2, creationTimestamp: TS, managedFields: [] },
      spec: { where: 'gpu=h100,cpus>=16', sshKeys: [KEY, RSA] },
      status: {
        phase: 'Ready',
        conditions: [{ type: 'Ready', status: 'True', reason: 'MachineReady', message: '', lastTransitionTime: TS }],
        machine: { ssh: { host: '192.0.2.1', user: 'ubuntu', hostKey: KEY } },
        release: { provider: 'lambda', lambda: { apiKeySecretRef: lambda.apiKeySecretRef, endpoint: 'https://x' } },
        parsedWhere: { gpuModel: 'h100', gpus: 1, cpus: 16 },
        expiresAt: '2026-01-02T15:04:05.123+00:00',
      },
    });
    expect(lease.spec.sshKeys).toHaveLength(2);
    expect(lease.status?.machine?.ssh?.port).toBe(22);
    expect(lease.status?.release?.lambda?.apiKeySecretRef.key).toBe('apiKey');
    // Metadata the schema does not name passes through.
    expect((lease.metadata as Record<string, unknown>).creationTimestamp).toBe(TS);
    expect(LeaseSpecSchema.parse({ where: 'gpu' }).sshKeys).toEqual([]);
  });

  it('stores a parsed where in status', () => {
    const parsed = parseWhere('gpu=a100,gpus>=8,tool=docker');
    expect(parsed.ok).toBe(true);
    if (parsed.ok) {
      const status: LeaseStatus = { parsedWhere: parsed.value };
      expect(LeaseStatusSchema.parse(status).parsedWhere).toEqual(parsed.value);
    }
  });

  const bad: Array<[string, unknown, RegExp]> = [
    ['where "*"', { where: '*' }, /^where: .*a Lease must name what it needs/],
    ['where garbage', { where: 'gpu = h100' }, /^where: not a where requirement/],
    ['where repeated', { where: 'gpus>=2,gpus>=4' }, /^where: term "gpus>=4" repeats/],
    ['where missing', {}, /^where: /],
    ['bad key', { where: 'gpu', sshKeys: [KEY, 'ssh-dss AAAA'] }, /^sshKeys\.1: not an OpenSSH public key/],
    ['key with newline', { where: 'gpu', sshKeys: [`${KEY}\nssh-rsa AAAA`] }, /^sshKeys\.0: /],
    ['too many keys', { where: 'gpu', sshKeys: Array(17).fill(KEY) }, /^sshKeys: /],
    ['bad offer name', { where: 'gpu', offer: 'Not_A_Name' }, /^offer: /],
    ['unknown field', { where: 'gpu', wher: 'x' }, /Unrecognized key.*wher/],
  ];
  it.each(bad)('refuses %s', (_name, spec, message) => {
    expect(first(LeaseSpecSchema, spec)).toMatch(message);
  });

  it('refuses a bad phase and a bad condition in status', () => {
    expect(first(LeaseStatusSchema, { phase: 'Running' })).toMatch(/^phase: /);
    expect(
      first(LeaseStatusSchema, {
        conditions: [{ type: 'Ready', status: 'Yes', reason: 'X', message: '', lastTransitionTime: TS }],
      }),
    ).toMatch(/^conditions\.0\.status: /);
  });

  it('types objects as KubernetesObjects', () => {
    const l: Lease = {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Lease',
      metadata: meta,
      spec: { where: 'gpu', sshKeys: [] },
    };
    expect(l.metadata.name).toBe('x');
  });
});

describe('Condition', () => {
  it('follows the API conventions', () => {
    const c = { type: 'Ready', status: 'True', reason: 'MachineReady', message: 'up', lastTransitionTime: TS };
    expect(first(ConditionSchema, c)).toBe('ok');
    expect(first(ConditionSchema, { ...c, observedGeneration: 3 })).toBe('ok');
    expect(first(ConditionSchema, { ...c, reason: 'has spaces' })).toMatch(/^reason: /);
    expect(first(ConditionSchema, { ...c, reason: '' })).toMatch(/^reason: /);
    expect(first(ConditionSchema, { ...c, lastTransitionTime: 'yesterday' })).toMatch(/^lastTransitionTime: /);
    expect(first(ConditionSchema, { ...c, observedGeneration: -1 })).toMatch(/^observedGeneration: /);
  });
});

describe('Offer', () => {
  it('parses a command Offer with defaults', () => {
    const spec = OfferSpecSchema.parse({ command, pricePerHour: 2.49 });
    expect(spec.idleTimeout).toBe('20m');
    expect(spec.maxLifetime).toBe('12h');
    expect(spec.command?.shape.os).toBe('linux');
    expect(spec.command?.shape.arch).toBe('amd64');
  });

  it('parses a Lambda Offer with defaults', () => {
    const offer = OfferSchema.parse({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Offer', metadata: { name: 'lambda' }, spec: { lambda } });
    expect(offer.spec.lambda).toMatchObject({
      maxPricePerHour: 10,
      login: 'ubuntu',
      endpoint: 'https://cloud.lambda.ai/api/v1',
      apiKeySecretRef: { key: 'apiKey' },
    });
  });

  const bad: Array<[string, unknown, RegExp]> = [
    ['both providers', { command, lambda }, /exactly one of command or lambda/],
    ['no provider', {}, /exactly one of command or lambda/],
    ['empty acquire', { command: { ...command, acquire: [] } }, /^command\.acquire: /],
    ['gpus 0 with a model', { command: { ...command, shape: { gpu: 'A10', gpus: 0 } } }, /^command\.shape\.gpus: gpus must be at least 1/],
    ['bad arch', { command: { ...command, shape: { arch: 'x86' } } }, /^command\.shape\.arch: /],
    ['bad duration', { lambda, idleTimeout: '20 minutes' }, /^idleTimeout: /],
    ['negative duration', { lambda, maxLifetime: '-1h' }, /^maxLifetime: /],
    ['negative price', { command, pricePerHour: -1 }, /^pricePerHour: /],
    ['a price on a Lambda Offer', { lambda, pricePerHour: 1 }, /^pricePerHour: a Lambda Offer takes each instance type's price from the listing; remove spec\.pricePerHour/],
    ['negative cap', { lambda: { ...lambda, maxPricePerHour: -1 } }, /^lambda\.maxPricePerHour: /],
    ['secret without namespace', { lambda: { apiKeySecretRef: { name: 'x' } } }, /^lambda\.apiKeySecretRef\.namespace: /],
    ['bad endpoint', { lambda: { ...lambda, endpoint: 'ftp://x' } }, /^lambda\.endpoint: /],
    ['unknown shape field', { command: { ...command, shape: { gpu: 'A10', vram: 24 } } }, /Unrecognized key.*vram/],
  ];
  it.each(bad)('refuses %s', (_name, spec, message) => {
    expect(first(OfferSpecSchema, spec)).toMatch(message);
  });
});

describe('PeerFleet', () => {
  it('parses with defaults', () => {
    const pf = PeerFleetSchema.parse({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'PeerFleet', metadata: meta, spec: peer });
    expect(pf.spec).toMatchObject({
      idleWindow: '10m',
      pollInterval: '30s',
      maxSessionDuration: '0s',
      listed: true,
      credentialSecretRef: { name: 'peer', key: 'token' },
    });
  });

  it.each(['http://127.0.0.1:8080', 'http://localhost/x', 'http://[::1]:6443', 'http://100.64.1.2', 'https://10.0.0.1'])(
    'accepts origin %s',
    (origin) => {
      expect(first(PeerFleetSpecSchema, { ...peer, origin })).toBe('ok');
    },
  );

  const bad: Array<[string, unknown, RegExp]> = [
    ['plain http', { ...peer, origin: 'http://peer.example.com' }, /^origin: origin must be an https/],
    ['http outside the tailnet', { ...peer, origin: 'http://100.128.0.1' }, /^origin: /],
    ['empty selector', { ...peer, lendableNodes: {} }, /^lendableNodes: lendableNodes must select/],
    ['bad operator', { ...peer, lendableNodes: { matchExpressions: [{ key: 'a', operator: 'Is' }] } }, /^lendableNodes\.matchExpressions\.0\.operator: /],
    ['negative price', { ...peer, pricePerGPUHour: -1 }, /^pricePerGPUHour: /],
    ['bad namespace', { ...peer, namespace: 'Queue' }, /^namespace: /],
    ['bad window', { ...peer, idleWindow: '10' }, /^idleWindow: /],
    ['a 0s poll', { ...peer, pollInterval: '0s' }, /^pollInterval: pollInterval must be a duration of at least 5s/],
    ['a poll under 5s', { ...peer, pollInterval: '4999ms' }, /^pollInterval: pollInterval must be a duration of at least 5s/],
    ['a poll that is no duration', { ...peer, pollInterval: '5' }, /^pollInterval: /],
  ];
  it.each(['5s', '30s', '1h'])('accepts pollInterval %s', (pollInterval) => {
    expect(first(PeerFleetSpecSchema, { ...peer, pollInterval })).toBe('ok');
  });
  it.each(bad)('refuses %s', (_name, spec, message) => {
    expect(first(PeerFleetSpecSchema, spec)).toMatch(message);
  });
});

describe('RunnerTarget', () => {
  it('parses with defaults', () => {
    const rt = RunnerTargetSchema.parse({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'RunnerTarget', metadata: meta, spec: runners });
    expect(rt.spec.floor).toBe(0);
    expect(rt.spec.checkInterval).toBe('5m');
    expect(rt.spec.github.apiURL).toBe('https://api.github.com');
    expect(rt.spec.dryRun).toBe(false);
    expect(rt.spec.gce.fallbackToStandard).toBe(false);
    expect(rt.spec.gce.maxRunDuration).toBe('24h');
  });

  it('parses a status with hosts, receipts, sample, tier, plan and spend', () => {
    const status = {
      conditions: [{ type: 'Durable', status: 'False', reason: 'StatusConflict', message: 'receipt write conflicted', lastTransitionTime: TS }],
      hosts: [{ name: 'pool-a1', zone: 'us-central1-a', machineType: 'n2d-standard-16', pricePerHour: 0.14, state: 'Idle', createdAt: TS, runnerID: 7, idleSince: TS }],
      counts: { hosts: 1, busy: 0, idle: 1, queued: 0 },
      receipts: [{ id: 'launch-1', action: 'Launch', phase: 'Intended', at: TS, hosts: ['pool-a1'], zone: 'us-central1-a', machineType: 'n2d-standard-16', provisioningModel: 'SPOT', requestId: '6f1c0f0e-3c1a-4d5e-9f00-0a1b2c3d4e5f' }],
      lastSample: { at: TS, queued: 3, running: 1, idleRunners: 1, busyRunners: 1, pressure: { cpu: 12.5, memory: 0, io: 1, hosts: 1 } },
      tier: { machineType: 'n2d-standard-16', high: 0, low: 2 },
      plan: { at: TS, dryRun: true, desired: 3, launch: 2, drain: [], delete: [], removeRunners: [], machineType: 'n2d-standard-16', reason: '3 queued jobs' },
      spendTodayUSD: 1.2,
      spendEndedUSD: 0.4,
      spendDay: '2026-01-02',
    };
    const rt = RunnerTargetSchema.parse({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'RunnerTarget', metadata: meta, spec: runners, status });
    expect(rt.status?.hosts?.[0]?.provisioningModel).toBe('SPOT');
    expect(rt.status?.receipts?.[0]?.phase).toBe('Intended');
  });

  const tiers = [{ machineType: 'n2d-standard-16', pricePerHour: 0.14, standardPricePerHour: 0.7 }];
  it('takes fallbackToStandard when every tier has a standard price', () => {
    expect(first(RunnerTargetSpecSchema, { ...runners, gce: { ...runners.gce, machineTypeTiers: tiers, fallbackToStandard: true } })).toBe('ok');
  });

  const bad: Array<[string, unknown, RegExp]> = [
    ['floor above max', { ...runners, floor: 6 }, /^floor: floor must not exceed maxHosts/],
    ['no GitHub credential', { ...runners, github: { ...runners.github, tokenSecretRef: undefined } }, /^github: .*exactly one/],
    [
      'default compute account',
      { ...runners, gce: { ...runners.gce, serviceAccount: '123-compute@developer.gserviceaccount.com' } },
      /^gce\.serviceAccount: .*default Compute Engine account/,
    ],
    ['no zones', { ...runners, gce: { ...runners.gce, zones: [] } }, /^gce\.zones: /],
    ['bad repository', { ...runners, github: { ...runners.github, repositories: ['oxidex'] } }, /^github\.repositories\.0: /],
    ['zero max', { ...runners, maxHosts: 0 }, /^maxHosts: /],
    ['fractional floor', { ...runners, floor: 1.5 }, /^floor: /],
    ['a tier without its price', { ...runners, gce: { ...runners.gce, machineTypeTiers: [{ machineType: 'n2d-standard-16' }] } }, /^gce\.machineTypeTiers\.0\.pricePerHour: /],
    ['a negative price', { ...runners, gce: { ...runners.gce, machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: -1 }] } }, /^gce\.machineTypeTiers\.0\.pricePerHour: /],
    ['fallbackToStandard without standard prices', { ...runners, gce: { ...runners.gce, fallbackToStandard: true } }, /^gce\.fallbackToStandard: fallbackToStandard needs standardPricePerHour/],
    ['dryRun not a boolean', { ...runners, dryRun: 'yes' }, /^dryRun: /],
    ['a label the controller sets itself', { ...runners, github: { ...runners.github, labels: ['Leasehold-target-x'] } }, /^github\.labels\.0: labels must not start with leasehold-/],
    ['a checkInterval of 0s', { ...runners, checkInterval: '0s' }, /^checkInterval: checkInterval must be at least 30s: .*set spec\.checkInterval to 30s or more/],
    ['a checkInterval under 30s', { ...runners, checkInterval: '29s' }, /^checkInterval: checkInterval must be at least 30s/],
    ['a maxRunDuration under 1h', { ...runners, gce: { ...runners.gce, maxRunDuration: '59m' } }, /^gce\.maxRunDuration: maxRunDuration must be between 1h and 2880h .*set spec\.gce\.maxRunDuration/],
    ['a maxRunDuration past 120 days', { ...runners, gce: { ...runners.gce, maxRunDuration: '2881h' } }, /^gce\.maxRunDuration: maxRunDuration must be between 1h and 2880h/],
    ['a maxRunDuration that is not a duration', { ...runners, gce: { ...runners.gce, maxRunDuration: 'a day' } }, /^gce\.maxRunDuration: /],
  ];
  it.each(['1h', '24h', '2880h'])('takes a maxRunDuration of %s', (maxRunDuration) => {
    expect(first(RunnerTargetSpecSchema, { ...runners, gce: { ...runners.gce, maxRunDuration } })).toBe('ok');
  });
  it('takes a checkInterval of 30s, the shortest', () => {
    expect(first(RunnerTargetSpecSchema, { ...runners, checkInterval: '30s' })).toBe('ok');
  });
  it.each(bad)('refuses %s', (_name, spec, message) => {
    expect(first(RunnerTargetSpecSchema, spec)).toMatch(message);
  });
});
