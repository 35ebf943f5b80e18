// The controller's own record of each Lease's machine: how to release it,
// where to reach it, when it must end. A Lease's status is writable by
// anyone allowed to patch leases/status, so what the controller executes,
// connects to or counts down from is read from here, in a Secret in the
// controller's namespace that tenants cannot write. The Lease controller
// writes them; the Offer controller's orphan sweep reads them, so they sit
// below both kinds.
import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import type { LeaseStatus } from '../api/index.js';
import { isConflict, isNotFound } from './client.js';
import { INSTALLATION_ANNOTATION, leaseRecordsAdopted, markLeaseRecordsAdopted } from './installation.js';
import { installationPrefix } from '../providers/types.js';

export interface LeaseRecord {
  uid: string;
  namespace: string;
  name: string;
  offer: string;
  leaseID: string;
  machineName: string;
  release: NonNullable<LeaseStatus['release']>;
  expiresAt?: string | undefined;
  idleTimeout?: string | undefined;
  /** status.launch.startedAt: acquireTimeout counts from it. */
  launchStartedAt?: string | undefined;
  /** Set once acquire returned. */
  providerState?: string | undefined;
  machine?: NonNullable<LeaseStatus['machine']> | undefined;
  /** Set once the provider confirmed the machine gone; the record is deleted when the Lease ends. */
  releasedAt?: string | undefined;
  /** The installation that wrote it; absent on records from before installations stamped them. */
  installation?: string | undefined;
}

/**
 * Whether a record is this installation's: stamped with its ID, or, written
 * before records were stamped, naming a machine under its ID (or under no
 * ID: machines named before installation IDs existed).
 */
export function ownsRecord(record: LeaseRecord, installationID: string): boolean {
  if (record.installation !== undefined) return record.installation === installationID;
  return record.machineName.startsWith(installationPrefix(installationID)) || !/^leasehold-[a-z0-9]{4,16}-/.test(record.machineName);
}

export interface RecordStore {
  get(uid: string): Promise<LeaseRecord | undefined>;
  /** Creates or replaces the record of record.uid. */
  put(record: LeaseRecord): Promise<void>;
  /** Deletes it; a record already gone is not an error. */
  delete(uid: string): Promise<void>;
  list(): Promise<LeaseRecord[]>;
  /** Whether Leases made before records existed have been given theirs (see adoptLegacyLeases). */
  adopted(): Promise<boolean>;
  markAdopted(): Promise<void>;
  /** Drops what memory holds of `uid` (its Lease left the cache); the next get asks the API server. */
  evict(uid: string): void;
}

export const RECORD_PREFIX = 'leasehold-lease-';
export const ADOPTED_MARKER = 'leasehold-lease-records';

/** The adoption marker releases from before per-release installations wrote, per watched namespace (all namespaces when undefined). */
export const adoptedMarkerFor = (watchNamespace: string | undefined) => (watchNamespace ? `${ADOPTED_MARKER}-${watchNamespace}` : ADOPTED_MARKER);
const DATA_KEY = 'record.json';
const LABEL_UID = 'leasehold.dev/lease-uid';
const BASE_LABELS = { 'app.kubernetes.io/managed-by': 'leasehold', 'app.kubernetes.io/component': 'lease-record' };

export const recordSecretName = (uid: string) => `${RECORD_PREFIX}${uid}`;

/**
 * Records as Secrets in the controller's namespace, kept in memory once read
 * or written, and so is the absence of one: only the leader writes them, and
 * a new leader is a new process.
 */
export class KubeRecordStore implements RecordStore {
  private readonly known = new Map<string, { record?: LeaseRecord | undefined; resourceVersion?: string | undefined }>();
  /** Set once every record has been listed: get() then reads nothing for a Lease that has none. */
  private listed = false;

  constructor(
    private readonly core: Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret' | 'replaceNamespacedSecret' | 'deleteNamespacedSecret' | 'listNamespacedSecret'>,
    readonly namespace: string,
    private readonly installation: {
      id: string;
      /** The installation ID Secret (in `namespace`): it says whether Leases from before records were given theirs. */
      secret: string;
      /** The marker Secret releases from before per-release installations wrote for the same. */
      legacyMarker: string;
    },
  ) {}

