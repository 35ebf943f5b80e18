import { describe, it, expect, beforeEach } from '@jest/globals';
import pino from 'pino';
import type { Lease, Offer } from '../../src/api/index.js';
import { ProviderError, type ProviderErrorKind } from '../../src/providers/errors.js';
import { FakeProvider, FAKE_HOST_KEY } from '../../src/providers/fake/provider.js';
import { CredentialError } from '../../src/providers/lambda/accounts.js';
import { failureReason, MachineDriver, MISSING_RELEASE_RECIPE, type MachineDriverOptions } from './machine-driver.js';

const CONTROLLER_KEY = { privateKey: 'private', publicKey: 'ssh-ed25519 AAAA controller' };
const commandOffer = { metadata: { name: 'box' }, spec: { command: { acquire: ['/acquire'], release: ['/release'], shape: {} } } } as unknown as Offer;
const lambdaOffer = { metadata: { name: 'cloud' }, spec: { lambda: { instanceTypes: ['gpu_1x_a10'] } } } as unknown as Offer;

// A signal nobody aborts: the acquire or release runs to its end.
const live = new AbortController().signal;

function lease(offer = 'box', extra: Partial<NonNullable<Lease['status']>> = {}): Lease {
  return {
    metadata: { name: 'l1', namespace: 'team' },
    spec: { where: 'gpu' },
    status: {
      phase: 'Launching',
      offer,
      leaseID: 'a1b2c3d4',
      machineName: 'leasehold-a1b2c3d4',
      launch: { attempt: 1, startedAt: new Date().toISOString() },
      release: { provider: 'command', command: ['/release'] },
      ...extra,
    },
  } as unknown as Lease;
}

let provider: FakeProvider;
let made: { lease: string; verb: string }[];
let launches: [string, string][];
let commandCalls: [string, string][];

function options(): MachineDriverOptions {
  return {
    offers: { get: (_ns, name) => [commandOffer, lambdaOffer].find((o) => o.metadata!.name === name), list: () => [commandOffer, lambdaOffer] },
    key: async () => CONTROLLER_KEY,
    agent: { probe: async () => ({ kind: 'unreachable', message: 'not used here' }) },
    compare: () => [],
    acquireTimeoutMs: 60_000,
    releaseTimeoutMs: 60_000,
    metrics: {
      launched: (kind, result) => void launches.push([kind, result]),
      commandCall: (operation, code) => void commandCalls.push([operation, code]),
    },
    log: pino({ level: 'silent' }),
    providerFor: async (l, verb) => {
      made.push({ lease: l.metadata!.name!, verb });
      return provider;
    },
  };
}

function driver(opts: Partial<MachineDriverOptions> = {}): MachineDriver {
  return new MachineDriver({ ...options(), ...opts });
}

beforeEach(() => {
  provider = new FakeProvider();
  made = [];
  launches = [];
  commandCalls = [];
});

