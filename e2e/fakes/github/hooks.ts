// Repository and organization webhooks as GitHub keeps them: created,
// listed, read and deleted through the REST API, each sent a `ping` when it
// is created, and every event it subscribes to delivered as GitHub does
// (POST with X-GitHub-Event, X-GitHub-Delivery, X-GitHub-Hook-ID,
// X-Hub-Signature-256 when it has a secret, User-Agent GitHub-Hookshot/…,
// a 10 s timeout, no redirect followed). GitHub does not deliver a failed
// delivery again by itself: a person or a client asks for it (POST
// …/deliveries/{id}/attempts). Retrying on its own is an emulator option
// (`webhookRetry`), off by default.
import { createHmac, randomUUID } from 'node:crypto';
import { HttpError } from '../kit/http.js';
import type { ApiJob, HookDelivery, HookRetry } from './types.js';

export type HookScope = { kind: 'repository'; repo: string } | { kind: 'organization' };

export interface HookConfig {
  url: string;
  content_type: 'json' | 'form';
  insecure_ssl: '0' | '1';
  secret?: string;
}

interface HookState {
  id: number;
  scope: HookScope;
  active: boolean;
  events: string[];
  config: HookConfig;
  createdAt: string;
  updatedAt: string;
  last: { code: number | null; status: string; message: string | null };
}

const HOOKSHOT = 'GitHub-Hookshot/7e3b1a2';
const DELIVERY_TIMEOUT_MS = 10_000;