  async get(uid: string): Promise<LeaseRecord | undefined> {
    const known = this.known.get(uid);
    if (known) return known.record;
    // Since a full list, a record not in it and not written since is none:
    // only the leader writes records, and it listed them after it led.
    if (this.listed) return undefined;
    try {
      return this.remember(await this.core.readNamespacedSecret({ namespace: this.namespace, name: recordSecretName(uid) }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
      this.known.set(uid, {});
      return undefined;
    }
  }

  async put(record: LeaseRecord): Promise<void> {
    const name = recordSecretName(record.uid);
    record = { ...record, installation: this.installation.id };
    const body = this.secretOf(record);
    let resourceVersion = this.known.get(record.uid)?.resourceVersion;
    for (let i = 0; ; i++) {
      try {
        const written = resourceVersion
          ? await this.core.replaceNamespacedSecret({ namespace: this.namespace, name, body: { ...body, metadata: { ...body.metadata, resourceVersion } } })
          : await this.core.createNamespacedSecret({ namespace: this.namespace, body });
        this.known.set(record.uid, { record, resourceVersion: written.metadata?.resourceVersion });
        return;
      } catch (err) {
        // Made by an earlier pass or process, or changed since it was read: replace what is there now.
        if (!(isConflict(err) || (resourceVersion && isNotFound(err))) || i >= 3) throw err;
        resourceVersion = await this.core.readNamespacedSecret({ namespace: this.namespace, name }).then(
          (s) => s.metadata?.resourceVersion,
          (e: unknown) => {
            if (isNotFound(e)) return undefined;
            throw e;
          },
        );
      }
    }
  }

  async delete(uid: string): Promise<void> {
    try {
      await this.core.deleteNamespacedSecret({ namespace: this.namespace, name: recordSecretName(uid) });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    this.known.set(uid, {});
  }

  async list(): Promise<LeaseRecord[]> {
    const list = await this.core.listNamespacedSecret({ namespace: this.namespace, labelSelector: `app.kubernetes.io/component=lease-record,${LABEL_UID}` });
    // Other installations sharing this namespace keep their records here too.
    const records = list.items.map((s) => this.remember(s)).filter((r): r is LeaseRecord => r !== undefined);
    this.listed = true;
    return records;
  }

  /**
   * Kept on the installation ID Secret, not on a marker of its own: a marker
   * that went missing would let status be trusted again, while the ID
   * Secret cannot go without the installation becoming a new one (made
   * with the adoption done).
   */
  async adopted(): Promise<boolean> {
    if (await leaseRecordsAdopted(this.core, this.namespace, this.installation.secret)) return true;
    try {
      await this.core.readNamespacedSecret({ namespace: this.namespace, name: this.installation.legacyMarker });
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
    await markLeaseRecordsAdopted(this.core, this.namespace, this.installation.secret);
    return true;
  }

  async markAdopted(): Promise<void> {
    await markLeaseRecordsAdopted(this.core, this.namespace, this.installation.secret);
  }

  evict(uid: string): void {
    this.known.delete(uid);
  }

  /** Remembers a record read back; another installation's is remembered as none of ours. */
  private remember(secret: V1Secret): LeaseRecord | undefined {
    const data = secret.data?.[DATA_KEY];
    if (!data) return undefined;
    const record = JSON.parse(Buffer.from(data, 'base64').toString()) as LeaseRecord;
    if (!ownsRecord(record, this.installation.id)) {
      this.known.set(record.uid, {});
      return undefined;
    }
    this.known.set(record.uid, { record, resourceVersion: secret.metadata?.resourceVersion });
    return record;
  }

  private secretOf(record: LeaseRecord): V1Secret {
    // Label values are at most 63 characters; a longer Lease name is in the record and the annotation only.
    const nameLabel: Record<string, string> = record.name.length <= 63 ? { 'leasehold.dev/lease-name': record.name } : {};
    return {
      metadata: {
        name: recordSecretName(record.uid),
        namespace: this.namespace,
        labels: { ...BASE_LABELS, [LABEL_UID]: record.uid, [INSTALLATION_ANNOTATION]: this.installation.id, 'leasehold.dev/lease-namespace': record.namespace, ...nameLabel },
        annotations: { 'leasehold.dev/lease': `${record.namespace}/${record.name}` },
      },
      type: 'Opaque',
      data: { [DATA_KEY]: Buffer.from(JSON.stringify(record)).toString('base64') },
    };
  }
}
