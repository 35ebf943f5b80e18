// The LeaseDriver for real machines: a provider rents and releases them, the
// SSH agent makes them ready and checks them.
import type { Logger } from 'pino';
import { sshKeysHash, type Lease, type Offer } from '../../src/api/index.js';
import { CommandProvider } from '../../src/providers/command/provider.js';
import { isProviderError, ProviderError } from '../../src/providers/errors.js';
import type { MachineProvider } from '../../src/providers/types.js';
import { CredentialError, type LambdaAccounts } from '../../src/providers/lambda/accounts.js';
import { LambdaProvider } from '../../src/providers/lambda/provider.js';
import type { AcquireResult, Endpoint, LeaseDriver, MachineCheck } from './driver.js';
import type { ControllerKey } from '../../src/machine/controller-key.js';
import { ACQUIRE_CUTOFF_GRACE_MS } from './phases/launching.js';
import type { ObjectCache } from '../../src/kube/cache.js';

/** What the driver needs from the SSH agent (src/machine). */
export interface MachineAgent {
  /**
   * Connects with the pinned host key, installs the agent, writes authorized_keys
   * (its own key plus deviceKeys; left alone when deviceKeys is undefined),
   * returns measured facts and busy count.
   */
  probe(endpoint: Endpoint, key: ControllerKey, deviceKeys: string[] | undefined, signal?: AbortSignal): Promise<ProbeResult>;
}

export type ProbeResult =
  | {
      kind: 'ok';
      facts: NonNullable<Lease['status']>['facts'] & object;
      /** leasehold-run jobs running. */
      busy: number;
      sessions?: number;
      gpuProcesses?: number;
      /** nvidia-smi is there but failed or hung: the check cannot answer. */
      gpuError?: string;
    }
  | { kind: 'unreachable'; message: string }
  | { kind: 'hostKeyMismatch'; message: string };

export type ClaimCheck = (offer: Lease, facts: ProbeResult & { kind: 'ok' }) => string[];

export interface MachineDriverOptions {
  offers: ObjectCache<Offer>;
  key: () => Promise<ControllerKey>;
  agent: MachineAgent;
  /** Differences between an offer's claim and measured facts; empty when they match. */
  compare: (lease: Lease, measured: NonNullable<Lease['status']>['facts'] & object) => string[];
  acquireTimeoutMs: number;
  releaseTimeoutMs: number;
  /** Lambda accounts; without them a Lambda lease fails with a clear reason. */
  lambda?: LambdaAccounts;
  /** How often a booting or terminating Lambda instance is looked at. */
  lambdaPollMs?: number;
  /** How long a release watches the name after a launch request whose answer never came. */
  lambdaLaunchSettleMs?: number | undefined;
  metrics?: DriverMetrics;
  log: Logger;
  /** Makes the provider for a Lease in place of the one its Offer and status name (tests give a fake). */
  providerFor?: (lease: Lease, verb: 'acquire' | 'release') => Promise<MachineProvider>;
}

/** Provider-level metrics: bounded labels only (provider kind, operation, result). */
export interface DriverMetrics {
  launched(provider: string, result: 'launched' | 'failed', seconds: number): void;
  /** Command providers; Lambda's HTTP calls are counted by its client. */
  commandCall(operation: 'acquire' | 'release', code: 'ok' | 'error' | 'timeout'): void;
}

export const MISSING_RELEASE_RECIPE =
  'the Lease records no release command, so the controller cannot tell how its machine was made and runs nothing; the release is retried. Release the machine by hand, then remove the leasehold.dev/release finalizer';


export class MachineDriver implements LeaseDriver {
  constructor(private readonly opts: MachineDriverOptions) {}

