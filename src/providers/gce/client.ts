// Compute Engine v1 over plain REST (no @google-cloud/compute, whose current
// major needs Node 22): the calls of ComputeInstances, with an OAuth access
// token from the service-account key or the metadata server, answers validated with zod, failures
// typed (errors.ts). No token or key reaches a message.
import { z } from 'zod';
import { ProviderError } from '../errors.js';
import { sanitize, sendRest } from '../rest.js';
import { COMPUTE_SCOPE, GoogleTokenSource, type AccessTokens, type ServiceAccountKey } from './auth.js';
import { errorForAnswer, errorForOperation, type Placement } from './errors.js';
import type { ComputeInstances, GceInstance, GceInstanceSpec, GceOperation, InstanceFilter, InstanceListing } from './types.js';

export const COMPUTE_ENDPOINT = 'https://compute.googleapis.com/compute/v1';
export const HOST_SCOPES = ['https://www.googleapis.com/auth/logging.write', 'https://www.googleapis.com/auth/monitoring.write'];
const HOST_KEY_TYPES = /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521))$/;
/** operations.wait holds a request up to 2 minutes. */
const WAIT_TIMEOUT_MS = 150_000;
/**
 * A bound on the pages of one listing, so that an API handing out page tokens
 * without end cannot hold a check forever. 100 pages of 500 is 50,000 VMs
 * under one target's labels, far past any project's instance quota.
 */
export const MAX_PAGES = 100;

export interface GceClientOptions {
  /** A service-account key, or `tokens`. */
  key?: ServiceAccountKey;
  /** Where tokens come from without a key (the metadata server). */
  tokens?: AccessTokens;
  /** Default: the key's project; required with `tokens`. */
  project?: string;
  /** Default COMPUTE_ENDPOINT. */
  endpoint?: string;
  /** Default Google's token endpoint. */
  tokenUrl?: string;
  /** Per request (operations.wait gets longer). Default 30000. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** instances.list page size (default 500, the most Compute Engine gives). */
  pageSize?: number;
  /** Called once per call with its operation and the HTTP status, or "lost" when no answer came. */
  onResult?: (operation: string, code: string) => void;
}

const OperationSchema = z
  .object({
    name: z.string(),
    zone: z.string().default(''),
    operationType: z.string().default(''),
    status: z.enum(['PENDING', 'RUNNING', 'DONE']),
    targetLink: z.string().default(''),
    error: z.object({ errors: z.array(z.object({ code: z.string().optional(), message: z.string().optional() }).passthrough()).default([]) }).optional(),
    httpErrorStatusCode: z.number().optional(),
  })
  .passthrough();
type ApiOperation = z.infer<typeof OperationSchema>;

const InstanceSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    zone: z.string().default(''),
    machineType: z.string().default(''),
    status: z.string(),
    labels: z.record(z.string(), z.string()).default({}),
    scheduling: z.object({ provisioningModel: z.string().optional(), preemptible: z.boolean().optional() }).passthrough().default({}),
    networkInterfaces: z.array(z.object({ networkIP: z.string().optional(), accessConfigs: z.array(z.object({ natIP: z.string().optional() }).passthrough()).optional() }).passthrough()).default([]),
    creationTimestamp: z.string().optional(),
  })
  .passthrough();

const lastSegment = (link: string) => link.slice(link.lastIndexOf('/') + 1);

function toInstance(i: z.infer<typeof InstanceSchema>): GceInstance {
  const nic = i.networkInterfaces[0];
  const externalAddress = nic?.accessConfigs?.find((a) => a.natIP)?.natIP;
  return {
    id: i.id,
    name: i.name,
    zone: lastSegment(i.zone),
    machineType: lastSegment(i.machineType),
    status: i.status,
    labels: i.labels,
    spot: i.scheduling.provisioningModel === 'SPOT' || i.scheduling.preemptible === true,
    address: externalAddress ?? nic?.networkIP,
    internalAddress: nic?.networkIP,
    externalAddress,
    creationTimestamp: i.creationTimestamp,
  };
}

function toOperation(o: ApiOperation): GceOperation {
  return { name: o.name, zone: lastSegment(o.zone), operationType: o.operationType, status: o.status, target: lastSegment(o.targetLink) };
}

