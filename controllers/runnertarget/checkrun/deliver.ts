// A launched host gets its runner: the controller reaches it over SSH with
// the host key pinned (hostssh.ts; never trusted on first use), asks GitHub
// for a just-in-time runner config, and writes it to the host over that
// connection. The config never goes into instance metadata, which anyone
// with compute read access in the project can read. The host's image runs
// the runner from the file (see docs/runnertarget.md).
import type { ChangeContext, ChangeOutcome } from './changecontext.js';
import { runnerLabels } from '../policy/demand.js';
import { ownerLabels } from '../policy/naming.js';
import { openHost, SSH_TIMEOUT_MS, type HostAccess } from './hostssh.js';
import type { SshSession } from '../../../src/machine/ssh.js';
import { isProviderError } from '../../../src/providers/errors.js';
import { RunnerBusyError } from '../../../src/providers/github/errors.js';

/** Where the host finds its runner config: written whole (a rename), readable by the login user only. */
export const JIT_CONFIG_PATH = '.leasehold/jitconfig';
const HAS_CONFIG = `test -s "$HOME/${JIT_CONFIG_PATH}"`;
const REMOVE_OLD = `rm -f "$HOME/${JIT_CONFIG_PATH}" "$HOME/${JIT_CONFIG_PATH}.tmp"`;
const DELIVER = `umask 077 && mkdir -p "$HOME/.leasehold" && cat > "$HOME/${JIT_CONFIG_PATH}.tmp" && mv "$HOME/${JIT_CONFIG_PATH}.tmp" "$HOME/${JIT_CONFIG_PATH}"`;
/** Beside a Register's config: the receipt it was written for. */
const CONFIG_RECEIPT_PATH = `${JIT_CONFIG_PATH}.receipt`;
const CONFIG_RECEIPT = `${HAS_CONFIG} && cat "$HOME/${CONFIG_RECEIPT_PATH}"`;
const quoted = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
/** A Register's delivery: the receipt is named before the config takes its place, so a config there always has its own receipt named beside it. */
const deliverFor = (receiptID: string) =>
  `umask 077 && mkdir -p "$HOME/.leasehold" && cat > "$HOME/${JIT_CONFIG_PATH}.tmp" && printf '%s\\n' ${quoted(receiptID)} > "$HOME/${CONFIG_RECEIPT_PATH}" && mv "$HOME/${JIT_CONFIG_PATH}.tmp" "$HOME/${JIT_CONFIG_PATH}"`;

const wait = (id: string, reason: string, message: string): ChangeOutcome => ({ ok: false, receiptID: id, message, event: { type: 'Warning', reason, message } });

/**
 * How a config is delivered. `stale`: a registration of this host that is
 * offline. `replace`: the host had a runner before (a Register), so its old
 * config is still there and is removed first. `finished`: the host's last
 * runner, listed offline after its job; its registration goes before the
 * new one, whose name it holds.
 */
export interface DeliveryHow {
  stale?: { id: number } | undefined;
  replace?: boolean;
  finished?: { id: number };
  /** A receipt a check left open is continued: the config may have been delivered, and its runner come and gone since. */
  resumed?: boolean;
  /**
   * Delivered between two checks (bootwatch.ts), without GitHub's runner
   * list: a config already on the host is left as it is, since only a
   * check that lists the runners can tell a runner starting from one that ran.
   */
  unlisted?: boolean;
}

/** Delivers a runner config to host `name`; its receipt stays Intended until the runner registers. */
export async function deliverRunnerConfig(name: string, zone: string, receiptID: string, ctx: ChangeContext, host: HostAccess, how: DeliveryHow = {}): Promise<ChangeOutcome> {
  const groupId = ctx.observation.runnerGroupId;
  if (groupId === undefined) return wait(receiptID, 'RunnerGroupUnknown', `no runner config for ${name}: spec.github.runnerGroup "${ctx.target.spec.github.runnerGroup}" was not found in the org this check`);
  const opened = await openHost(name, zone, ctx.clients, host, ctx.signal, { externalIP: ctx.target.spec.gce.externalIP });
  if (!('session' in opened)) return wait(receiptID, opened.reason, `${opened.message}; looked at again next check`);
  try {
    return await deliverOver(opened.session, name, receiptID, ctx, { groupId, ...how });
  } finally {
    opened.session.close();
  }
}