  /** Releases use what the Lease recorded at launch, never the Offer as it is now. */
  private async providerFor(lease: Lease, verb: 'acquire' | 'release'): Promise<MachineProvider> {
    if (this.opts.providerFor) return this.opts.providerFor(lease, verb);
    const st = lease.status ?? {};
    const offer = this.opts.offers.get(undefined, st.offer ?? '');
    if (st.release?.provider === 'lambda') {
      const rec = st.release.lambda;
      if (!rec) throw new ProviderError('InvalidRequest', 'status.release.lambda is missing: the Lease does not record which Lambda account made its machine');
      if (!this.opts.lambda) throw new ProviderError('InvalidRequest', 'this controller was started without Lambda support');
      const account = await this.opts.lambda.account(rec.apiKeySecretRef, rec.endpoint);
      const spec = offer?.spec.lambda;
      return LambdaProvider.forAccount(account, {
        ...(this.opts.lambdaPollMs ? { pollMs: this.opts.lambdaPollMs } : {}),
        ...(this.opts.lambdaLaunchSettleMs !== undefined ? { launchSettleMs: this.opts.lambdaLaunchSettleMs } : {}),
        ...(verb === 'acquire' && spec
          ? {
              launch: {
                instanceType: st.instanceType ?? '',
                instanceTypes: spec.instanceTypes,
                regions: st.region ? [st.region, ...(spec.regions ?? []).filter((r) => r !== st.region)] : spec.regions,
                fileSystems: spec.fileSystems,
                maxPricePerHour: spec.maxPricePerHour ?? 10,
                login: spec.login ?? 'ubuntu',
                sshPort: spec.sshPort ?? 22,
              },
            }
          : {}),
      });
    }
    const release = st.release?.command ?? [];
    // Fails closed: without the recorded recipe nothing is run (a stand-in
    // would report a machine gone that may still bill); the release fails and is retried.
    if (verb === 'release' && !release.length) throw new ProviderError('InvalidRequest', MISSING_RELEASE_RECIPE);
    const acquire = verb === 'acquire' ? offer?.spec.command?.acquire ?? [] : ['/bin/false'];
    return new CommandProvider({
      acquire,
      release: release.length ? release : ['/bin/false'],
      // Lines not marked for users may hold anything (set -x, a CLI's debug output): the controller's log only.
      log: (command, line) => this.opts.log.info({ lease: lease.metadata?.name, namespace: lease.metadata?.namespace, command, line }, 'provider stderr'),
      acquireTimeoutMs: this.opts.acquireTimeoutMs,
      releaseTimeoutMs: this.opts.releaseTimeoutMs,
    });
  }

  async acquire(lease: Lease, onProgress: (line: string) => void, signal: AbortSignal): Promise<AcquireResult> {
    const st = lease.status!;
    const offer = this.opts.offers.get(undefined, st.offer ?? '');
    if (!offer?.spec.command && !offer?.spec.lambda) {
      return { kind: 'failed', reason: 'OfferGone', message: `Offer ${st.offer} disappeared before the machine was acquired` };
    }
    // The provider enforces acquireTimeoutMs itself (command) or is cut off here (Lambda).
    const timeout = AbortSignal.timeout(Math.max(1000, this.opts.acquireTimeoutMs - (Date.now() - (Date.parse(st.launch?.startedAt ?? '') || Date.now()))));
    const kind = st.release?.provider ?? 'command';
    const t0 = Date.now();
    const done = (result: AcquireResult): AcquireResult => {
      this.opts.metrics?.launched(kind, result.kind, (Date.now() - t0) / 1000);
      if (kind === 'command') this.opts.metrics?.commandCall('acquire', result.kind === 'launched' ? 'ok' : result.reason === 'AcquireTimeout' ? 'timeout' : 'error');
      return result;
    };
    return done(await this.launchWith(lease, AbortSignal.any([timeout, signal]), onProgress, () => timeout.aborted));
  }

  private async launchWith(lease: Lease, deadline: AbortSignal, onProgress: (line: string) => void, timedOut: () => boolean): Promise<AcquireResult> {
    const st = lease.status!;
    try {
      const key = await this.opts.key();
      const provider = await this.providerFor(lease, 'acquire');
      const launched = await provider.launch({
        leaseID: st.leaseID!,
        machineName: st.machineName!,
        offer: st.offer!,
        where: lease.spec.where,
        controllerPublicKey: key.publicKey,
        signal: deadline,
        onProgress,
      });
      const ssh = launched.target.ssh;
      if (!ssh) {
        return { kind: 'failed', reason: 'UnsupportedTarget', message: 'acquire returned a url target; this controller installs its agent over SSH, so print an ssh target', state: launched.state };
      }
      if (!ssh.hostKey) {
        return { kind: 'failed', reason: 'InvalidTarget', message: 'acquire printed an ssh target without host_key; the controller never trusts a host key on first use, so print the machine\'s host key', state: launched.state };
      }
      return { kind: 'launched', state: launched.state, machine: { ssh: { host: ssh.host, port: ssh.port, user: ssh.user ?? 'root', hostKey: ssh.hostKey } } };
    } catch (err) {
      // The provider stops an acquire that outlives acquireTimeout and says Timeout:
      // the same AcquireTimeout the reconciler reports for an agent that is not ready in time.
      const reason = timedOut() ? 'AcquireTimeout' : deadline.aborted ? 'AcquireWithdrawn' : failureReason(err);
      const state = isProviderError(err) ? err.state : undefined;
      const nothingRented = isProviderError(err) && err.nothingMade && !deadline.aborted;
      return { kind: 'failed', reason, message: err instanceof Error ? err.message : String(err), ...(state ? { state } : {}), ...(nothingRented ? { nothingRented } : {}) };
    }
  }

