// A MachineProvider made of two commands an admin writes for any cloud.
// The contract, as the Offer documents it: both run as the controller's user
// with its environment plus the variables below; acquire exits 0 once the
// machine exists and prints its target as the last stdout line; release
// destroys the machine, succeeds when run twice, and copes with empty state.
import { formatDuration } from '../../api/duration.js';
import { ProviderError, type ProviderErrorKind } from '../errors.js';
import type { LaunchRequest, Launched, MachineProvider, ReleaseRequest } from '../types.js';
import { KILL_GRACE_MS, runProviderCommand, USER_LINE_PREFIX } from './run.js';
import type { RunOptions, RunResult } from './run.js';
import { parseTarget, salvageState } from './target.js';

/** The environment variables of the command contract. */
export const CONTRACT_ENV = {
  /** acquire and release: the lease's ID; name the machine after it. */
  leaseID: 'LEASEHOLD_LEASE_ID',
  /** acquire and release: the Offer's name. */
  offer: 'LEASEHOLD_OFFER',
  /** acquire only: the Lease's `where`, raw. */
  where: 'LEASEHOLD_LEASE_WHERE',
  /** acquire only: the controller's SSH public key, which the machine must admit. */
  sshKey: 'LEASEHOLD_LEASE_SSH_KEY',
  /** release only: the JSON line acquire printed, or empty. */
  state: 'LEASEHOLD_LEASE_STATE',
} as const;

export interface CommandProviderConfig {
  acquire: readonly string[];
  release: readonly string[];
  acquireTimeoutMs: number;
  releaseTimeoutMs: number;
  /** Between SIGTERM and SIGKILL when a command has to be stopped. */
  killGraceMs?: number;
  /** Receives the stderr lines not marked for users, for the controller's log. */
  log?: (verb: 'acquire' | 'release', line: string) => void;
}

type Verb = 'acquire' | 'release';

/** How many of acquire's last stderr lines a failure message quotes. */
const ACQUIRE_STDERR_QUOTED = 3;

export class CommandProvider implements MachineProvider {
  private readonly config: CommandProviderConfig;

  constructor(config: CommandProviderConfig) {
    for (const verb of ['acquire', 'release'] as const) {
      if (config[verb].length === 0 || config[verb][0] === '') {
        throw new TypeError(`spec.command.${verb} must name a program to run as its first element`);
      }
    }
    this.config = config;
  }

  async launch(req: LaunchRequest): Promise<Launched> {
    const env = {
      [CONTRACT_ENV.leaseID]: req.leaseID,
      [CONTRACT_ENV.offer]: req.offer,
      [CONTRACT_ENV.where]: req.where,
      [CONTRACT_ENV.sshKey]: req.controllerPublicKey,
      // Outside acquire's contract, even when the controller's own environment has it.
      [CONTRACT_ENV.state]: undefined,
    };
    const result = await this.run('acquire', req.offer, env, {
      signal: req.signal,
      timeoutMs: this.config.acquireTimeoutMs,
      onUserLine: (line) => req.onProgress(line),
    });
    const what = `acquire for offer ${req.offer}`;

    // Every failure below may have left a machine behind; the error carries
    // the state the caller releases it with.
    if (result.stdoutTruncated) {
      throw new ProviderError(
        'InvalidTarget',
        `${what} printed more than 16 KiB on stdout and was stopped; print only the target JSON object on stdout and send logs to stderr`,
        { state: salvageState(result.stdout, true) },
      );
    }
    const stopped = this.stopped(what, result, this.config.acquireTimeoutMs);
    if (stopped !== undefined) {
      throw new ProviderError(stopped.kind, stopped.message, { state: salvageState(result.stdout, false) });
    }
    if (result.code !== 0) {
      throw new ProviderError('Unknown', `${what} ${exitOf(result)}; ${quoteStderr(result.userTail.slice(-ACQUIRE_STDERR_QUOTED))}`, {
        state: salvageState(result.stdout, false),
      });
    }
    const parsed = parseTarget(result.stdout);
    if (!parsed.ok) {
      throw new ProviderError('InvalidTarget', `offer ${req.offer}: ${parsed.reason}`, { state: salvageState(result.stdout, false) });
    }
    return { target: parsed.target, state: parsed.state };
  }

  async release(req: ReleaseRequest): Promise<void> {
    const env = {
      [CONTRACT_ENV.leaseID]: req.leaseID,
      [CONTRACT_ENV.offer]: req.offer,
      [CONTRACT_ENV.state]: req.state,
      [CONTRACT_ENV.where]: undefined,
      [CONTRACT_ENV.sshKey]: undefined,
    };
    // release's stdout means nothing: it goes to /dev/null rather than
    // failing a chatty release that did its job.
    const result = await this.run('release', req.offer, env, {
      signal: req.signal,
      timeoutMs: this.config.releaseTimeoutMs,
      collectStdout: false,
    });
    const what = `release for offer ${req.offer}`;
    const stopped = this.stopped(what, result, this.config.releaseTimeoutMs);
    if (stopped !== undefined) throw new ProviderError(stopped.kind, stopped.message);
    if (result.code !== 0) {
      throw new ProviderError(
        'Unknown',
        `${what} ${exitOf(result)}; ${quoteStderr(result.userTail.slice(-1))}; the machine may still exist, so release runs again later`,
      );
    }
  }

  private async run(
    verb: Verb,
    offer: string,
    env: Record<string, string | undefined>,
    opts: RunOptions,
  ): Promise<RunResult> {
    const argv = this.config[verb];
    try {
      const log = this.config.log;
      return await runProviderCommand(argv, env, {
        ...opts,
        killGraceMs: this.config.killGraceMs ?? KILL_GRACE_MS,
        ...(log ? { onStderrLine: (line: string) => log(verb, line) } : {}),
      });
    } catch (err) {
      throw new ProviderError(
        'Unknown',
        `${verb} for offer ${offer} could not be started (${(err as Error).message}); spec.command.${verb}[0] must be a program the controller can execute, such as ${JSON.stringify(argv[0])} with its execute bit set`,
        { cause: err, state: verb === 'acquire' ? '' : undefined },
      );
    }
  }

  /** A failure because the controller stopped the command: cancelled or out of time. */
  private stopped(what: string, result: RunResult, timeoutMs: number): { kind: ProviderErrorKind; message: string } | undefined {
    const grace = formatDuration(this.config.killGraceMs ?? KILL_GRACE_MS);
    if (result.aborted) return { kind: 'Unknown', message: `${what} was cancelled and has been stopped` };
    if (result.timedOut) {
      return {
        kind: 'Timeout',
        message: `${what} did not exit within ${formatDuration(timeoutMs)}; its process group was stopped (SIGTERM, then SIGKILL after ${grace})`,
      };
    }
    return undefined;
  }
}

function exitOf(result: RunResult): string {
  return result.code !== null ? `exited with code ${result.code}` : `was killed by ${result.signal ?? 'a signal'}`;
}

function quoteStderr(lines: readonly string[]): string {
  if (lines.length === 0) return `it printed no stderr line for users (lines starting "${USER_LINE_PREFIX}"; the others are in the controller's log)`;
  return `${lines.length === 1 ? 'its last stderr line' : 'its last stderr lines'}: ${lines.join(' | ')}`;
}
