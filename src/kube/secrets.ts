// Reading one key of a Secret that a custom resource names (an API key, a
// bearer token). Each failure is typed and its message names the Secret, the
// key, the field that points at it and what to change, because the person who
// reads it is a platform admin looking at a condition, not at this code.
import type { CoreV1Api } from '@kubernetes/client-node';
import { statusCode } from './client.js';
import { errorText } from './errors.js';

export interface SecretKeyRef {
  name: string;
  namespace?: string | undefined;
  key?: string | undefined;
}

export type SecretKeyProblem = 'SecretAbsent' | 'KeyAbsent' | 'Forbidden' | 'Unreadable';

export class SecretKeyError extends Error {
  override readonly name = 'SecretKeyError';
  constructor(
    readonly problem: SecretKeyProblem,
    message: string,
  ) {
    super(message);
  }
}

/** What the key is for and where the reference sits, so that messages can say what to fix. */
export interface SecretKeyUse {
  /** The field holding the reference, e.g. `spec.lambda.apiKeySecretRef`. */
  field: string;
  /** What the value is, e.g. `the Lambda API key`. */
  what: string;
  /** The key used when the reference names none. */
  defaultKey: string;
}

/** A Secret's data, decoded; undefined when the Secret does not exist. Throws (with an HTTP `code`) on other errors. */
export type SecretDataReader = (namespace: string, name: string) => Promise<Record<string, string> | undefined>;

/** Reads Secrets with the controller's own client. */
export function secretDataReader(core: Pick<CoreV1Api, 'readNamespacedSecret'>): SecretDataReader {
  return async (namespace, name) => {
    try {
      const secret = await core.readNamespacedSecret({ namespace, name });
      return Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  };
}

/** The trimmed, non-empty value of the referenced key, or a SecretKeyError saying what to fix. */
export async function readSecretKey(read: SecretDataReader, ref: SecretKeyRef, use: SecretKeyUse): Promise<string> {
  const key = ref.key || use.defaultKey;
  if (!ref.namespace) throw new SecretKeyError('SecretAbsent', `${use.field}.namespace is empty; name the namespace of the Secret that holds ${use.what}`);
  const where = `Secret ${ref.namespace}/${ref.name}`;
  let data: Record<string, string> | undefined;
  try {
    data = await read(ref.namespace, ref.name);
  } catch (err) {
    if (statusCode(err) === 403) {
      throw new SecretKeyError('Forbidden', `${where} is not readable by the controller; add namespace ${ref.namespace} to the chart's secretNamespaces value`);
    }
    throw new SecretKeyError('Unreadable', `${where} could not be read: ${errorText(err).slice(0, 200)}`);
  }
  if (!data) throw new SecretKeyError('SecretAbsent', `${where} (${use.field}) does not exist; create it with ${use.what} under key ${key}`);
  const value = (data[key] ?? '').trim();
  if (!value) throw new SecretKeyError('KeyAbsent', `${where} has no non-empty key ${key} (${use.field}.key); put ${use.what} there`);
  return value;
}

/** A Secret the controller makes once and keeps: its name, a label for what it is, and how to read and make its value. */
export interface OwnSecret<T> {
  namespace: string;
  name: string;
  /** app.kubernetes.io/component */
  component: string;
  /** The value from the Secret's base64 data; throws when the data is not what it should be. */
  decode(data: Record<string, string>): T;
  /** A fresh value and its (plain) data. */
  make(): { value: T; data: Record<string, string> };
}

/** Reads the Secret, or creates it; a replica that loses the race to create it reads the winner's. */
export async function readOrCreateOwnSecret<T>(core: Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret'>, s: OwnSecret<T>): Promise<T> {
  const { namespace, name } = s;
  const read = async () => s.decode((await core.readNamespacedSecret({ namespace, name })).data ?? {});
  try {
    return await read();
  } catch (err) {
    if (statusCode(err) !== 404) throw err;
  }
  const made = s.make();
  try {
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'leasehold', 'app.kubernetes.io/component': s.component } },
        type: 'Opaque',
        data: Object.fromEntries(Object.entries(made.data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
      },
    });
    return made.value;
  } catch (err) {
    if (statusCode(err) === 409) return read();
    throw err;
  }
}