describe('MachineDriver.acquire', () => {
  it('launches the machine the Lease names, with the controller key, and returns its pinned SSH endpoint', async () => {
    const progress: string[] = [];
    const result = await driver().acquire(lease(), (line) => progress.push(line), live);
    expect(result).toEqual({
      kind: 'launched',
      state: expect.stringContaining('leasehold-a1b2c3d4'),
      machine: { ssh: { host: 'leasehold-a1b2c3d4.fake', port: 22, user: 'root', hostKey: FAKE_HOST_KEY } },
    });
    expect(provider.launchCalls).toEqual([
      expect.objectContaining({ leaseID: 'a1b2c3d4', machineName: 'leasehold-a1b2c3d4', offer: 'box', where: 'gpu', controllerPublicKey: CONTROLLER_KEY.publicKey }),
    ]);
    expect(progress).toEqual(['fake machine fake-1 is running']);
    expect(made).toEqual([{ lease: 'l1', verb: 'acquire' }]);
    expect(launches).toEqual([['command', 'launched']]);
    expect(commandCalls).toEqual([['acquire', 'ok']]);
  });

  it.each<[ProviderErrorKind, string]>([
    ['InsufficientCapacity', 'NoCapacity'],
    ['Timeout', 'AcquireTimeout'],
    ['OverPriceCap', 'OverPriceCap'],
    ['Unauthorized', 'Unauthorized'],
    ['InvalidTarget', 'InvalidTarget'],
    ['InvalidRequest', 'AcquireFailed'],
    ['RateLimited', 'AcquireFailed'],
    ['NotFound', 'AcquireFailed'],
    ['Unknown', 'AcquireFailed'],
  ])('fails a launch that ends in %s with reason %s, keeping the state release needs', async (kind, reason) => {
    provider.failNext('launch', new ProviderError(kind, `the provider said ${kind}`, { state: '{"id":"half-made"}' }));
    const result = await driver().acquire(lease(), () => undefined, live);
    expect(result).toEqual({ kind: 'failed', reason, message: `the provider said ${kind}`, state: '{"id":"half-made"}' });
    expect(launches).toEqual([['command', 'failed']]);
    expect(commandCalls).toEqual([['acquire', reason === 'AcquireTimeout' ? 'timeout' : 'error']]);
  });

  it('names the Secret problem as the reason when the account cannot be had, and counts no command call for Lambda', async () => {
    const d = driver({
      providerFor: async () => {
        throw new CredentialError('APIKeySecretNotFound', 'Secret ops/lambda does not exist');
      },
    });
    const result = await d.acquire(lease('cloud', { release: { provider: 'lambda' } }), () => undefined, live);
    expect(result).toEqual({ kind: 'failed', reason: 'APIKeySecretNotFound', message: 'Secret ops/lambda does not exist' });
    expect(launches).toEqual([['lambda', 'failed']]);
    expect(commandCalls).toEqual([]);
  });

  it('refuses a url target and an SSH target without a host key, handing back the state to release', async () => {
    const url = await driver({ providerFor: async () => new FakeProvider({ target: () => ({ url: 'https://box.example' }) }) }).acquire(lease(), () => undefined, live);
    expect(url).toMatchObject({ kind: 'failed', reason: 'UnsupportedTarget', state: expect.stringContaining('leasehold-a1b2c3d4') });
    const noKey = await driver({ providerFor: async () => new FakeProvider({ target: () => ({ ssh: { host: 'box', port: 22 } }) }) }).acquire(lease(), () => undefined, live);
    expect(noKey).toMatchObject({ kind: 'failed', reason: 'InvalidTarget', state: expect.stringContaining('leasehold-a1b2c3d4') });
    expect(noKey.kind === 'failed' && noKey.message).toContain('host_key');
  });

  it('fails with OfferGone, launching nothing, when the Offer is gone', async () => {
    const result = await driver().acquire(lease('deleted'), () => undefined, live);
    expect(result).toMatchObject({ kind: 'failed', reason: 'OfferGone' });
    expect(provider.launchCalls).toEqual([]);
  });

  it('cuts off a launch that outlives acquireTimeout and reports AcquireTimeout', async () => {
    const gate = provider.holdLaunches();
    const startedLongAgo = new Date(Date.now() - 120_000).toISOString();
    const result = driver({ acquireTimeoutMs: 60_000 }).acquire(lease('box', { launch: { attempt: 1, startedAt: startedLongAgo } }), () => undefined, live);
    await gate.whenWaiting(1);
    expect(await result).toMatchObject({ kind: 'failed', reason: 'AcquireTimeout' });
    expect(gate.waiting).toBe(0);
    expect(provider.machines.size).toBe(0);
  });

  it('stops a launch the Lease withdraws (deleted while launching) and says so', async () => {
    const gate = provider.holdLaunches();
    const withdraw = new AbortController();
    const result = driver().acquire(lease(), () => undefined, withdraw.signal);
    await gate.whenWaiting(1);
    withdraw.abort();
    expect(await result).toMatchObject({ kind: 'failed', reason: 'AcquireWithdrawn' });
    expect(gate.waiting).toBe(0);
  });

  it('without a provider seam, fails a Lambda Lease clearly when the controller has no Lambda support or the Lease no Lambda record', async () => {
    const real = options();
    delete real.providerFor;
    const d = new MachineDriver(real);
    const apiKeySecretRef = { name: 'lambda', namespace: 'ops', key: 'apiKey' };
    const noSupport = await d.acquire(lease('cloud', { release: { provider: 'lambda', lambda: { apiKeySecretRef, endpoint: 'https://cloud.example' } } }), () => undefined, live);
    expect(noSupport).toMatchObject({ kind: 'failed', reason: 'AcquireFailed', message: expect.stringContaining('without Lambda support') });
    const noRecord = await d.acquire(lease('cloud', { release: { provider: 'lambda' } }), () => undefined, live);
    expect(noRecord).toMatchObject({ kind: 'failed', reason: 'AcquireFailed', message: expect.stringContaining('status.release.lambda is missing') });
  });
});

