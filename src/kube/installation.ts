// The installation's identity: a short random ID made once per release and
// kept in a Secret in the controller's namespace. Every machine name and
// every object the installation takes on carries it, so two installations
// sharing a cloud account, a cluster or a namespace never take each other's
// machines or Leases for their own. The kube-system namespace UID would be
// shared by every installation of a cluster, and reading it needs a
// cluster-wide grant.
import { randomInt } from 'node:crypto';
import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { isConflict, isNotFound } from './client.js';

/** The Secret of releases from before IDs were per release: one per namespace, inherited by the first release to claim it. */
export const LEGACY_INSTALLATION_SECRET = 'leasehold-installation';
/** The annotation with which an installation stamps what it took on (Leases, records); the one a legacy Secret is claimed with. */
export const INSTALLATION_ANNOTATION = 'leasehold.dev/installation';
const KEY = 'id';
/** Present once Leases from before lease records were given theirs; a new installation is made with it. */
const RECORDS_KEY = 'lease-records';
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

export interface Installation {
  id: string;
  /** Whether status may still be trusted once to give Leases from before records theirs (never for a new installation). */
  leaseRecordsAdopted: boolean;
}

type SecretApi = Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret' | 'replaceNamespacedSecret'>;

/**
 * The installation of the release whose ID Secret is `name`, created if
 * absent; replicas that race agree on the one created first. A release
 * upgraded from per-namespace IDs inherits the namespace's legacy ID if no
 * other release claimed it first (its machines are named after it); the
 * claim is written on the legacy Secret before the release's own Secret.
 */
export async function loadOrCreateInstallation(core: SecretApi, namespace: string, name: string): Promise<Installation> {
  if (name === LEGACY_INSTALLATION_SECRET) {
    // A controller still on the legacy Secret claims it too, so that no release upgraded beside it inherits the same ID.
    const legacy = await claimLegacy(core, namespace, name);
    if (legacy) return legacy;
    const existing = await read(core, namespace, name);
    // A replica of this release may have created it since claimLegacy looked.
    if (existing?.metadata?.annotations?.[INSTALLATION_ANNOTATION] === name) return decode(existing, `${namespace}/${name}`);
    if (existing) {
      throw new InstallationIDError(`Secret ${namespace}/${name} holds the ID another release inherited (annotation ${INSTALLATION_ANNOTATION}); give this controller its own with --installation-secret`);
    }
  } else {
    const own = await read(core, namespace, name);
    if (own) return decode(own, `${namespace}/${name}`);
  }
  const inherited = name === LEGACY_INSTALLATION_SECRET ? undefined : await claimLegacy(core, namespace, name);
  const data: Record<string, string> = inherited ? { [KEY]: inherited.id } : { [KEY]: newInstallationID(), [RECORDS_KEY]: 'adopted' };
  if (inherited?.leaseRecordsAdopted) data[RECORDS_KEY] = 'adopted';
  try {
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name,
          namespace,
          labels: { 'app.kubernetes.io/part-of': 'leasehold', 'app.kubernetes.io/component': 'installation-id' },
          ...(name === LEGACY_INSTALLATION_SECRET ? { annotations: { [INSTALLATION_ANNOTATION]: name } } : {}),
        },
        type: 'Opaque',
        data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
      },
    });
    return { id: data[KEY]!, leaseRecordsAdopted: data[RECORDS_KEY] === 'adopted' };
  } catch (err) {
    if (!isConflict(err)) throw err;
    return decode((await read(core, namespace, name))!, `${namespace}/${name}`);
  }
}

/** The legacy ID, if this release may have it: unclaimed (then claimed now) or claimed by this release already. */
async function claimLegacy(core: SecretApi, namespace: string, name: string): Promise<Installation | undefined> {
  for (let i = 0; i < 3; i++) {
    const legacy = await read(core, namespace, LEGACY_INSTALLATION_SECRET);
    if (!legacy) return undefined;
    const claimedBy = legacy.metadata?.annotations?.[INSTALLATION_ANNOTATION];
    if (claimedBy && claimedBy !== name) return undefined;
    const installation = decode(legacy, `${namespace}/${LEGACY_INSTALLATION_SECRET}`);
    if (claimedBy === name) return installation;
    try {
      await core.replaceNamespacedSecret({
        namespace,
        name: LEGACY_INSTALLATION_SECRET,
        body: { ...legacy, metadata: { ...legacy.metadata, annotations: { ...legacy.metadata?.annotations, [INSTALLATION_ANNOTATION]: name } } },
      });
      return installation;
    } catch (err) {
      // Another release claimed it between the read and the write: read who.
      if (!isConflict(err)) throw err;
    }
  }
  return undefined;
}

/** Records that Leases from before lease records have theirs: status is never trusted for that again. */
export async function markLeaseRecordsAdopted(core: SecretApi, namespace: string, name: string): Promise<void> {
  for (let i = 0; ; i++) {
    const secret = await read(core, namespace, name);
    if (!secret) throw new InstallationIDError(`Secret ${namespace}/${name} is gone; it names every machine this installation rents, so restore it`);
    if (secret.data?.[RECORDS_KEY]) return;
    try {
      await core.replaceNamespacedSecret({ namespace, name, body: { ...secret, data: { ...secret.data, [RECORDS_KEY]: Buffer.from('adopted').toString('base64') } } });
      return;
    } catch (err) {
      if (!isConflict(err) || i >= 3) throw err;
    }
  }
}

/** Whether the installation's Secret says Leases from before records were given theirs. */
export async function leaseRecordsAdopted(core: SecretApi, namespace: string, name: string): Promise<boolean> {
  const secret = await read(core, namespace, name);
  return Boolean(secret?.data?.[RECORDS_KEY]);
}

async function read(core: SecretApi, namespace: string, name: string): Promise<V1Secret | undefined> {
  try {
    return await core.readNamespacedSecret({ namespace, name });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

function decode(secret: V1Secret, where: string): Installation {
  const id = Buffer.from(secret.data?.[KEY] ?? '', 'base64').toString().trim();
  if (!VALID.test(id)) {
    throw new InstallationIDError(`Secret ${where} key ${KEY} must hold 4 to 16 lowercase letters or digits; it names every machine this installation rents, so restore the old value (see a Lease's status.machineName: leasehold-<id>-<lease id>)`);
  }
  return { id, leaseRecordsAdopted: Boolean(secret.data?.[RECORDS_KEY]) };
}

/**
 * The same, retried until the API server answers: the controller must not
 * name a machine before it knows whose it is. A malformed Secret is not
 * retried; it needs a person.
 */
export async function waitForInstallation(core: SecretApi, namespace: string, name: string, onRetry: (err: unknown, inMs: number) => void): Promise<Installation> {
  for (let delay = 1000; ; delay = Math.min(delay * 2, 30_000)) {
    try {
      return await loadOrCreateInstallation(core, namespace, name);
    } catch (err) {
      if (err instanceof InstallationIDError) throw err;
      onRetry(err, delay);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
