// SSH to a runner host with its host key pinned from the instance's guest
// attributes (`hostkeys/`, as `gcloud compute ssh` reads them): a host that
// has not published its keys, or presents another one, is never trusted.
import { errorText } from '../../src/kube/errors.js';
import { connectPinned, type SshSession } from '../../src/machine/ssh.js';
import { isProviderError } from '../../src/providers/errors.js';
import type { TargetClients } from './operations.js';

export interface HostAccess {
  /** The controller's SSH key pair. */
  privateKey: string;
  publicKey: string;
  /** The login user and port on hosts (user `leasehold`, port 22 on Compute Engine). */
  user: string;
  port: number;
}

export const SSH_TIMEOUT_MS = 30_000;
/** Host key types in the order they are pinned. */
const PREFERRED = ['ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521', 'ssh-rsa'];

export type Opened = { session: SshSession } | { reason: 'HostKeysPending' | 'AddressPending' | 'HostUnreachable'; message: string };

/** `known`: the address this check's instances.list gave, which spares an instances.get per host. */
export async function openHost(name: string, zone: string, clients: TargetClients, host: HostAccess, signal?: AbortSignal, known?: string): Promise<Opened> {
  let keys: string[];
  try {
    keys = await clients.gce.hostKeys(zone, name, signal);
  } catch (err) {
    if (isProviderError(err, 'NotFound')) return { reason: 'HostKeysPending', message: `VM ${name} has not published its host keys yet` };
    throw err;
  }
  const hostKey = [...keys].sort((a, b) => rank(a) - rank(b))[0];
  if (!hostKey) return { reason: 'HostKeysPending', message: `VM ${name} published no usable host key` };
  const address = known ?? (await clients.gce.get(zone, name, signal)).address;
  if (!address) return { reason: 'AddressPending', message: `VM ${name} has no address yet` };
  try {
    return { session: await connectPinned({ host: address, port: host.port, user: host.user, hostKey, privateKey: host.privateKey, timeoutMs: SSH_TIMEOUT_MS, ...(signal ? { signal } : {}) }) };
  } catch (err) {
    return { reason: 'HostUnreachable', message: `VM ${name} could not be reached over SSH with its published host key pinned: ${errorText(err)}` };
  }
}

function rank(line: string): number {
  const i = PREFERRED.indexOf(line.split(' ')[0] ?? '');
  return i < 0 ? PREFERRED.length : i;
}
