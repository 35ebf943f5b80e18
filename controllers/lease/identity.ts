// The controller's own SSH key pair, kept in a Secret it owns. Machines admit
// its public half (LEASEHOLD_LEASE_SSH_KEY, the Lambda account key); the
// private half never leaves the controller.
import type { CoreV1Api } from '@kubernetes/client-node';
import { generateControllerKey } from '../../src/machine/keys.js';
import { isConflict, isNotFound } from '../../src/kube/client.js';

export interface ControllerKey {
  privateKey: string;
  publicKey: string;
}

export const SSH_KEY_SECRET = 'leasehold-controller-ssh';

export async function loadOrCreateControllerKey(core: CoreV1Api, namespace: string, name = SSH_KEY_SECRET): Promise<ControllerKey> {
  const read = async () => {
    const s = await core.readNamespacedSecret({ namespace, name });
    const data = s.data ?? {};
    if (!data['id_ed25519'] || !data['id_ed25519.pub']) {
      throw new Error(`Secret ${namespace}/${name} lacks id_ed25519 or id_ed25519.pub; delete it and the controller makes a new key`);
    }
    return {
      privateKey: Buffer.from(data['id_ed25519'], 'base64').toString(),
      publicKey: Buffer.from(data['id_ed25519.pub'], 'base64').toString().trim(),
    };
  };
  try {
    return await read();
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const key = generateControllerKey();
  try {
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'leasehold', 'app.kubernetes.io/component': 'controller-ssh-key' } },
        type: 'Opaque',
        data: {
          id_ed25519: Buffer.from(key.privateKey).toString('base64'),
          'id_ed25519.pub': Buffer.from(key.publicKey).toString('base64'),
        },
      },
    });
    return key;
  } catch (err) {
    // Another replica made it first: use theirs.
    if (isConflict(err)) return read();
    throw err;
  }
}
