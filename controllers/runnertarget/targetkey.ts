// Each RunnerTarget's own SSH key pair, kept in a Secret in the controller's
// namespace named after the target's UID. A target's VMs admit only its own
// public key, so a Compute Engine answer that points one target's check at
// another target's host (an address and host key a tenant chose) reaches a
// host that refuses the key. The Lease key (controllers/lease/identity.ts)
// is never used for runner hosts.
import type { CoreV1Api } from '@kubernetes/client-node';
import { isNotFound } from '../../src/kube/client.js';
import { readOrCreateOwnSecret } from '../../src/kube/secrets.js';
import { generateControllerKey } from '../../src/machine/keys.js';

export interface TargetKey {
  privateKey: string;
  publicKey: string;
}

/** The Secret holding target `uid`'s key pair: unique across namespaces and recreations of a name. */
export const targetKeySecretName = (uid: string) => `leasehold-runnertarget-ssh-${uid}`;

type SecretApi = Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret' | 'deleteNamespacedSecret'>;

export class TargetKeys {
  /** Read once per target and kept; a failed read is tried again at the next check. */
  private readonly kept = new Map<string, Promise<TargetKey>>();

  constructor(
    private readonly core: SecretApi,
    private readonly namespace: string,
  ) {}

  key(uid: string): Promise<TargetKey> {
    let key = this.kept.get(uid);
    if (!key) {
      key = this.load(uid);
      this.kept.set(uid, key);
      key.catch(() => this.kept.delete(uid));
    }
    return key;
  }

  /** Deletes target `uid`'s key; once its pool is gone, nothing may log in with it again. */
  async remove(uid: string): Promise<void> {
    this.kept.delete(uid);
    try {
      await this.core.deleteNamespacedSecret({ namespace: this.namespace, name: targetKeySecretName(uid) });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  private load(uid: string): Promise<TargetKey> {
    const name = targetKeySecretName(uid);
    return readOrCreateOwnSecret(this.core, {
      namespace: this.namespace,
      name,
      component: 'runnertarget-ssh-key',
      decode: (data) => {
        if (!data['id_ed25519'] || !data['id_ed25519.pub']) {
          throw new Error(`Secret ${this.namespace}/${name} lacks id_ed25519 or id_ed25519.pub; delete it and the controller makes a new key (the target's hosts then admit neither, and are replaced)`);
        }
        return { privateKey: Buffer.from(data['id_ed25519'], 'base64').toString(), publicKey: Buffer.from(data['id_ed25519.pub'], 'base64').toString().trim() };
      },
      make: () => {
        const key = generateControllerKey(`leasehold-runnertarget-${uid}`);
        return { value: key, data: { id_ed25519: key.privateKey, 'id_ed25519.pub': key.publicKey } };
      },
    });
  }
}
