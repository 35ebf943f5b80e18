// Each RunnerTarget's own SSH key pair, kept in a Secret in the controller's
// namespace named after the target's UID. A target's VMs admit only its own
// public key, so a Compute Engine answer that points one target's check at
// another target's host (an address and host key a tenant chose) reaches a
// host that refuses the key. The controller's own key
// (src/machine/controller-key.ts) is never used for runner hosts.
import type { CoreV1Api } from '@kubernetes/client-node';
import { isNotFound } from '../../src/kube/client.js';
import { KeptKeys, loadOrCreateKeySecret, type ControllerKey } from '../../src/machine/controller-key.js';

export type TargetKey = ControllerKey;

/** The Secret holding target `uid`'s key pair: unique across namespaces and recreations of a name. */
export const targetKeySecretName = (uid: string) => `leasehold-runnertarget-ssh-${uid}`;

type SecretApi = Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret' | 'deleteNamespacedSecret'>;

export class TargetKeys {
  /** Read once per target and kept; a failed read is tried again at the next check. */
  private readonly kept: KeptKeys<TargetKey>;

  constructor(
    private readonly core: SecretApi,
    private readonly namespace: string,
  ) {
    this.kept = new KeptKeys((uid) =>
      loadOrCreateKeySecret(this.core, {
        namespace: this.namespace,
        name: targetKeySecretName(uid),
        component: 'runnertarget-ssh-key',
        comment: `leasehold-runnertarget-${uid}`,
        replacing: " (the target's hosts then admit neither, and are replaced)",
      }),
    );
  }

  key(uid: string): Promise<TargetKey> {
    return this.kept.get(uid);
  }

  /** Deletes target `uid`'s key; once its pool is gone, nothing may log in with it again. */
  async remove(uid: string): Promise<void> {
    this.kept.forget(uid);
    try {
      await this.core.deleteNamespacedSecret({ namespace: this.namespace, name: targetKeySecretName(uid) });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