/**
 * The `filter` of instances.list and aggregatedList, in the comparison form
 * (AIP-160): Compute Engine cannot combine regular-expression constraints on
 * more than one field, so the labels are compared for equality and a name
 * prefix is applied to the answer instead (matchesFilter). The parameter's
 * description wants each of several expressions in parentheses, ANDed when
 * nothing joins them: `(labels.a = "x") (labels.b = "y")`.
 */
export function filterExpression(f: InstanceFilter): string {
  return Object.entries(f.labels ?? {})
    .map(([k, v]) => `(labels.${k} = ${JSON.stringify(v)})`)
    .join(' ');
}

const matchesFilter = (f: InstanceFilter) => (i: GceInstance) => !f.namePrefix || i.name.startsWith(f.namePrefix);

/** The zone of an aggregatedList scope ("zones/us-central1-a"), or undefined for another kind of scope. */
function zoneOfScope(scope: string): string | undefined {
  const m = /(?:^|\/)zones\/([^/]+)$/.exec(scope);
  return m?.[1];
}

const WarningSchema = z
  .object({ code: z.string().default(''), message: z.string().default(''), data: z.array(z.object({ key: z.string().optional(), value: z.string().optional() }).passthrough()).default([]) })
  .passthrough();

export class GceClient implements ComputeInstances {
  private readonly base: string;
  private readonly tokens: AccessTokens;

  constructor(private readonly opts: GceClientOptions) {
    const project = opts.project ?? opts.key?.projectId;
    if (!project) throw new Error('GceClient needs a project when it has no service-account key');
    this.base = `${(opts.endpoint ?? COMPUTE_ENDPOINT).replace(/\/+$/, '')}/projects/${encodeURIComponent(project)}`;
    if (opts.tokens) this.tokens = opts.tokens;
    else if (opts.key) this.tokens = new GoogleTokenSource({ key: opts.key, scopes: [COMPUTE_SCOPE], tokenUrl: opts.tokenUrl, timeoutMs: opts.timeoutMs, fetch: opts.fetch });
    else throw new Error('GceClient needs a service-account key or a token source');
  }

