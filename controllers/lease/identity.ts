// The controller's own SSH key pair, kept in a Secret it owns. Machines admit
// its public half (LEASEHOLD_LEASE_SSH_KEY, the Lambda account key); the
// private half never leaves the controller.
import type { CoreV1Api } from '@kubernetes/client-node';
import { generateControllerKey } from '../../src/machine/keys.js';
import { readOrCreateOwnSecret } from '../../src/kube/secrets.js';

export interface ControllerKey {
  privateKey: string;
  publicKey: string;
}

export const SSH_KEY_SECRET = 'leasehold-controller-ssh';

export function loadOrCreateControllerKey(core: CoreV1Api, namespace: string, name = SSH_KEY_SECRET): Promise<ControllerKey> {
  return readOrCreateOwnSecret(core, {
    namespace,
    name,
    component: 'controller-ssh-key',
    decode: (data) => {
      if (!data['id_ed25519'] || !data['id_ed25519.pub']) {
        throw new Error(`Secret ${namespace}/${name} lacks id_ed25519 or id_ed25519.pub; delete it and the controller makes a new key`);
      }
      return {
        privateKey: Buffer.from(data['id_ed25519'], 'base64').toString(),
        publicKey: Buffer.from(data['id_ed25519.pub'], 'base64').toString().trim(),
      };
    },
    make: () => {
      const key = generateControllerKey();
      return { value: key, data: { id_ed25519: key.privateKey, 'id_ed25519.pub': key.publicKey } };
    },
  });
}
