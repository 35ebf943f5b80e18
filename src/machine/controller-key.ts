// The SSH key pairs the controller logs in with, each kept in a Secret it owns
// in its own namespace: the controller's own key (Lease machines admit its
// public half through LEASEHOLD_LEASE_SSH_KEY or the Lambda account key) and
// any other pair a kind keeps the same way. The private half never leaves the
// controller.
import type { CoreV1Api } from '@kubernetes/client-node';
import { readOrCreateOwnSecret } from '../kube/secrets.js';
import { generateControllerKey } from './keys.js';

export interface ControllerKey {
  privateKey: string;
  publicKey: string;
}

export const SSH_KEY_SECRET = 'leasehold-controller-ssh';

type SecretApi = Parameters<typeof readOrCreateOwnSecret>[0];

export interface KeySecret {
  namespace: string;
  name: string;
  /** The app.kubernetes.io/component label of the Secret. */
  component: string;
  /** The comment of a newly made public key. */
  comment?: string;
  /** Added to the error for a Secret that lacks a half, after "delete it and the controller makes a new key". */
  replacing?: string;
}

/** Reads the key pair in Secret `name`, or makes one and keeps it there. */
export function loadOrCreateKeySecret(core: SecretApi, s: KeySecret): Promise<ControllerKey> {
  return readOrCreateOwnSecret(core, {
    namespace: s.namespace,
    name: s.name,
    component: s.component,
    decode: (data) => {
      if (!data['id_ed25519'] || !data['id_ed25519.pub']) {
        throw new Error(`Secret ${s.namespace}/${s.name} lacks id_ed25519 or id_ed25519.pub; delete it and the controller makes a new key${s.replacing ?? ''}`);
      }
      return { privateKey: Buffer.from(data['id_ed25519'], 'base64').toString(), publicKey: Buffer.from(data['id_ed25519.pub'], 'base64').toString().trim() };
    },
    make: () => {
      const key = generateControllerKey(s.comment);
      return { value: key, data: { id_ed25519: key.privateKey, 'id_ed25519.pub': key.publicKey } };
    },
  });
}

export function loadOrCreateControllerKey(core: SecretApi, namespace: string, name = SSH_KEY_SECRET): Promise<ControllerKey> {
  return loadOrCreateKeySecret(core, { namespace, name, component: 'controller-ssh-key' });
}

/**
 * Key pairs read once per id and kept; a failed read is forgotten, so the
 * next ask tries again. Reading on first ask means a follower replica never
 * reads a key it does not use.
 */
export class KeptKeys<T = ControllerKey> {
  private readonly kept = new Map<string, Promise<T>>();

  constructor(private readonly load: (id: string) => Promise<T>) {}

  get(id = ''): Promise<T> {
    let key = this.kept.get(id);
    if (!key) {
      key = this.load(id);
      this.kept.set(id, key);
      key.catch(() => {
        if (this.kept.get(id) === key) this.kept.delete(id);
      });
    }
    return key;
  }

  forget(id = ''): void {
    this.kept.delete(id);
  }
}
