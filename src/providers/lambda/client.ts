// A small client for Lambda Cloud's public v1 API: the calls Leasehold makes,
// answers validated with zod, every failure turned into a typed
// ProviderError. The API key is sent as a bearer token and never appears in
// an error message.
import { z } from 'zod';
import { ProviderError, type ProviderErrorKind } from '../errors.js';
import { abortableSleep } from './pacer.js';
import { readAnswer, refuseRedirect } from '../rest.js';

export interface LambdaInstanceType {
  name: string;
  description: string;
  gpuDescription: string;
  priceCentsPerHour: number;
  vcpus: number;
  memoryGiB: number;
  storageGiB: number;
  gpus: number;
  /** Regions with capacity for this type now, as Lambda lists them. */
  regions: string[];
}

export interface LambdaInstance {
  id: string;
  name?: string | undefined;
  ip?: string | undefined;
  status: string;
  region?: string | undefined;
  instanceType?: string | undefined;
}

export interface LambdaFileSystem {
  name: string;
  region: string;
}

export interface LaunchParams {
  region: string;
  instanceType: string;
  sshKeyNames: string[];
  fileSystemNames?: string[] | undefined;
  name: string;
  userData?: string | undefined;
}

export interface LambdaClientOptions {
  endpoint: string;
  apiKey: string;
  /** Per request. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Called once per call with its operation and the HTTP status, or "lost" when no answer came. */
  onResult?: (operation: string, code: string) => void;
  /** Waited on before every request: the account's share of Lambda's general request limit (one for every client of the account). */
  spacer?: { turn(signal?: AbortSignal): Promise<void> };
}

/** How often a request other than a launch is sent again after a 429. */
const RATE_LIMIT_RETRIES = 3;

const ErrorBody = z.object({
  error: z.object({ code: z.string().optional(), message: z.string().optional(), suggestion: z.string().optional() }).passthrough(),
});

const InstanceTypesBody = z.object({
  data: z.record(
    z.string(),
    z.object({
      instance_type: z.object({
        name: z.string(),
        description: z.string().default(''),
        gpu_description: z.string().default(''),
        price_cents_per_hour: z.number(),
        specs: z.object({
          vcpus: z.number().default(0),
          memory_gib: z.number().default(0),
          storage_gib: z.number().default(0),
          gpus: z.number().default(0),
        }),
      }),
      regions_with_capacity_available: z.array(z.object({ name: z.string() }).passthrough()).default([]),
    }),
  ),
});

const InstanceSchema = z
  .object({
    id: z.string(),
    name: z.string().nullish(),
    ip: z.string().nullish(),
    status: z.string(),
    region: z.object({ name: z.string() }).passthrough().nullish(),
    instance_type: z.object({ name: z.string() }).passthrough().nullish(),
  })
  .passthrough();

const SshKeySchema = z.object({ id: z.string(), name: z.string(), public_key: z.string() }).passthrough();

export class LambdaClient {
  private readonly base: string;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(private readonly opts: LambdaClientOptions) {
    this.base = opts.endpoint.replace(/\/+$/, '');
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.fetchImpl = opts.fetch ?? fetch;
  }

  async listInstanceTypes(signal?: AbortSignal): Promise<LambdaInstanceType[]> {
    const body = InstanceTypesBody.parse(await this.call('GET', '/instance-types', undefined, signal, 'list-instance-types'));
    return Object.entries(body.data).map(([key, v]) => ({
      name: v.instance_type.name || key,
      description: v.instance_type.description,
      gpuDescription: v.instance_type.gpu_description,
      priceCentsPerHour: v.instance_type.price_cents_per_hour,
      vcpus: v.instance_type.specs.vcpus,
      memoryGiB: v.instance_type.specs.memory_gib,
      storageGiB: v.instance_type.specs.storage_gib,
      gpus: v.instance_type.specs.gpus,
      regions: v.regions_with_capacity_available.map((r) => r.name),
    }));
  }

