// The installation's identity: a short random ID made once and kept in a
// Secret in the controller's namespace. Every machine name carries it, so two
// installations sharing a cloud account (staging and prod, or two controllers
// of one cluster in different namespaces) never take each other's machines
// for their own. The kube-system namespace UID would be shared by every
// installation of a cluster, and reading it needs a cluster-wide grant.
import { randomInt } from 'node:crypto';
import type { CoreV1Api } from '@kubernetes/client-node';
import { readOrCreateOwnSecret } from './secrets.js';

export const INSTALLATION_SECRET = 'leasehold-installation';
const KEY = 'id';
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** 36^8 IDs; with `leasehold-` and the 8-character lease ID a name stays at 27 of Lambda's 64 characters. */
const LENGTH = 8;
const VALID = /^[a-z0-9]{4,16}$/;

export function newInstallationID(): string {
  let id = '';
  for (let i = 0; i < LENGTH; i++) id += ALPHABET[randomInt(ALPHABET.length)];
  return id;
}

/** The Secret holds something that is not an installation ID: a person must restore it. */
export class InstallationIDError extends Error {
  override readonly name = 'InstallationIDError';
}

type SecretApi = Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret'>;

/** The installation ID, created if absent; replicas that race agree on the one created first. */
export function loadOrCreateInstallationID(core: SecretApi, namespace: string, name = INSTALLATION_SECRET): Promise<string> {
  const decode = (data: Record<string, string>) => decodeID(data, `${namespace}/${name}`);
  return readOrCreateOwnSecret(core, { namespace, name, component: 'installation-id', decode, make: made });
}

function decodeID(data: Record<string, string>, secret: string): string {
  const id = Buffer.from(data[KEY] ?? '', 'base64').toString().trim();
  if (!VALID.test(id)) {
    throw new InstallationIDError(`Secret ${secret} key ${KEY} must hold 4 to 16 lowercase letters or digits; it names every machine this installation rents, so restore the old value (see a Lease's status.machineName: leasehold-<id>-<lease id>)`);
  }
  return id;
}

function made(): { value: string; data: Record<string, string> } {
  const id = newInstallationID();
  return { value: id, data: { [KEY]: id } };
}

/**
 * The same, retried until the API server answers: the controller must not
 * name a machine before it knows whose it is. A malformed Secret is not
 * retried; it needs a person.
 */
export async function waitForInstallationID(core: SecretApi, namespace: string, onRetry: (err: unknown, inMs: number) => void): Promise<string> {
  for (let delay = 1000; ; delay = Math.min(delay * 2, 30_000)) {
    try {
      return await loadOrCreateInstallationID(core, namespace);
    } catch (err) {
      if (err instanceof InstallationIDError) throw err;
      onRetry(err, delay);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
