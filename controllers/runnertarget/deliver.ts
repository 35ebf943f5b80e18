// A launched host gets its runner: the controller reaches it over SSH with
// the host key pinned from the instance's guest attributes (`hostkeys/`, as
// `gcloud compute ssh` reads them; never trusted on first use), asks GitHub
// for a just-in-time runner config, and writes it to the host over that
// connection. The config never goes into instance metadata, which anyone
// with compute read access in the project can read. The host's image runs
// the runner from the file (see README, RunnerTarget hosts).
import { errorText } from '../../src/kube/errors.js';
import { connectPinned } from '../../src/machine/ssh.js';
import { isProviderError } from '../../src/providers/errors.js';
import type { ChangeContext, ChangeOutcome } from './changes.js';
import { runnerLabels } from './demand.js';

/** Where the host finds its runner config: written whole (a rename), readable by the login user only. */
export const JIT_CONFIG_PATH = '.leasehold/jitconfig';
const DELIVER = `umask 077 && mkdir -p "$HOME/.leasehold" && cat > "$HOME/${JIT_CONFIG_PATH}.tmp" && mv "$HOME/${JIT_CONFIG_PATH}.tmp" "$HOME/${JIT_CONFIG_PATH}"`;
/** The runner group of the org every runner joins (GitHub's Default group). */
export const DEFAULT_RUNNER_GROUP = 1;
const SSH_TIMEOUT_MS = 30_000;
/** Host key types in the order they are pinned. */
const PREFERRED = ['ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521', 'ssh-rsa'];

export interface HostAccess {
  /** The controller's SSH key pair. */
  privateKey: string;
  publicKey: string;
  /** The login user and port on hosts (user `leasehold`, port 22 on Compute Engine). */
  user: string;
  port: number;
}

const wait = (id: string, reason: string, message: string): ChangeOutcome => ({ ok: false, receiptID: id, message, event: { type: 'Warning', reason, message } });

/** Delivers a runner config to host `name`; its receipt stays Intended until the runner registers. */
export async function deliverRunnerConfig(name: string, zone: string, receiptID: string, ctx: ChangeContext, host: HostAccess): Promise<ChangeOutcome> {
  const { clients, signal } = ctx;
  let keys: string[];
  try {
    keys = await clients.gce.hostKeys(zone, name, signal);
  } catch (err) {
    if (isProviderError(err, 'NotFound')) return wait(receiptID, 'HostKeysPending', `VM ${name} has not published its host keys yet; looked at again next check`);
    throw err;
  }
  const hostKey = [...keys].sort((a, b) => rank(a) - rank(b))[0];
  if (!hostKey) return wait(receiptID, 'HostKeysPending', `VM ${name} published no usable host key; looked at again next check`);
  const address = (await clients.gce.get(zone, name, signal)).address;
  if (!address) return wait(receiptID, 'AddressPending', `VM ${name} has no address yet; looked at again next check`);
  let session;
  try {
    session = await connectPinned({ host: address, port: host.port, user: host.user, hostKey, privateKey: host.privateKey, timeoutMs: SSH_TIMEOUT_MS, ...(signal ? { signal } : {}) });
  } catch (err) {
    return wait(receiptID, 'HostUnreachable', `VM ${name} could not be reached over SSH with its published host key pinned: ${errorText(err)}; looked at again next check`);
  }
  try {
    ctx.guard.permit(`github.generateJitConfig ${name}`);
    const labels = runnerLabels(ctx.target.spec.github).filter((l) => l !== 'self-hosted');
    const jit = await clients.github.generateJitConfig({ name, runnerGroupId: DEFAULT_RUNNER_GROUP, labels }, signal);
    const result = await session.exec(DELIVER, { stdin: jit.encodedJitConfig, timeoutMs: SSH_TIMEOUT_MS, ...(signal ? { signal } : {}) });
    if (result.code !== 0) {
      // A registration whose config never arrived would pass for a registered runner: it goes again.
      ctx.guard.permit(`github.deleteRunner ${name}`);
      await clients.github.deleteRunner(jit.runner.id, signal).catch(() => undefined);
      return wait(receiptID, 'DeliveryFailed', `writing the runner config on ${name} failed (exit ${result.code}): ${result.stderr.slice(0, 300)}; tried again next check`);
    }
    const message = `runner config delivered to ${name} over SSH (host key pinned); the receipt settles once its runner registers`;
    return { ok: true, receiptID, message, event: { type: 'Normal', reason: 'RunnerConfigDelivered', message } };
  } finally {
    session.close();
  }
}

function rank(line: string): number {
  const i = PREFERRED.indexOf(line.split(' ')[0] ?? '');
  return i < 0 ? PREFERRED.length : i;
}