  /** Returns the IDs of the instances launched; `onSend` is called just before the request goes out. */
  async launch(p: LaunchParams, signal?: AbortSignal, onSend?: () => void): Promise<string[]> {
    const body = {
      region_name: p.region,
      instance_type_name: p.instanceType,
      ssh_key_names: p.sshKeyNames,
      file_system_names: p.fileSystemNames ?? [],
      name: p.name,
      ...(p.userData ? { user_data: p.userData } : {}),
    };
    const answer = z.object({ data: z.object({ instance_ids: z.array(z.string()) }) }).parse(await this.call('POST', '/instance-operations/launch', body, signal, 'launch', onSend));
    return answer.data.instance_ids;
  }

  async listInstances(signal?: AbortSignal): Promise<LambdaInstance[]> {
    const answer = z.object({ data: z.array(InstanceSchema) }).parse(await this.call('GET', '/instances', undefined, signal, 'list-instances'));
    return answer.data.map(toInstance);
  }

  async getInstance(id: string, signal?: AbortSignal): Promise<LambdaInstance> {
    const answer = z.object({ data: InstanceSchema }).parse(await this.call('GET', `/instances/${encodeURIComponent(id)}`, undefined, signal, 'get-instance'));
    return toInstance(answer.data);
  }

  async terminate(ids: string[], signal?: AbortSignal): Promise<void> {
    await this.call('POST', '/instance-operations/terminate', { instance_ids: ids }, signal, 'terminate');
  }

  async listSshKeys(signal?: AbortSignal): Promise<{ id: string; name: string; publicKey: string }[]> {
    const answer = z.object({ data: z.array(SshKeySchema) }).parse(await this.call('GET', '/ssh-keys', undefined, signal, 'list-ssh-keys'));
    return answer.data.map((k) => ({ id: k.id, name: k.name, publicKey: k.public_key }));
  }

  async addSshKey(name: string, publicKey: string, signal?: AbortSignal): Promise<void> {
    await this.call('POST', '/ssh-keys', { name, public_key: publicKey }, signal, 'add-ssh-key');
  }

  async listFileSystems(signal?: AbortSignal): Promise<LambdaFileSystem[]> {
    const answer = z
      .object({ data: z.array(z.object({ name: z.string(), region: z.object({ name: z.string() }).passthrough() }).passthrough()) })
      .parse(await this.call('GET', '/file-systems', undefined, signal, 'list-file-systems'));
    return answer.data.map((f) => ({ name: f.name, region: f.region.name }));
  }

  private async call(method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal | undefined, operation: string, onSend?: () => void): Promise<unknown> {
    // A 429 means the request was not done: anything but a launch (whose
    // turns its pacer keeps) is sent again after the wait Lambda asks for.
    for (let refused = 0; ; refused++) {
      try {
        await this.opts.spacer?.turn(signal);
      } catch (err) {
        // Nothing was sent: the caller gave up while waiting its turn.
        throw new ProviderError('Timeout', `Lambda ${operation}: cancelled before it was sent`, { cause: err });
      }
      onSend?.();
      try {
        const out = await this.send(method, path, body, signal);
        this.opts.onResult?.(operation, '200');
        return out;
      } catch (err) {
        this.opts.onResult?.(operation, err instanceof LambdaApiError ? String(err.status) : 'lost');
        if (!(err instanceof LambdaApiError) || err.status !== 429 || operation === 'launch' || refused >= RATE_LIMIT_RETRIES) throw err;
        await abortableSleep(Math.min(err.retryAfterMs ?? 1000, 10_000), signal).catch(() => {
          throw err;
        });
      }
    }
  }

