// Service accounts, the keys the emulator issues them, and Google's OAuth 2.0
// token endpoint for the JWT-bearer grant (RFC 7523): a JWT signed with the
// key's private half comes in, an access token for the API goes out.
import { generateKeyPairSync, randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FaultInjector } from '../kit/faults.js';
import { readBody, sendJson, type Mount, type Reply } from '../kit/http.js';
import { nowSeconds, verifyJwt } from '../kit/jwt.js';
import type { RecordLog } from '../kit/log.js';
import type { GceOp, RequestRecord, ServiceAccountKeyJson } from './types.js';

export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** The audience Google's own token endpoint accepts; the emulator also accepts its own URL. */
export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
const COMPUTE_SCOPES = ['https://www.googleapis.com/auth/compute', 'https://www.googleapis.com/auth/cloud-platform'];

export interface ServiceAccount {
  id: string;
  email: string;
  keys: { id: string; publicKey: KeyObject; revoked: boolean }[];
}

interface AccessToken {
  account: ServiceAccount;
  scopes: string[];
  expiresAt: number;
}

export class Accounts {
  readonly list: ServiceAccount[] = [];
  private readonly tokens = new Map<string, AccessToken>();

  constructor(
    private readonly project: string,
    private readonly tokenUrl: () => string,
    private readonly ttlSeconds: () => number,
  ) {}

  /** A new service account with one fresh RSA key; the key JSON is the only copy of its private half. */
  add(name: string): ServiceAccountKeyJson {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const email = `${name}@${this.project}.iam.gserviceaccount.com`;
    const keyId = randomBytes(20).toString('hex');
    let account = this.list.find((a) => a.email === email);
    if (!account) {
      account = { id: email, email, keys: [] };
      this.list.push(account);
    }
    account.keys.push({ id: keyId, publicKey, revoked: false });
    return {
      type: 'service_account',
      project_id: this.project,
      private_key_id: keyId,
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      client_email: email,
      client_id: String(BigInt(`0x${randomBytes(8).toString('hex')}`)),
      auth_uri: 'https://accounts.google.com/o/oauth2/auth',
      token_uri: this.tokenUrl(),
    };
  }

  revoke(keyId: string): void {
    for (const a of this.list) for (const k of a.keys) if (k.id === keyId) k.revoked = true;
  }

  /** The account an unexpired access token belongs to. */
  callerOf(token: string): (ServiceAccount & { scopes: string[] }) | undefined {
    const t = this.tokens.get(token);
    if (!t || t.expiresAt <= Date.now()) return undefined;
    return { ...t.account, scopes: t.scopes };
  }

  static canUseCompute(scopes: readonly string[]): boolean {
    return scopes.some((s) => COMPUTE_SCOPES.includes(s));
  }

  /** The token endpoint's answer to a form-encoded grant request. */
  grant(form: URLSearchParams): Reply {
    const refuse = (error: string, description: string): Reply => ({ status: 400, body: { error, error_description: description } });
    const grantType = form.get('grant_type');
    if (grantType !== JWT_BEARER) return refuse('unsupported_grant_type', `Invalid grant_type: ${grantType ?? ''}`);
    const assertion = form.get('assertion');
    if (!assertion) return refuse('invalid_request', 'Missing required parameter: assertion');
    const live = this.list.flatMap((a) => a.keys.filter((k) => !k.revoked).map((k) => ({ account: a, key: k })));
    let signer: (typeof live)[number] | undefined;
    let claims: Record<string, unknown> = {};
    for (const l of live) {
      const v = verifyJwt(assertion, [l.key.publicKey]);
      if ('error' in v) {
        if (v.error !== 'invalid signature') return refuse('invalid_grant', 'Invalid JWT.');
        continue;
      }
      signer = l;
      claims = v.claims;
      break;
    }
    if (!signer) return refuse('invalid_grant', 'Invalid JWT Signature.');
    if (claims.iss !== signer.account.email) return refuse('invalid_grant', 'Invalid JWT: the issuer is not the service account whose key signed it.');
    if (claims.aud !== GOOGLE_TOKEN_URL && claims.aud !== this.tokenUrl()) return refuse('invalid_grant', 'Invalid JWT: audience is not the token endpoint.');
    const now = nowSeconds();
    const iat = Number(claims.iat);
    const exp = Number(claims.exp);
    if (!Number.isFinite(iat) || !Number.isFinite(exp) || exp - iat > 3600 || exp <= now || iat > now + 300) {
      return refuse('invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.');
    }
    if (typeof claims.scope !== 'string' || claims.scope.trim() === '') return refuse('invalid_scope', 'Invalid OAuth scope or ID token audience provided.');
    return { status: 200, body: this.issue(signer.account, claims.scope.split(/\s+/)) };
  }

  /** A new access token for the account, in the token endpoint's answer shape. */
  issue(account: ServiceAccount, scopes: string[]): { access_token: string; expires_in: number; token_type: 'Bearer' } {
    const token = `ya29.emulator-${randomUUID()}`;
    const ttl = this.ttlSeconds();
    this.tokens.set(token, { account, scopes, expiresAt: Date.now() + ttl * 1000 });
    return { access_token: token, expires_in: ttl, token_type: 'Bearer' };
  }
}

/** POST /token: form-encoded, so it is served apart from the JSON API, but logged and faulted with it (op "token"). */
export class TokenEndpoint implements Mount {
  constructor(
    readonly prefix: string,
    private readonly accounts: Accounts,
    private readonly requests: RecordLog<RequestRecord>,
    private readonly faults: FaultInjector<GceOp>,
  ) {}

  serve(req: IncomingMessage, res: ServerResponse, path: string): void {
    const record = this.requests.push({ time: Date.now(), method: req.method ?? 'GET', path: `${this.prefix}${path === '/' ? '' : path}`, op: 'token', status: 0, account: undefined });
    const fault = this.faults.pick('token', undefined);
    if (fault) record.fault = fault.mode;
    readBody(req)
      .then((text): Reply => {
        if (fault?.mode === 'status') return { status: fault.status ?? 500, body: { error: fault.code ?? 'internal_failure', error_description: fault.message ?? 'Injected failure.' } };
        if (req.method !== 'POST' || path !== '/') return { status: 404, body: { error: 'not_found', error_description: 'Use POST on the token endpoint.' } };
        return this.accounts.grant(new URLSearchParams(text));
      })
      .then(
        (reply) => {
          record.status = reply.status;
          sendJson(res, reply);
        },
        () => sendJson(res, { status: 400, body: { error: 'invalid_request', error_description: 'Unreadable request.' } }),
      );
  }
}