describe('MachineDriver.release', () => {
  it('releases with what the Lease recorded at launch', async () => {
    const d = driver();
    const launched = await d.acquire(lease(), () => undefined, live);
    const state = launched.kind === 'launched' ? launched.state : '';
    await d.release(lease('box', { providerState: state }), live);
    expect(provider.releaseCalls).toEqual([expect.objectContaining({ leaseID: 'a1b2c3d4', machineName: 'leasehold-a1b2c3d4', offer: 'box', state })]);
    expect(provider.machines.size).toBe(0);
    expect(made.map((m) => m.verb)).toEqual(['acquire', 'release']);
    expect(commandCalls).toEqual([['acquire', 'ok'], ['release', 'ok']]);
  });

  it.each<[ProviderErrorKind, string]>([
    ['Timeout', 'timeout'],
    ['Unknown', 'error'],
  ])('passes a release failing with %s on, counted as %s', async (kind, code) => {
    provider.add('leasehold-a1b2c3d4');
    provider.failNext('release', new ProviderError(kind, 'release exited with code 1'));
    await expect(driver().release(lease(), live)).rejects.toThrow('release exited with code 1');
    expect(provider.machines.size).toBe(1);
    expect(commandCalls).toEqual([['release', code]]);
  });

  it('fails closed when a command Lease records no release command: nothing runs, the release fails', async () => {
    const { providerFor: _, ...real } = options();
    const d = new MachineDriver(real);
    await expect(d.release(lease('box', { release: { provider: 'command' } }), live)).rejects.toThrow(MISSING_RELEASE_RECIPE);
    await expect(d.release(lease('box', { release: { provider: 'command', command: [] } }), live)).rejects.toThrow(MISSING_RELEASE_RECIPE);
    expect(commandCalls).toEqual([]);
  });

  it('counts no command call when releasing a Lambda machine', async () => {
    provider.add('leasehold-a1b2c3d4');
    await driver().release(lease('cloud', { release: { provider: 'lambda' } }), live);
    expect(provider.machines.size).toBe(0);
    expect(commandCalls).toEqual([]);
  });
});

describe('failureReason', () => {
  it('calls an error from outside any provider AcquireFailed', () => {
    expect(failureReason(new Error('socket hang up'))).toBe('AcquireFailed');
  });
});


describe('MachineDriver.check', () => {
  const FACTS = { os: 'linux', arch: 'amd64', cpus: 2, memoryGiB: 4, gpus: 2, gpuModel: 'NVIDIA H100', vramGiB: 80 };
  const ready = (extra: Partial<NonNullable<Lease['status']>> = {}) =>
    lease('box', { phase: 'Ready', machine: { ssh: { host: '127.0.0.1', port: 22, user: 'u', hostKey: FAKE_HOST_KEY } }, facts: FACTS, ...extra });
  const probing = (result: Awaited<ReturnType<MachineDriverOptions['agent']['probe']>>) => driver({ agent: { probe: async () => result } });

  it('reports every kind of work the probe counted, and the busyWhen of the Offer as it is now', async () => {
    const withBusyWhen = { ...commandOffer, spec: { ...commandOffer.spec, busyWhen: ['sessions'] } } as unknown as Offer;
    const d = driver({
      offers: { get: () => withBusyWhen, list: () => [withBusyWhen] },
      agent: { probe: async () => ({ kind: 'ok', facts: FACTS, busy: 1, sessions: 2, gpuProcesses: 3 }) },
    });
    expect(await d.check(ready(), live)).toMatchObject({ kind: 'ok', busy: 1, usage: { jobs: 1, sessions: 2, gpuProcesses: 3 }, busyWhen: ['sessions'] });
  });

  it('fails the check, with the evidence, when nvidia-smi fails or hangs', async () => {
    const d = probing({ kind: 'ok', facts: { ...FACTS, gpus: 0 }, busy: 0, sessions: 0, gpuProcesses: 0, gpuError: 'nvidia-smi --query-gpu did not answer within 10s' });
    expect(await d.check(ready(), live)).toEqual({ kind: 'mismatch', reason: 'FactsMismatch', message: 'the GPU check failed: nvidia-smi --query-gpu did not answer within 10s' });
  });

  it('fails the check when nvidia-smi reports fewer GPUs than the machine had when it became ready', async () => {
    const d = probing({ kind: 'ok', facts: { ...FACTS, gpus: 1 }, busy: 0, sessions: 0, gpuProcesses: 0 });
    expect(await d.check(ready(), live)).toMatchObject({ kind: 'mismatch', reason: 'FactsMismatch', message: expect.stringContaining('gpus: nvidia-smi reports 1, the machine had 2 when it became ready') });
    expect(await probing({ kind: 'ok', facts: FACTS, busy: 0 }).check(ready(), live)).toMatchObject({ kind: 'ok' });
  });
});
