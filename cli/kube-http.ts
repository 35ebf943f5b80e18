// The CLI's own API client: the few Lease and Offer calls it makes, as plain
// HTTPS requests on one kept-alive connection. A run on a Ready Lease makes
// one list and one patch; @kubernetes/client-node took longer to load (about
// 0.4 s) than the whole run takes to reach the machine.
import http from 'node:http';
import https from 'node:https';
import { GROUP, VERSION } from '../src/api/group.js';
import type { Lease } from '../src/api/lease.js';
import type { Offer } from '../src/api/offer.js';
import { statusCode } from '../src/kube/errors.js';
import { timed, type LeaseAPI } from './leaseapi.js';
import { runExecPlugin, type Endpoint } from './kubeconfig.js';

/** An answer other than 2xx; `code` and `body` as client-node's ApiException has them, so statusCode and apiErrorText read both alike. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: number,
    readonly body: string,
    method: string,
    path: string,
  ) {
    super(`${method} ${path}: HTTP ${code}`);
  }
}

interface Session {
  agent: http.Agent;
  headers: Record<string, string | string[]>;
}

const BASE = `/apis/${GROUP}/${VERSION}`;
const leasesPath = (ns: string | undefined) => (ns === undefined ? `${BASE}/leases` : `${BASE}/namespaces/${encodeURIComponent(ns)}/leases`);
const leasePath = (ns: string, name: string) => `${leasesPath(ns)}/${encodeURIComponent(name)}`;

export class HttpLeaseAPI implements LeaseAPI {
  private session: Promise<Session> | undefined;

  constructor(private readonly endpoint: Endpoint) {}

  async get(namespace: string, name: string): Promise<Lease | undefined> {
    try {
      return (await this.call('GET', leasePath(namespace, name))) as Lease;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async list(namespace: string | undefined): Promise<Lease[]> {
    return ((await this.call('GET', leasesPath(namespace))) as { items: Lease[] }).items;
  }

  async create(lease: Lease): Promise<Lease> {
    return (await this.call('POST', leasesPath(lease.metadata!.namespace!), lease)) as Lease;
  }

  async patch(namespace: string, name: string, body: unknown): Promise<Lease> {
    return (await this.call('PATCH', leasePath(namespace, name), body, 'application/merge-patch+json')) as Lease;
  }

  async delete(namespace: string, name: string, resourceVersion?: string): Promise<boolean> {
    try {
      await this.call('DELETE', leasePath(namespace, name), resourceVersion ? { preconditions: { resourceVersion } } : undefined);
      return true;
    } catch (err) {
      if (statusCode(err) === 404) return false;
      throw err;
    }
  }

  async offers(): Promise<Offer[]> {
    return ((await this.call('GET', `${BASE}/offers`)) as { items: Offer[] }).items;
  }

  private call(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<unknown> {
    return timed(this.request(method, path, body, contentType));
  }

  private async request(method: string, path: string, body: unknown, contentType: string): Promise<unknown> {
    const { agent, headers } = await (this.session ??= this.open());
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const url = new URL(this.endpoint.server + path);
    return new Promise((resolve, reject) => {
      const req = (url.protocol === 'http:' ? http : https).request(
        url,
        { method, agent, headers: { ...headers, ...(payload === undefined ? {} : { 'Content-Type': contentType, 'Content-Length': String(Buffer.byteLength(payload)) }) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const code = res.statusCode ?? 0;
            if (code < 200 || code > 299) return reject(new ApiError(code, text, method, path));
            try {
              resolve(text ? JSON.parse(text) : undefined);
            } catch (err) {
              reject(err);
            }
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** The connection's TLS material and the request headers, with the exec plugin's credential when the kubeconfig names one. */
  private async open(): Promise<Session> {
    const e = this.endpoint;
    const fromExec = e.exec ? await runExecPlugin(e.exec) : {};
    const token = fromExec.token ?? e.token;
    const cert = fromExec.cert ?? e.cert;
    const key = fromExec.key ?? e.key;
    const headers: Session['headers'] = { Accept: 'application/json', 'User-Agent': 'leasehold-cli' };
    if (token) headers.Authorization = `Bearer ${token}`;
    else if (e.basic) headers.Authorization = `Basic ${Buffer.from(`${e.basic.username}:${e.basic.password}`).toString('base64')}`;
    if (e.impersonate) {
      headers['Impersonate-User'] = e.impersonate.user;
      if (e.impersonate.groups.length) headers['Impersonate-Group'] = e.impersonate.groups;
    }
    const agent = e.server.startsWith('http:')
      ? new http.Agent({ keepAlive: true })
      : new https.Agent({ keepAlive: true, rejectUnauthorized: !e.insecure, ...(e.ca ? { ca: e.ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}), ...(e.servername ? { servername: e.servername } : {}) });
    return { agent, headers };
  }
}
