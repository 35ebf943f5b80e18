// Who a GitHub request comes from: a personal access token, an installation
// token of the emulator's GitHub App, or the App itself (an RS256 JWT signed
// with the App's private key, checked as GitHub checks it: issuer the App ID,
// at most 10 minutes long, not expired).
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { nowSeconds, verifyJwt } from '../kit/jwt.js';
import type { GitHubApp } from './types.js';

export interface Caller {
  /** "user:…", "installation:…" or "app:…": what the request log and rate limits key on. */
  id: string;
  kind: 'user' | 'installation' | 'app';
}

export class GitHubAuth {
  readonly app: GitHubApp;
  readonly firstToken: string;
  private readonly appKey: KeyObject;
  private readonly tokens = new Map<string, { caller: Caller; expiresAt: number }>();
  private userSeq = 0;

  constructor(firstToken: string | undefined) {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.appKey = publicKey;
    this.app = { appId: 100_000 + Math.floor(Math.random() * 900_000), installationId: 40_000_000 + Math.floor(Math.random() * 1_000_000), privateKey: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() };
    this.firstToken = this.addToken(firstToken);
  }

  addToken(token = `ghp_${randomBytes(18).toString('hex')}`): string {
    this.tokens.set(token, { caller: { id: `user:bot-${++this.userSeq}`, kind: 'user' }, expiresAt: Infinity });
    return token;
  }

  issueInstallationToken(ttlMs: number): { token: string; expires_at: string } {
    const token = `ghs_${randomBytes(18).toString('hex')}`;
    const expiresAt = Date.now() + ttlMs;
    this.tokens.set(token, { caller: { id: `installation:${this.app.installationId}`, kind: 'installation' }, expiresAt });
    return { token, expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z') };
  }

  callerOf(credential: string): Caller | undefined {
    const t = this.tokens.get(credential);
    if (t) return t.expiresAt > Date.now() ? t.caller : undefined;
    if (credential.split('.').length !== 3) return undefined;
    const v = verifyJwt(credential, [this.appKey]);
    if ('error' in v) return undefined;
    const { iss, iat, exp } = v.claims;
    const now = nowSeconds();
    if (String(iss) !== String(this.app.appId) || typeof iat !== 'number' || typeof exp !== 'number') return undefined;
    if (exp <= now || exp - iat > 600 || iat > now + 60) return undefined;
    return { id: `app:${this.app.appId}`, kind: 'app' };
  }
}
