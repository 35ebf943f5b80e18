// GitHub REST's routes the emulator serves, each with the operation faults
// name it by. Every answer carries the x-ratelimit-* headers of the caller's
// primary limit; a limit reached (or a secondary limit armed) answers instead.
// A GET answered 200 carries an ETag; asked again with it in If-None-Match
// while nothing changed, it is a 304 without a body, not counted.
import { createHash } from 'node:crypto';
import type { ApiCall, ApiRoute, ErrorStyle } from '../kit/api.js';
import { HttpError, type Reply } from '../kit/http.js';
import type { Actions } from './actions.js';
import type { HookScope, Hooks } from './hooks.js';
import type { Caller, GitHubAuth } from './auth.js';
import type { RateLimits } from './limits.js';
import type { GitHubOp } from './types.js';

type Route = ApiRoute<GitHubOp, Caller, undefined>;
type Call = ApiCall<Caller, undefined>;

export const GITHUB_ERRORS: ErrorStyle = {
  body: (_code, message, _suggestion, status) => ({ message, documentation_url: 'https://docs.github.com/rest', status: String(status) }),
  code: (status) => String(status),
  unauthorized: { message: 'Bad credentials' },
};

export interface RouteDeps {
  actions: Actions;
  hooks: Hooks;
  auth: GitHubAuth;
  limits: RateLimits;
  origin: () => string;
  installationTokenTtlMs: () => number;
  /** Whether GETs carry ETags and answer If-None-Match with 304. */
  etags: () => boolean;
  errorReply: (e: HttpError) => Reply;
}

function pageOf<T>(items: T[], call: Call, path: string, origin: string): { page: T[]; link?: string } {
  const perPage = Number(call.query.get('per_page') ?? 30);
  const page = Number(call.query.get('page') ?? 1);
  if (!Number.isInteger(perPage) || perPage < 1 || !Number.isInteger(page) || page < 1) throw new HttpError(422, undefined, 'Invalid input: per_page and page must be whole numbers from 1.');
  const size = Math.min(perPage, 100);
  const last = Math.max(1, Math.ceil(items.length / size));
  const at = (p: number) => {
    const q = new URLSearchParams(call.query);
    q.set('page', String(p));
    q.set('per_page', String(size));
    return `<${origin}${path}?${q}>`;
  };
  const rels = [...(page < last ? [`${at(page + 1)}; rel="next"`, `${at(last)}; rel="last"`] : []), ...(page > 1 ? [`${at(1)}; rel="first"`, `${at(page - 1)}; rel="prev"`] : [])];
  return { page: items.slice((page - 1) * size, page * size), ...(rels.length ? { link: rels.join(', ') } : {}) };
}

