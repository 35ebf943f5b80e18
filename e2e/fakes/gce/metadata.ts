// The metadata server of a Compute Engine VM or a GKE pod with Workload
// Identity, as far as credentials go: the access token and email of the
// attached service account. Served at /computeMetadata/v1 on the emulator's
// origin, so GCE_METADATA_HOST=<host:port> points a client at it. As Google
// documents it: a request without `Metadata-Flavor: Google`, or with
// `X-Forwarded-For` (it came through a proxy), is refused with 403; every
// answer carries `Metadata-Flavor: Google`; no attached account is 404.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FaultInjector } from '../kit/faults.js';
import type { Mount } from '../kit/http.js';
import type { RecordLog } from '../kit/log.js';
import type { Accounts } from './auth.js';
import type { GceOp, RequestRecord } from './types.js';

export const METADATA_BASE = '/computeMetadata/v1';
const DEFAULT_ACCOUNT = '/instance/service-accounts/default';
/** What a GKE Workload Identity or default VM token carries unless `?scopes=` asks for others. */
const DEFAULT_SCOPES = ['https://www.googleapis.com/auth/cloud-platform'];

export class MetadataServer implements Mount {
  readonly prefix = METADATA_BASE;

  constructor(
    private readonly accounts: Accounts,
    /** The email of the attached service account; undefined: none is attached. */
    private readonly attached: () => string | undefined,
    private readonly requests: RecordLog<RequestRecord>,
    private readonly faults: FaultInjector<GceOp>,
  ) {}

  serve(req: IncomingMessage, res: ServerResponse, path: string, url: URL): void {
    req.resume();
    const op: GceOp | 'unknown' = path === `${DEFAULT_ACCOUNT}/token` ? 'metadata-token' : path === `${DEFAULT_ACCOUNT}/email` ? 'metadata-email' : 'unknown';
    const record = this.requests.push({ time: Date.now(), method: req.method ?? 'GET', path: `${this.prefix}${path}`, op, status: 0, account: undefined });
    const answer = (status: number, body: string, type = 'text/html; charset=UTF-8') => {
      record.status = status;
      res.writeHead(status, { 'metadata-flavor': 'Google', 'content-type': type, 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    const fault = op === 'unknown' ? undefined : this.faults.pick(op, undefined);
    if (fault) {
      record.fault = fault.mode;
      if (fault.mode === 'hang') return;
      if (fault.mode === 'drop') {
        res.destroy();
        return;
      }
      if (fault.mode === 'status') return answer(fault.status ?? 500, fault.message ?? 'Injected failure.');
    }
    if (req.headers['metadata-flavor'] !== 'Google') return answer(403, 'Missing required header "Metadata-Flavor": "Google"\n');
    if (req.headers['x-forwarded-for'] !== undefined) return answer(403, 'Request had a X-Forwarded-For header and was rejected.\n');
    if (req.method !== 'GET') return answer(405, 'Method not allowed.\n');
    const email = this.attached();
    const account = email === undefined ? undefined : this.accounts.list.find((a) => a.email === email);
    if (op === 'unknown' || !account) return answer(404, 'Not Found\n');
    record.account = account.email;
    if (op === 'metadata-email') return answer(200, account.email, 'application/text');
    const asked = url.searchParams.get('scopes');
    const scopes = asked ? asked.split(',').map((s) => s.trim()).filter(Boolean) : DEFAULT_SCOPES;
    answer(200, JSON.stringify(this.accounts.issue(account, scopes)), 'application/json');
  }
}