  prepare(lease: Lease, signal: AbortSignal): Promise<MachineCheck> {
    // A machine being made ready always gets its keys written.
    return this.inspect(lease, true, signal);
  }

  check(lease: Lease, signal: AbortSignal): Promise<MachineCheck> {
    // A ready machine gets its keys rewritten only when spec.sshKeys no longer
    // matches what was installed (status.installedKeysHash).
    return this.inspect(lease, false, signal);
  }

  private async inspect(lease: Lease, writeKeys: boolean, signal: AbortSignal): Promise<MachineCheck> {
    const machine = lease.status?.machine;
    if (!machine?.ssh) return { kind: 'mismatch', reason: 'UnsupportedTarget', message: 'the machine has no SSH endpoint to check' };
    const devices = lease.spec.sshKeys ?? [];
    const hash = sshKeysHash(devices);
    const write = writeKeys || lease.status?.installedKeysHash !== hash;
    const result = await this.opts.agent.probe(machine, await this.opts.key(), write ? devices : undefined, signal);
    if (result.kind === 'unreachable') return { kind: 'unreachable', message: result.message };
    if (result.kind === 'hostKeyMismatch') return { kind: 'mismatch', reason: 'HostKeyMismatch', message: result.message };
    // A GPU check that cannot answer cannot say the machine is idle, nor that it still has its GPUs.
    if (result.gpuError) return { kind: 'mismatch', reason: 'FactsMismatch', message: `the GPU check failed: ${result.gpuError}` };
    const differences = this.opts.compare(lease, result.facts);
    const had = lease.status?.facts?.gpus;
    if (had !== undefined && (result.facts.gpus ?? 0) < had) differences.push(`gpus: nvidia-smi reports ${result.facts.gpus ?? 0}, the machine had ${had} when it became ready`);
    if (differences.length) {
      return { kind: 'mismatch', reason: 'FactsMismatch', message: `the machine does not match Offer ${lease.status?.offer}: ${differences.join('; ')}` };
    }
    const offer = this.opts.offers.get(undefined, lease.status?.offer ?? '');
    return {
      kind: 'ok',
      facts: result.facts,
      busy: result.busy,
      keysHash: hash,
      machine,
      usage: { jobs: result.busy, sessions: result.sessions ?? 0, gpuProcesses: result.gpuProcesses ?? 0 },
      ...(offer?.spec.busyWhen ? { busyWhen: offer.spec.busyWhen } : {}),
    };
  }

  async release(lease: Lease, signal: AbortSignal): Promise<void> {
    const st = lease.status ?? {};
    const provider = await this.providerFor(lease, 'release');
    const command = (st.release?.provider ?? 'command') === 'command';
    try {
      await provider.release({
        leaseID: st.leaseID ?? '',
        machineName: st.machineName ?? '',
        offer: st.offer ?? '',
        state: st.providerState ?? '',
        acquireStarted: Boolean(st.launch?.startedAt),
        ...(st.launch?.startedAt ? { lastLaunchBy: Date.parse(st.launch.startedAt) + this.opts.acquireTimeoutMs + ACQUIRE_CUTOFF_GRACE_MS } : {}),
        signal,
      });
      if (command) this.opts.metrics?.commandCall('release', 'ok');
    } catch (err) {
      if (command) this.opts.metrics?.commandCall('release', isProviderError(err, 'Timeout') ? 'timeout' : 'error');
      throw err;
    }
  }
}

/** The Lease reason for a failed acquire, from the provider's error kind. */
export function failureReason(err: unknown): string {
  if (err instanceof CredentialError) return err.reason;
  if (!isProviderError(err)) return 'AcquireFailed';
  switch (err.kind) {
    case 'InvalidTarget':
      return 'InvalidTarget';
    // The provider stops an acquire that outlives acquireTimeout and says Timeout:
    // the same AcquireTimeout the reconciler reports for an agent that is not ready in time.
    case 'Timeout':
      return 'AcquireTimeout';
    case 'InsufficientCapacity':
      return 'NoCapacity';
    case 'OverPriceCap':
      return 'OverPriceCap';
    case 'Unauthorized':
      return 'Unauthorized';
    default:
      return 'AcquireFailed';
  }
}