export function githubRoutes(d: RouteDeps): Route[] {
  const { actions } = d;
  // Every route: the caller's kind may use it, then the rate limits, then the answer; headers on all of them.
  const route = (kinds: Caller['kind'][], answer: (call: Call) => Reply) => (call: Call): Reply => {
    if (!kinds.includes(call.caller.kind)) {
      throw new HttpError(call.caller.kind === 'app' ? 401 : 403, undefined, call.caller.kind === 'app' ? 'A JSON web token can only call the GitHub App endpoints.' : 'Resource not accessible by integration');
    }
    const refusal = d.limits.refusal(call.caller.id);
    if (refusal) return refusal;
    let reply: Reply;
    try {
      reply = answer(call);
    } catch (e) {
      if (!(e instanceof HttpError)) throw e;
      reply = d.errorReply(e);
    }
    if (call.method === 'GET' && reply.status === 200 && d.etags()) {
      // The ETag depends on the body and on who asks, as GitHub's do (they vary by Authorization).
      const etag = `W/"${createHash('sha256').update(call.caller.id).update(JSON.stringify(reply.body)).digest('hex').slice(0, 40)}"`;
      const asked = call.headers['if-none-match'];
      if (typeof asked === 'string' && asked.split(',').map((t) => t.trim()).includes(etag)) {
        return { status: 304, body: undefined, headers: { ...d.limits.headers(call.caller.id), etag } };
      }
      reply = { ...reply, headers: { ...(reply.headers ?? {}), etag } };
    }
    d.limits.count(call.caller.id);
    return { ...reply, headers: { ...d.limits.headers(call.caller.id), ...(reply.headers ?? {}) } };
  };
  const tokenUsers: Caller['kind'][] = ['user', 'installation'];
  const ourOrg = (org: string) => {
    if (org.toLowerCase() !== actions.org.toLowerCase()) throw new HttpError(404, undefined, 'Not Found');
  };
  const ourRepo = (call: Call) => {
    ourOrg(call.params.owner!);
    if (actions.repoId(call.params.repo!) === undefined) throw new HttpError(404, undefined, 'Not Found');
    return call.params.repo!;
  };

  // Repository and organization hooks: the same operations under two roots.
  const hookRoutes = (root: string, scopeOf: (call: Call) => HookScope): Route[] => {
    const id = (v: string | undefined) => {
      const n = Number(v);
      if (!Number.isInteger(n)) throw new HttpError(404, undefined, 'Not Found');
      return n;
    };
    return [
      { method: 'POST', path: `${root}/hooks`, op: 'create-hook', answer: route(tokenUsers, (call) => ({ status: 201, body: d.hooks.create(scopeOf(call), call.body) })) },
      {
        method: 'GET',
        path: `${root}/hooks`,
        op: 'list-hooks',
        answer: route(tokenUsers, (call) => {
          const { page, link } = pageOf(d.hooks.list(scopeOf(call)), call, call.path, d.origin());
          return { status: 200, body: page, ...(link ? { headers: { link } } : {}) };
        }),
      },
      { method: 'GET', path: `${root}/hooks/:hook_id`, op: 'get-hook', answer: route(tokenUsers, (call) => ({ status: 200, body: d.hooks.get(scopeOf(call), id(call.params.hook_id)) })) },
      { method: 'DELETE', path: `${root}/hooks/:hook_id`, op: 'delete-hook', answer: route(tokenUsers, (call) => (d.hooks.remove(scopeOf(call), id(call.params.hook_id)), { status: 204, body: '' })) },
      { method: 'POST', path: `${root}/hooks/:hook_id/pings`, op: 'ping-hook', answer: route(tokenUsers, (call) => (d.hooks.ping(scopeOf(call), id(call.params.hook_id)), { status: 204, body: '' })) },
      {
        method: 'GET',
        path: `${root}/hooks/:hook_id/deliveries`,
        op: 'list-hook-deliveries',
        answer: route(tokenUsers, (call) => ({ status: 200, body: d.hooks.deliveries(scopeOf(call), id(call.params.hook_id)) })),
      },
      {
        method: 'POST',
        path: `${root}/hooks/:hook_id/deliveries/:delivery_id/attempts`,
        op: 'redeliver-hook',
        answer: route(tokenUsers, (call) => (d.hooks.redeliver(scopeOf(call), id(call.params.hook_id), id(call.params.delivery_id)), { status: 202, body: {} })),
      },
    ];
  };

  return [
    ...hookRoutes('/repos/:owner/:repo', (call) => ({ kind: 'repository', repo: ourRepo(call) })),
    ...hookRoutes('/orgs/:org', (call) => (ourOrg(call.params.org!), { kind: 'organization' })),
    {
      method: 'GET',
      path: '/orgs/:org/actions/runners',
      op: 'list-runners',
      answer: route(tokenUsers, (call) => {
        ourOrg(call.params.org!);
        const name = call.query.get('name');
        const all = actions.runners().filter((r) => name === null || r.name === name);
        const { page, link } = pageOf(all, call, `/orgs/${call.params.org}/actions/runners`, d.origin());
        return { status: 200, body: { total_count: all.length, runners: page }, ...(link ? { headers: { link } } : {}) };
      }),
    },
    {
      method: 'GET',
      path: '/orgs/:org/actions/runner-groups',
      op: 'list-runner-groups',
      answer: route(tokenUsers, (call) => {
        ourOrg(call.params.org!);
        const all = actions.runnerGroups();
        const { page, link } = pageOf(all, call, `/orgs/${call.params.org}/actions/runner-groups`, d.origin());
        return { status: 200, body: { total_count: all.length, runner_groups: page }, ...(link ? { headers: { link } } : {}) };
      }),
    },
    {
      method: 'DELETE',
      path: '/orgs/:org/actions/runners/:id',
      op: 'delete-runner',
      answer: route(tokenUsers, (call) => {
        ourOrg(call.params.org!);
        const id = Number(call.params.id);
        if (!Number.isInteger(id)) throw new HttpError(404, undefined, 'Not Found');
        actions.deleteRunner(id);
        return { status: 204, body: '' };
      }),
    },
    {
      method: 'POST',
      path: '/orgs/:org/actions/runners/generate-jitconfig',
      op: 'generate-jitconfig',
      answer: route(tokenUsers, (call) => {
        ourOrg(call.params.org!);
        const body = call.body && typeof call.body === 'object' ? (call.body as Record<string, unknown>) : {};
        return { status: 201, body: actions.generateJitConfig(body) };
      }),
    },
    {
      method: 'GET',
      path: '/repos/:owner/:repo/actions/runs',
      op: 'list-runs',
      answer: route(tokenUsers, (call) => {
        const repo = ourRepo(call);
        const status = call.query.get('status');
        const all = actions.runs(repo).filter((r) => status === null || r.status === status || r.conclusion === status);
        const { page, link } = pageOf(all, call, `/repos/${call.params.owner}/${repo}/actions/runs`, d.origin());
        return { status: 200, body: { total_count: all.length, workflow_runs: page }, ...(link ? { headers: { link } } : {}) };
      }),
    },
    {
      method: 'GET',
      path: '/repos/:owner/:repo/actions/runs/:run_id',
      op: 'get-run',
      answer: route(tokenUsers, (call) => {
        const repo = ourRepo(call);
        const runId = Number(call.params.run_id);
        const run = actions.runRepo(runId) === repo ? actions.run(runId) : undefined;
        if (!run) throw new HttpError(404, undefined, 'Not Found');
        return { status: 200, body: run };
      }),
    },
    {
      method: 'POST',
      path: '/repos/:owner/:repo/actions/runs/:run_id/rerun-failed-jobs',
      op: 'rerun-failed-jobs',
      answer: route(tokenUsers, (call) => {
        const repo = ourRepo(call);
        const runId = Number(call.params.run_id);
        if (actions.runRepo(runId) !== repo) throw new HttpError(404, undefined, 'Not Found');
        actions.rerunFailedJobs(runId);
        return { status: 201, body: {} };
      }),
    },
    {
      method: 'GET',
      path: '/repos/:owner/:repo/actions/runs/:run_id/jobs',
      op: 'list-jobs',
      answer: route(tokenUsers, (call) => {
        const repo = ourRepo(call);
        const runId = Number(call.params.run_id);
        const jobs = actions.runRepo(runId) === repo ? actions.jobsOf(runId) : undefined;
        if (!jobs) throw new HttpError(404, undefined, 'Not Found');
        const { page, link } = pageOf(jobs, call, `/repos/${call.params.owner}/${repo}/actions/runs/${runId}/jobs`, d.origin());
        return { status: 200, body: { total_count: jobs.length, jobs: page }, ...(link ? { headers: { link } } : {}) };
      }),
    },
    {
      method: 'POST',
      path: '/app/installations/:id/access_tokens',
      op: 'access-token',
      answer: route(['app'], (call) => {
        if (Number(call.params.id) !== d.auth.app.installationId) throw new HttpError(404, undefined, 'Not Found');
        const t = d.auth.issueInstallationToken(d.installationTokenTtlMs());
        return { status: 201, body: { ...t, permissions: { organization_self_hosted_runners: 'write', actions: 'read' }, repository_selection: 'all' } };
      }),
    },
  ];
}