  async insert(spec: GceInstanceSpec, signal?: AbortSignal): Promise<GceOperation> {
    if (spec.serviceAccountEmail.endsWith('-compute@developer.gserviceaccount.com')) {
      throw new ProviderError('InvalidRequest', `the host service account ${spec.serviceAccountEmail} is the project's default compute account; give hosts a service account of their own`, { nothingMade: true });
    }
    const placement = { zone: spec.zone, machineType: spec.machineType };
    const body = {
      name: spec.name,
      machineType: `zones/${spec.zone}/machineTypes/${spec.machineType}`,
      labels: spec.labels,
      disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: spec.image, ...(spec.diskSizeGb ? { diskSizeGb: String(spec.diskSizeGb) } : {}) } }],
      // Without an access config the VM has no external address, as organisation policy vmExternalIpAccess may demand.
      networkInterfaces: [
        {
          network: spec.network ?? 'global/networks/default',
          ...(spec.subnetwork ? { subnetwork: spec.subnetwork } : {}),
          ...(spec.externalIP === false ? {} : { accessConfigs: [{ type: 'ONE_TO_ONE_NAT', name: 'External NAT' }] }),
        },
      ],
      // Only the controller's key may log in (project keys and OS Login off); the guest agent publishes host keys for pinning.
      metadata: {
        items: [
          { key: 'ssh-keys', value: `${spec.sshUser}:${spec.sshPublicKey.trim()}` },
          { key: 'block-project-ssh-keys', value: 'TRUE' },
          { key: 'enable-oslogin', value: 'FALSE' },
          { key: 'enable-guest-attributes', value: 'TRUE' },
        ],
      },
      serviceAccounts: [{ email: spec.serviceAccountEmail, scopes: HOST_SCOPES }],
      // maxRunDuration bounds the VM's life in Compute Engine itself, so that a VM outlives no controller for long.
      scheduling: {
        ...(spec.spot
          ? { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', automaticRestart: false, onHostMaintenance: 'TERMINATE' }
          : { provisioningModel: 'STANDARD', automaticRestart: true, onHostMaintenance: 'MIGRATE' }),
        ...(spec.maxRunDurationSeconds ? { maxRunDuration: { seconds: String(Math.floor(spec.maxRunDurationSeconds)) }, instanceTerminationAction: 'DELETE' } : {}),
      },
    };
    const json = await this.call('POST', `/zones/${spec.zone}/instances?requestId=${encodeURIComponent(spec.requestId)}`, body, `insert ${spec.zone}/${spec.name}`, signal, placement);
    return { ...toOperation(OperationSchema.parse(json)), machineType: spec.machineType };
  }

  async waitOperation(op: Pick<GceOperation, 'zone' | 'name' | 'machineType'>, signal?: AbortSignal): Promise<GceOperation> {
    for (;;) {
      const json = await this.call('POST', `/zones/${op.zone}/operations/${encodeURIComponent(op.name)}/wait`, undefined, `wait ${op.zone}/${op.name}`, signal, undefined, WAIT_TIMEOUT_MS);
      const o = OperationSchema.parse(json);
      if (o.status === 'DONE') return this.settled(o, op.machineType);
    }
  }

  async getOperation(zone: string, name: string, signal?: AbortSignal): Promise<GceOperation> {
    const o = OperationSchema.parse(await this.call('GET', `/zones/${zone}/operations/${encodeURIComponent(name)}`, undefined, `get operation ${zone}/${name}`, signal));
    return o.status === 'DONE' ? this.settled(o) : toOperation(o);
  }

  async get(zone: string, name: string, signal?: AbortSignal): Promise<GceInstance> {
    return toInstance(InstanceSchema.parse(await this.call('GET', `/zones/${zone}/instances/${encodeURIComponent(name)}`, undefined, `get ${zone}/${name}`, signal)));
  }

  async list(zone: string, filter: InstanceFilter, signal?: AbortSignal): Promise<GceInstance[]> {
    const out: GceInstance[] = [];
    const expr = filterExpression(filter);
    await this.pages(`list ${zone}`, async (pageToken) => {
      const q = new URLSearchParams({ maxResults: String(this.opts.pageSize ?? 500), ...(expr ? { filter: expr } : {}), ...(pageToken ? { pageToken } : {}) });
      const page = z
        .object({ items: z.array(InstanceSchema).default([]), nextPageToken: z.string().optional() })
        .passthrough()
        .parse(await this.call('GET', `/zones/${zone}/instances?${q}`, undefined, `list ${zone}`, signal));
      out.push(...page.items.map(toInstance).filter(matchesFilter(filter)));
      return page.nextPageToken;
    });
    return out;
  }

  async listAll(filter: InstanceFilter, signal?: AbortSignal): Promise<InstanceListing> {
    const instances: GceInstance[] = [];
    const unreachable = new Map<string, string>();
    const expr = filterExpression(filter);
    await this.pages('aggregatedList', async (pageToken) => {
      // No returnPartialSuccess: the pinned discovery document (revision 20261106,
      // e2e/fakes/gce/discovery.json) does not declare it for instances.aggregatedList, though
      // the method's description still recommends it. A zone that cannot be read comes back
      // as a scope warning and in `unreachables`, both in the response schema, and is read below.
      const q = new URLSearchParams({ maxResults: String(this.opts.pageSize ?? 500), ...(expr ? { filter: expr } : {}), ...(pageToken ? { pageToken } : {}) });
      const page = z
        .object({
          items: z.record(z.string(), z.object({ instances: z.array(InstanceSchema).default([]), warning: WarningSchema.optional() }).passthrough()).default({}),
          nextPageToken: z.string().optional(),
          unreachables: z.array(z.string()).default([]),
        })
        .passthrough()
        .parse(await this.call('GET', `/aggregated/instances?${q}`, undefined, 'aggregatedList', signal));
      for (const [scope, list] of Object.entries(page.items)) {
        instances.push(...list.instances.map(toInstance).filter(matchesFilter(filter)));
        // NO_RESULTS_ON_PAGE is an empty zone; any other warning means the zone's instances may be missing.
        const zone = zoneOfScope(scope);
        if (zone && list.warning && list.warning.code !== 'NO_RESULTS_ON_PAGE') unreachable.set(zone, `${list.warning.code}: ${sanitize(list.warning.message)}`.slice(0, 300));
      }
      for (const scope of page.unreachables) {
        const zone = zoneOfScope(scope);
        if (zone && !unreachable.has(zone)) unreachable.set(zone, 'listed as unreachable');
      }
      return page.nextPageToken;
    });
    return { instances, unreachable: [...unreachable].map(([zone, message]) => ({ zone, message })) };
  }

  async delete(zone: string, name: string, requestId: string, signal?: AbortSignal): Promise<GceOperation> {
    const json = await this.call('DELETE', `/zones/${zone}/instances/${encodeURIComponent(name)}?requestId=${encodeURIComponent(requestId)}`, undefined, `delete ${zone}/${name}`, signal);
    return toOperation(OperationSchema.parse(json));
  }

  async hostKeys(zone: string, name: string, signal?: AbortSignal): Promise<string[]> {
    const json = await this.call('GET', `/zones/${zone}/instances/${encodeURIComponent(name)}/getGuestAttributes?queryPath=${encodeURIComponent('hostkeys/')}`, undefined, `host keys of ${zone}/${name}`, signal);
    const items = z
      .object({ queryValue: z.object({ items: z.array(z.object({ namespace: z.string().optional(), key: z.string(), value: z.string() }).passthrough()).default([]) }).optional() })
      .passthrough()
      .parse(json).queryValue?.items ?? [];
    // Only well-formed keys: these lines end up as the only host keys the controller trusts.
    return items.filter((i) => (i.namespace ?? 'hostkeys') === 'hostkeys' && HOST_KEY_TYPES.test(i.key) && /^[A-Za-z0-9+/]+={0,2}$/.test(i.value)).map((i) => `${i.key} ${i.value}`);
  }

  /**
   * Reads pages until one has no nextPageToken. A token seen before, or more
   * than MAX_PAGES pages, is an error rather than a shorter list: the callers
   * treat a listing as every VM there is, and a VM left out looks gone.
   */
  private async pages(what: string, read: (pageToken: string | undefined) => Promise<string | undefined>): Promise<void> {
    const seen = new Set<string>();
    let pageToken: string | undefined;
    for (let page = 1; ; page++) {
      pageToken = await read(pageToken);
      if (!pageToken) return;
      if (seen.has(pageToken)) throw new ProviderError('Unknown', `Compute Engine ${what}: page ${page} handed back a page token an earlier page gave, so the listing would never end; stopped`);
      if (page >= MAX_PAGES) throw new ProviderError('Unknown', `Compute Engine ${what}: still more pages after ${MAX_PAGES}, the most one listing reads; stopped rather than read on`);
      seen.add(pageToken);
    }
  }

  private settled(o: ApiOperation, machineType?: string): GceOperation {
    if (o.error && o.error.errors.length > 0) {
      const placement: Placement | undefined = o.operationType === 'insert' ? { zone: lastSegment(o.zone), machineType: machineType ?? '' } : undefined;
      throw errorForOperation(`${o.operationType || 'operation'} ${lastSegment(o.zone)}/${lastSegment(o.targetLink)}`, o, placement);
    }
    return toOperation(o);
  }

  private async call(method: string, path: string, body: unknown, what: string, signal: AbortSignal | undefined, placement?: Placement, timeoutMs?: number): Promise<unknown> {
    const operation = what.split(' ')[0]!;
    // One retry with a fresh token when the API refuses the cached one (revoked, or expired early).
    for (let attempt = 0; ; attempt++) {
      const token = await this.tokens.token(signal);
      let answer;
      try {
        answer = await sendRest({ method, url: `${this.base}${path}`, headers: { authorization: `Bearer ${token}` }, body, what: `Compute Engine ${what}`, timeoutMs: timeoutMs ?? this.opts.timeoutMs ?? 30_000, signal, fetch: this.opts.fetch });
      } catch (err) {
        this.opts.onResult?.(operation, 'lost');
        throw err;
      }
      this.opts.onResult?.(operation, String(answer.status));
      if (answer.status >= 200 && answer.status < 300) {
        if (answer.json === undefined) throw new ProviderError('Unknown', `Compute Engine ${what}: HTTP ${answer.status} with a body that is not JSON`, { answerLost: true });
        return answer.json;
      }
      if (answer.status === 401 && attempt === 0) {
        this.tokens.invalidate();
        continue;
      }
      throw errorForAnswer(what, answer.status, answer.json, answer.headers, placement);
    }
  }
}