/** The delivery over an open, pinned session. */
export async function deliverOver(session: Pick<SshSession, 'exec'>, name: string, receiptID: string, ctx: ChangeContext, how: DeliveryHow & { groupId: number }): Promise<ChangeOutcome> {
  const { clients, signal } = ctx;
  const { groupId, stale, replace, finished, resumed, unlisted } = how;
  const opts = { timeoutMs: SSH_TIMEOUT_MS, ...(signal ? { signal } : {}) };
  // A Register's host keeps its last runner's config until the step that removes it, so a check that died before
  // that step finds a config there too: only one written for this receipt is the new runner's.
  const configThere = async () => {
    const found = await session.exec(replace ? CONFIG_RECEIPT : HAS_CONFIG, opts);
    return found.code === 0 && (!replace || found.stdout.trim() === receiptID);
  };
  if (unlisted && (await configThere())) {
    const message = `the runner config is on ${name} already; the next check settles its receipt once the runner is online`;
    return { ok: true, configOnHost: true, receiptID, message, event: { type: 'Normal', reason: 'RunnerStarting', message } };
  }
  if (stale) {
    // The file is written whole or not at all: there, its runner is starting and must not lose its registration.
    if (await configThere()) {
      const message = `the runner config is on ${name} and runner ${stale.id} is registered, still offline; the receipt settles once it is online`;
      return { ok: true, configOnHost: true, receiptID, message, event: { type: 'Normal', reason: 'RunnerStarting', message } };
    }
    // Not there: a check died between generate-jitconfig and the write. That registration can
    // never come online, and its name blocks a new one: it goes before the new config is made.
    ctx.guard.permit(`github.deleteRunner ${name}`);
    try {
      await clients.github.deleteRunner(stale.id, signal);
    } catch (err) {
      if (!isProviderError(err, 'NotFound')) throw err;
    }
  }
  if (resumed && !stale && (await configThere())) {
    // The config is there and GitHub lists no runner: a runner started from it, ran its one job and left
    // between two checks. Another config would give the host a second job, which an ephemeral pool never does.
    const message = `the runner config is on ${name} and GitHub lists no runner for it: its runner ran and left before a check saw it online; the host has finished`;
    return { ok: true, phase: 'Done', runnerLeft: true, receiptID, message, event: { type: 'Normal', reason: 'RunnerLeft', message } };
  }
  if (replace) {
    // The last runner's config goes before the new registration is made: a check that dies after generate-jitconfig
    // then finds no file, so a later check removes that registration (the stale branch) instead of taking it for a runner starting.
    const removed = await session.exec(REMOVE_OLD, opts);
    if (removed.code !== 0) return wait(receiptID, 'DeliveryFailed', `removing the last runner config on ${name} failed (exit ${removed.code}): ${removed.stderr.slice(0, 300)}; tried again next check`);
  }
  if (finished) {
    ctx.guard.permit(`github.deleteRunner ${name}`);
    try {
      await clients.github.deleteRunner(finished.id, signal);
    } catch (err) {
      // GitHub refuses (422) while that runner holds a job: it has not finished, and nothing new is registered.
      if (err instanceof RunnerBusyError) return wait(receiptID, 'RunnerBusy', `runner ${name} (${finished.id}) still holds a job; no new runner is made for ${name}, looked at again next check`);
      if (!isProviderError(err, 'NotFound')) throw err;
    }
  }
  ctx.guard.permit(`github.generateJitConfig ${name}`);
  const labels = [...runnerLabels(ctx.target.spec.github).filter((l) => l !== 'self-hosted'), ...ownerLabels(ctx.target.metadata!.uid!, ctx.installationID)];
  let jit;
  try {
    jit = await clients.github.generateJitConfig({ name, runnerGroupId: groupId, labels }, signal);
  } catch (err) {
    if (!isProviderError(err, 'NotFound')) throw err;
    // The group was removed (or renamed and removed) since its id was kept: the next check looks the name up again.
    ctx.runnerGroupGone?.(groupId);
    return wait(receiptID, 'RunnerGroupUnknown', `no runner config for ${name}: GitHub no longer knows runner group ${groupId} (spec.github.runnerGroup "${ctx.target.spec.github.runnerGroup}"); the group is looked up again next check`);
  }
  const result = await session.exec(replace ? deliverFor(receiptID) : DELIVER, { stdin: jit.encodedJitConfig, ...opts });
  if (result.code !== 0) {
    // A registration whose config never arrived would pass for a registered runner: it goes again.
    ctx.guard.permit(`github.deleteRunner ${name}`);
    await clients.github.deleteRunner(jit.runner.id, signal).catch(() => undefined);
    return wait(receiptID, 'DeliveryFailed', `writing the runner config on ${name} failed (exit ${result.code}): ${result.stderr.slice(0, 300)}; tried again next check`);
  }
  const message = `runner config delivered to ${name} over SSH (host key pinned); the receipt settles once its runner registers`;
  return { ok: true, configOnHost: true, receiptID, message, event: { type: 'Normal', reason: 'RunnerConfigDelivered', message } };
}