export class Hooks {
  private readonly hooks = new Map<number, HookState>();
  private readonly sent: HookDelivery[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private seq = 500;
  private deliverySeq = 9_000_000;

  constructor(
    private readonly org: string,
    private readonly origin: () => string,
    private readonly orgId: number,
    private readonly repoId: (repo: string) => number | undefined,
    private readonly settings: { webhookRetry: HookRetry | undefined },
  ) {}

  private base(scope: HookScope): string {
    return scope.kind === 'organization' ? `${this.origin()}/orgs/${this.org}/hooks` : `${this.origin()}/repos/${this.org}/${scope.repo}/hooks`;
  }

  view(h: HookState): Record<string, unknown> {
    const url = `${this.base(h.scope)}/${h.id}`;
    const config = { url: h.config.url, content_type: h.config.content_type, insecure_ssl: h.config.insecure_ssl, ...(h.config.secret ? { secret: '********' } : {}) };
    return {
      type: h.scope.kind === 'organization' ? 'Organization' : 'Repository',
      id: h.id,
      name: 'web',
      active: h.active,
      events: [...h.events],
      config,
      updated_at: h.updatedAt,
      created_at: h.createdAt,
      url,
      ...(h.scope.kind === 'repository' ? { test_url: `${url}/test` } : {}),
      ping_url: `${url}/pings`,
      deliveries_url: `${url}/deliveries`,
      ...(h.scope.kind === 'repository' ? { last_response: h.last } : {}),
    };
  }

  private same(a: HookScope, b: HookScope): boolean {
    return a.kind === b.kind && (a.kind === 'organization' || a.repo === (b as { repo: string }).repo);
  }

  private find(scope: HookScope, id: number): HookState {
    const h = this.hooks.get(id);
    if (!h || !this.same(h.scope, scope)) throw new HttpError(404, undefined, 'Not Found');
    return h;
  }

  /** POST …/hooks: as GitHub validates it (config.url required; name, when given, is web; events default to push). */
  create(scope: HookScope, body: unknown): Record<string, unknown> {
    const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    const config = (b.config && typeof b.config === 'object' ? b.config : undefined) as Record<string, unknown> | undefined;
    const invalid = (message: string) => new HttpError(422, undefined, `Validation Failed: ${message}`);
    if (b.name !== undefined && b.name !== 'web') throw invalid('name must be web');
    if (!config || typeof config.url !== 'string' || !/^https?:\/\//.test(config.url)) throw invalid('config.url must be an http(s) URL');
    const contentType = config.content_type ?? 'form';
    if (contentType !== 'json' && contentType !== 'form') throw invalid('config.content_type must be json or form');
    if (config.secret !== undefined && typeof config.secret !== 'string') throw invalid('config.secret must be a string');
    const events = b.events ?? ['push'];
    if (!Array.isArray(events) || !events.every((e) => typeof e === 'string')) throw invalid('events must be a list of event names');
    const now = new Date().toISOString();
    const h: HookState = {
      id: ++this.seq,
      scope,
      active: b.active === undefined ? true : b.active === true,
      events: events as string[],
      config: { url: config.url, content_type: contentType, insecure_ssl: config.insecure_ssl === '1' || config.insecure_ssl === 1 ? '1' : '0', ...(config.secret ? { secret: config.secret as string } : {}) },
      createdAt: now,
      updatedAt: now,
      last: { code: null, status: 'unused', message: null },
    };
    this.hooks.set(h.id, h);
    // GitHub pings a new hook at once, whatever events it subscribes to.
    this.send(h, 'ping', this.pingPayload(h), false);
    return this.view(h);
  }

  list(scope: HookScope): Record<string, unknown>[] {
    return [...this.hooks.values()].filter((h) => this.same(h.scope, scope)).map((h) => this.view(h));
  }

  get(scope: HookScope, id: number): Record<string, unknown> {
    return this.view(this.find(scope, id));
  }

  remove(scope: HookScope, id: number): void {
    this.find(scope, id);
    this.hooks.delete(id);
  }

  ping(scope: HookScope, id: number): void {
    const h = this.find(scope, id);
    this.send(h, 'ping', this.pingPayload(h), false);
  }

  deliveries(scope: HookScope, id: number): Omit<HookDelivery, 'request'>[] {
    this.find(scope, id);
    return this.sent.filter((d) => d.hook_id === id).reverse().map(({ request: _r, ...d }) => d);
  }

  /** POST …/deliveries/{id}/attempts: the same body and X-GitHub-Delivery again, as a redelivery. */
  redeliver(scope: HookScope, hookId: number, deliveryId: number): void {
    const h = this.find(scope, hookId);
    const d = this.sent.find((x) => x.id === deliveryId && x.hook_id === hookId);
    if (!d) throw new HttpError(404, undefined, 'Not Found');
    this.track(this.attempt(h, d.event, d.action, d.request.body, d.guid, true));
  }

  /** Every delivery attempt so far, oldest first (for tests). */
  all(): HookDelivery[] {
    return this.sent.map((d) => ({ ...d, request: { ...d.request, headers: { ...d.request.headers } } }));
  }

  /** Resolves once no delivery (or automatic retry) is in flight. */
  async idle(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  /** An event in repository `repo`: delivered to its hooks and the org's that subscribe to it. */
  emit(repo: string, event: string, payload: Record<string, unknown>): void {
    for (const h of this.hooks.values()) {
      if (!h.active) continue;
      if (h.scope.kind === 'repository' && h.scope.repo !== repo) continue;
      if (!h.events.includes(event) && !h.events.includes('*')) continue;
      this.send(h, event, { ...payload, repository: this.repository(repo), organization: this.organization(), sender: { login: 'octocat', id: 1, type: 'User' } }, true);
    }
  }

  repository(repo: string): Record<string, unknown> {
    return { id: this.repoId(repo) ?? 0, name: repo, full_name: `${this.org}/${repo}`, private: true, owner: { login: this.org, id: this.orgId, type: 'Organization' } };
  }

  organization(): Record<string, unknown> {
    return { login: this.org, id: this.orgId, url: `${this.origin()}/orgs/${this.org}` };
  }

  private pingPayload(h: HookState): Record<string, unknown> {
    return {
      zen: 'Design for failure.',
      hook_id: h.id,
      hook: this.view(h),
      ...(h.scope.kind === 'repository' ? { repository: this.repository(h.scope.repo) } : { organization: this.organization() }),
      sender: { login: 'octocat', id: 1, type: 'User' },
    };
  }

  private send(h: HookState, event: string, payload: Record<string, unknown>, retry: boolean): void {
    const json = JSON.stringify(payload);
    const body = h.config.content_type === 'json' ? json : `payload=${encodeURIComponent(json)}`;
    const action = typeof payload.action === 'string' ? payload.action : null;
    const guid = randomUUID();
    this.track(
      (async () => {
        const attempts = retry ? (this.settings.webhookRetry?.attempts ?? 1) : 1;
        for (let i = 0; i < attempts; i++) {
          if (i > 0) await new Promise((r) => setTimeout(r, this.settings.webhookRetry!.delayMs));
          if (await this.attempt(h, event, action, body, guid, i > 0)) return;
        }
      })(),
    );
  }

  private track(p: Promise<unknown>): void {
    const done = p.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.add(done);
    void done.then(() => this.inFlight.delete(done));
  }

  /** One POST; true when it was answered 2xx. */
  private async attempt(h: HookState, event: string, action: string | null, body: string, guid: string, redelivery: boolean): Promise<boolean> {
    const headers: Record<string, string> = {
      'content-type': h.config.content_type === 'json' ? 'application/json' : 'application/x-www-form-urlencoded',
      'user-agent': HOOKSHOT,
      'x-github-event': event,
      'x-github-delivery': guid,
      'x-github-hook-id': String(h.id),
      'x-github-hook-installation-target-type': h.scope.kind === 'organization' ? 'organization' : 'repository',
      'x-github-hook-installation-target-id': String(h.scope.kind === 'organization' ? this.orgId : (this.repoId(h.scope.repo) ?? 0)),
    };
    if (h.config.secret) {
      headers['x-hub-signature'] = `sha1=${createHmac('sha1', h.config.secret).update(body).digest('hex')}`;
      headers['x-hub-signature-256'] = `sha256=${createHmac('sha256', h.config.secret).update(body).digest('hex')}`;
    }
    const started = Date.now();
    let code = 0;
    let message = '';
    try {
      const res = await fetch(h.config.url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS) });
      code = res.status;
      message = (await res.text()).slice(0, 500);
    } catch (err) {
      message = (err as Error).name === 'TimeoutError' ? 'timed out' : `failed to connect: ${(err as Error).message}`;
    }
    const ok = code >= 200 && code < 300;
    h.last = { code: code || null, status: ok ? 'active' : 'misconfigured', message: message || null };
    this.sent.push({
      id: ++this.deliverySeq,
      guid,
      hook_id: h.id,
      delivered_at: new Date(started).toISOString(),
      redelivery,
      duration: (Date.now() - started) / 1000,
      status: ok ? 'OK' : code ? `Invalid HTTP Response: ${code}` : message,
      status_code: code,
      event,
      action,
      request: { headers, body },
    });
    return ok;
  }
}

/** A job as the workflow_job event's workflow_job shows it. */
export function workflowJobView(job: ApiJob, repo: string, org: string, origin: string): Record<string, unknown> {
  return {
    ...job,
    url: `${origin}/repos/${org}/${repo}/actions/jobs/${job.id}`,
    html_url: `https://github.com/${org}/${repo}/actions/runs/${job.run_id}/job/${job.id}`,
    run_url: `${origin}/repos/${org}/${repo}/actions/runs/${job.run_id}`,
    head_sha: '0000000000000000000000000000000000000000',
    steps: [],
  };
}