  private async send(method: 'GET' | 'POST', path: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
    const what = `${method} ${path.replace(/\/instances\/[^/]+$/, '/instances/{id}')}`;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let res: Response;
    try {
      res = await this.fetchImpl(`${this.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.opts.apiKey}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: combined,
        // The API key never follows a redirect to wherever the server points.
        redirect: 'manual',
      });
    } catch (err) {
      if (timeout.aborted) {
        throw new ProviderError('Timeout', `Lambda ${what}: no answer within ${Math.round(this.timeoutMs / 1000)}s`, { answerLost: true, cause: err });
      }
      if (signal?.aborted) throw new ProviderError('Timeout', `Lambda ${what}: cancelled`, { answerLost: true, cause: err });
      throw new ProviderError('Unknown', `Lambda ${what}: the connection failed before an answer came back (${causeText(err)})`, { answerLost: true, cause: err });
    }
    refuseRedirect(res, `${this.base}${path}`, `Lambda ${what}`);
    const text = await readAnswer(res, `Lambda ${what}`, `${this.base}${path}`);
    let json: unknown;
    try {
      json = text === '' ? {} : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (res.ok) {
      if (json === undefined) throw new ProviderError('Unknown', `Lambda ${what}: HTTP ${res.status} with a body that is not JSON`, { answerLost: true });
      return json;
    }
    throw errorFor(what, res.status, json, text, res.headers.get('retry-after'));
  }
}

function toInstance(i: z.infer<typeof InstanceSchema>): LambdaInstance {
  return { id: i.id, name: i.name ?? undefined, ip: i.ip ?? undefined, status: i.status, region: i.region?.name, instanceType: i.instance_type?.name };
}

function causeText(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}

/** Retry-After in milliseconds, when the answer gave one in seconds. */
export function retryAfterMs(err: unknown): number | undefined {
  return err instanceof LambdaApiError ? err.retryAfterMs : undefined;
}

/** A ProviderError that also carries Lambda's error code and any Retry-After. */
export class LambdaApiError extends ProviderError {
  constructor(
    kind: ProviderErrorKind,
    message: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly retryAfterMs: number | undefined,
    opts: { retryable?: boolean; answerLost?: boolean } = {},
  ) {
    super(kind, message, opts);
  }
}

function errorFor(what: string, status: number, json: unknown, text: string, retryAfter: string | null): LambdaApiError {
  const parsed = ErrorBody.safeParse(json);
  const code = parsed.success ? parsed.data.error.code : undefined;
  // Not every error comes from Lambda's API: its rate limits are enforced in
  // front of it and answer with Cloudflare's plain "error code: 1015". A short
  // line of text like that says more than the status alone; a page does not.
  const plain = !parsed.success && text.length <= 200 && !text.includes('<') && text.trim() !== '' ? text.trim() : undefined;
  const detail = parsed.success
    ? [parsed.data.error.message, parsed.data.error.suggestion].filter(Boolean).join(' ')
    : (plain ?? `HTTP ${status}`);
  const after = retryAfter && /^\d+(\.\d+)?$/.test(retryAfter) ? Math.round(Number(retryAfter) * 1000) : undefined;
  const msg = `Lambda ${what}: HTTP ${status}${code ? ` ${code}` : ''}: ${sanitize(detail)}`;
  let kind: ProviderErrorKind;
  let retryable: boolean | undefined;
  if (status === 401 || status === 403 || code === 'global/invalid-api-key') kind = 'Unauthorized';
  // The status decides: Lambda's description gives no code for a refusal by
  // its rate limits, and its docs say those come from Cloudflare (HTTP 429,
  // "error code: 1015"), so a code in the body is nothing to wait for.
  else if (status === 429) kind = 'RateLimited';
  else if (code?.endsWith('insufficient-capacity')) kind = 'InsufficientCapacity';
  else if (status === 404 || code === 'global/object-does-not-exist') kind = 'NotFound';
  else if (status >= 500) kind = 'Unknown';
  else {
    kind = 'InvalidRequest';
    retryable = code === 'global/quota-exceeded' ? true : undefined;
  }
  // A 5xx may come from a gateway in front of an API that did the work.
  return new LambdaApiError(kind, msg, status, code, after, { ...(retryable === undefined ? {} : { retryable }), answerLost: status >= 500 });
}

/** Error text from the provider, made safe for events and status: one line, bounded. */
function sanitize(s: string): string {
  return s.replace(/[\x00-\x1f\x7f]+/g, ' ').slice(0, 512);
}
