// SSH to a runner host with its host key pinned from the instance's guest
// attributes (`hostkeys/`, as `gcloud compute ssh` reads them): a host that
// has not published its keys, or presents another one, is never trusted.
import { errorText } from '../../../src/kube/errors.js';
import { connectPinned, type SshSession } from '../../../src/machine/ssh.js';
import { isProviderError } from '../../../src/providers/errors.js';
import { hostAddress, type TargetClients } from './providers.js';

export interface HostAccess {
  /** The target's own SSH key pair (../targetkey.ts). */
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

/**
 * Host keys that the guest attributes gave and a pinned connection then
 * confirmed, per Compute Engine client (one target's credentials, so one
 * project) and VM (zone, name and creation time: a VM made again under the
 * same name is another VM). Guest attributes are read once per VM rather than
 * at every check; a failed connection forgets the key, so the next one reads
 * them again.
 */
const pins = new WeakMap<object, Map<string, string>>();
const MAX_PINS = 4096;

function pinned(clients: TargetClients): Map<string, string> {
  let m = pins.get(clients.gce);
  if (!m) pins.set(clients.gce, (m = new Map()));
  return m;
}

/** Where the check's instances.list already says it: the address (spares an instances.get) and the creation time (lets a confirmed host key be kept). */
export interface KnownVM {
  address?: string | undefined;
  /** spec.gce.externalIP: false reaches the VM at its internal address when it is read here. */
  externalIP?: boolean | undefined;
  createdAt?: string | undefined;
}

export async function openHost(name: string, zone: string, clients: TargetClients, host: HostAccess, signal?: AbortSignal, known: KnownVM = {}): Promise<Opened> {
  const pinKey = known.createdAt ? `${zone}/${name}/${known.createdAt}` : undefined;
  let hostKey = pinKey ? pinned(clients).get(pinKey) : undefined;
  if (!hostKey) {
    let keys: string[];
    try {
      keys = await clients.gce.hostKeys(zone, name, signal);
    } catch (err) {
      if (isProviderError(err, 'NotFound')) return { reason: 'HostKeysPending', message: `VM ${name} has not published its host keys yet` };
      throw err;
    }
    hostKey = [...keys].sort((a, b) => rank(a) - rank(b))[0];
    if (!hostKey) return { reason: 'HostKeysPending', message: `VM ${name} published no usable host key` };
  }
  const address = known.address ?? hostAddress(await clients.gce.get(zone, name, signal), known.externalIP !== false);
  if (!address) return { reason: 'AddressPending', message: `VM ${name} has no address yet` };
  try {
    const session = await connectPinned({ host: address, port: host.port, user: host.user, hostKey, privateKey: host.privateKey, timeoutMs: SSH_TIMEOUT_MS, ...(signal ? { signal } : {}) });
    if (pinKey) remember(pinned(clients), pinKey, hostKey);
    return { session };
  } catch (err) {
    if (pinKey) pinned(clients).delete(pinKey);
    return { reason: 'HostUnreachable', message: `VM ${name} could not be reached over SSH with its published host key pinned: ${errorText(err)}` };
  }
}

function remember(m: Map<string, string>, key: string, hostKey: string): void {
  m.delete(key);
  m.set(key, hostKey);
  if (m.size > MAX_PINS) m.delete(m.keys().next().value!);
}

function rank(line: string): number {
  const i = PREFERRED.indexOf(line.split(' ')[0] ?? '');
  return i < 0 ? PREFERRED.length : i;
}
