// A Lease's device keys, apart from its schema: the CLI checks and hashes
// them on every run and must not load zod to.
import { createHash } from 'node:crypto';

/** At most this many device keys per Lease. */
export const MAX_SSH_KEYS = 16;

/** status.installedKeysHash of spec.sshKeys: the controller writes it once these keys are on the machine; a device compares it to know its key is in. */
export function sshKeysHash(keys: readonly string[]): string {
  return createHash('sha256').update(keys.join('\n')).digest('hex').slice(0, 16);
}

/** OpenSSH public key types accepted in spec.sshKeys. */
export const SSH_KEY_TYPES = [
  'ssh-ed25519',
  'ssh-rsa',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'sk-ssh-ed25519@openssh.com',
  'sk-ecdsa-sha2-nistp256@openssh.com',
] as const;
