// Lambda accounts as the controller sees them: an API key read from a
// Secret, a client for it, and one launch queue per account (endpoint and
// key), shared by every Offer and Lease that uses that account.
import { createHash } from 'node:crypto';
import { LambdaClient } from './client.js';
import { PacerRegistry, type LaunchPacer } from './pacer.js';

export const LAUNCH_SLACK_MS = 250;

export interface SecretKeyRef {
  name: string;
  namespace?: string | undefined;
  key?: string | undefined;
}

/** Reads a Secret's data, decoded; undefined when it does not exist. Throws on other errors. */
export type SecretReader = (namespace: string, name: string) => Promise<Record<string, string> | undefined>;

/** Why an API key could not be had, in terms a platform admin can act on. */
export class CredentialError extends Error {
  override readonly name = 'CredentialError';
  constructor(
    readonly reason: 'APIKeySecretNotFound' | 'APIKeyMissing' | 'APIKeySecretUnreadable',
    message: string,
  ) {
    super(message);
  }
}

export interface LambdaAccount {
  client: LambdaClient;
  pacer: LaunchPacer;
  /** A name for the account that reveals nothing of the key. */
  id: string;
  /** Names of SSH keys known to be registered with this account. */
  registeredKeys: Set<string>;
}

export interface LambdaAccountsOptions {
  secrets: SecretReader;
  launchIntervalMs: number;
  requestTimeoutMs?: number;
  onResult?: (operation: string, code: string) => void;
}

export class LambdaAccounts {
  private readonly pacers: PacerRegistry;
  /** SSH key names known to be registered, per account. */
  private readonly registered = new Map<string, Set<string>>();

  constructor(private readonly opts: LambdaAccountsOptions) {
    // A little slack, so that network jitter never lands two requests closer than the API counts.
    this.pacers = new PacerRegistry(opts.launchIntervalMs > 0 ? opts.launchIntervalMs + LAUNCH_SLACK_MS : 0);
  }

  async apiKey(ref: SecretKeyRef): Promise<string> {
    const key = ref.key ?? 'apiKey';
    const where = `Secret ${ref.namespace}/${ref.name}`;
    if (!ref.namespace) throw new CredentialError('APIKeySecretNotFound', 'spec.lambda.apiKeySecretRef.namespace is empty; name the namespace of the Secret');
    let data: Record<string, string> | undefined;
    try {
      data = await this.opts.secrets(ref.namespace, ref.name);
    } catch (err) {
      const code = (err as { code?: number })?.code;
      throw new CredentialError(
        'APIKeySecretUnreadable',
        code === 403
          ? `${where} is not readable by the controller; add namespace ${ref.namespace} to the chart's secretNamespaces value`
          : `${where} could not be read: ${err instanceof Error ? err.message.slice(0, 200) : String(err)}`,
      );
    }
    if (!data) throw new CredentialError('APIKeySecretNotFound', `${where} (spec.lambda.apiKeySecretRef) does not exist; create it with the Lambda API key under key ${key}`);
    const value = (data[key] ?? '').trim();
    if (!value) throw new CredentialError('APIKeyMissing', `${where} has no non-empty key ${key} (spec.lambda.apiKeySecretRef.key); put the Lambda API key there`);
    return value;
  }

  async account(ref: SecretKeyRef, endpoint: string): Promise<LambdaAccount> {
    const apiKey = await this.apiKey(ref);
    const id = `${endpoint.replace(/\/+$/, '')}#${createHash('sha256').update(apiKey).digest('hex').slice(0, 12)}`;
    return {
      id,
      client: new LambdaClient({
        endpoint,
        apiKey,
        ...(this.opts.requestTimeoutMs ? { timeoutMs: this.opts.requestTimeoutMs } : {}),
        ...(this.opts.onResult ? { onResult: this.opts.onResult } : {}),
      }),
      pacer: this.pacers.for(id),
      registeredKeys: this.registeredFor(id),
    };
  }

  private registeredFor(id: string): Set<string> {
    let set = this.registered.get(id);
    if (!set) {
      set = new Set();
      this.registered.set(id, set);
    }
    return set;
  }
}
