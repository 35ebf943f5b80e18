// Lambda accounts as the controller sees them: an API key read from a
// Secret, a client for it, and one launch queue per account (endpoint and
// key), shared by every Offer and Lease that uses that account.
import { createHash } from 'node:crypto';
import { LambdaClient } from './client.js';
import { PacerRegistry, RequestSpacer, type LaunchPacer } from './pacer.js';
import { readSecretKey, SecretKeyError, type SecretDataReader, type SecretKeyProblem, type SecretKeyRef } from '../../kube/secrets.js';

export const LAUNCH_SLACK_MS = 250;

/** Lambda's general limit: about one request per second per account. */
export const REQUEST_INTERVAL_MS = 1000;

/** Why an API key could not be had: the Lease and Offer reasons a platform admin sees. */
export type CredentialReason = 'APIKeySecretNotFound' | 'APIKeyMissing' | 'APIKeySecretUnreadable';

const REASONS: Record<SecretKeyProblem, CredentialReason> = {
  SecretAbsent: 'APIKeySecretNotFound',
  KeyAbsent: 'APIKeyMissing',
  Forbidden: 'APIKeySecretUnreadable',
  Unreadable: 'APIKeySecretUnreadable',
};

export class CredentialError extends Error {
  override readonly name = 'CredentialError';
  constructor(
    readonly reason: CredentialReason,
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
  secrets: SecretDataReader;
  launchIntervalMs: number;
  /** Least time between two requests of one account (REQUEST_INTERVAL_MS unless set; 0 turns spacing off). */
  requestIntervalMs?: number;
  requestTimeoutMs?: number;
  onResult?: (operation: string, code: string) => void;
}

export class LambdaAccounts {
  private readonly pacers: PacerRegistry;
  /** SSH key names known to be registered, per account. */
  private readonly registered = new Map<string, Set<string>>();
  private readonly spacers = new Map<string, RequestSpacer>();

  constructor(private readonly opts: LambdaAccountsOptions) {
    // A little slack, so that network jitter never lands two requests closer than the API counts.
    this.pacers = new PacerRegistry(opts.launchIntervalMs > 0 ? opts.launchIntervalMs + LAUNCH_SLACK_MS : 0);
  }

  async apiKey(ref: SecretKeyRef): Promise<string> {
    try {
      return await readSecretKey(this.opts.secrets, ref, { field: 'spec.lambda.apiKeySecretRef', what: 'the Lambda API key', defaultKey: 'apiKey' });
    } catch (err) {
      if (err instanceof SecretKeyError) throw new CredentialError(REASONS[err.problem], err.message);
      throw err;
    }
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
        ...(this.spacerFor(id) ? { spacer: this.spacerFor(id) } : {}),
      }),
      pacer: this.pacers.for(id),
      registeredKeys: this.registeredFor(id),
    };
  }

  private spacerFor(id: string): RequestSpacer | undefined {
    const interval = this.opts.requestIntervalMs ?? REQUEST_INTERVAL_MS;
    if (!(interval > 0)) return undefined;
    let spacer = this.spacers.get(id);
    if (!spacer) {
      // A little slack, so that network jitter never lands two requests closer than the API counts.
      spacer = new RequestSpacer(interval + LAUNCH_SLACK_MS);
      this.spacers.set(id, spacer);
    }
    return spacer;
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
