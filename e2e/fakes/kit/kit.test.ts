// The emulator kit on its own: a small REST API built from it, over real
// HTTP. Routing with params, 404 and 405, auth, the request limit, every
// fault mode, seeded fault rates, the request log and the control API.
import { describe, it, expect, beforeAll, afterAll, beforeEach } from '@jest/globals';
import { request } from 'node:http';
import { ControlApi, RestApi, type Exchange } from './api.js';
import { FaultInjector, seededRandom } from './faults.js';
import { HttpError, TextBody, credentialsOf, listen, sendJson, type ListeningServer } from './http.js';
import { IntervalLimiter, RequestRateLimiter } from './limits.js';
import { RecordLog } from './log.js';
import { RouteTable } from './routes.js';

type Op = 'list-things' | 'get-thing' | 'make-thing';
interface Caller {
  id: string;
}

const TOKEN = 'token-alice';
const OTHER = 'token-bob';
const callers = new Map<string, Caller>([
  [TOKEN, { id: 'alice' }],
  [OTHER, { id: 'bob' }],
]);

describe('RouteTable', () => {
  const table = new RouteTable([
    { method: 'GET', path: '/things' },
    { method: 'POST', path: '/things' },
    { method: 'GET', path: '/things/:id' },
    { method: 'DELETE', path: '/things/:id/parts/:part' },
  ]);

  it('matches by method and path, with percent-decoded params', () => {
    expect(table.match('GET', '/things')).toMatchObject({ route: { method: 'GET', path: '/things' }, params: {} });
    expect(table.match('GET', '/things/a%2Fb')).toMatchObject({ route: { path: '/things/:id' }, params: { id: 'a/b' } });
    expect(table.match('DELETE', '/things/t1/parts/p2')).toMatchObject({ params: { id: 't1', part: 'p2' } });
  });

  it('names the methods a known path has, and none for an unknown path', () => {
    expect(table.match('PUT', '/things')).toEqual({ route: undefined, allowed: ['GET', 'POST'] });
    expect(table.match('GET', '/nothing')).toEqual({ route: undefined, allowed: [] });
  });

  it('does not match empty or malformed param segments', () => {
    expect(table.match('GET', '/things/').route).toBeUndefined();
    expect(table.match('GET', '/things//x').route).toBeUndefined();
    expect(table.match('GET', '/things/%zz').route).toBeUndefined();
  });
});

describe('credentialsOf', () => {
  it('reads a bearer token, the user of basic auth, or a bare basic credential', () => {
    expect(credentialsOf(`Bearer ${TOKEN}`)).toEqual([TOKEN]);
    expect(credentialsOf(`  bearer   ${TOKEN}`)).toEqual([TOKEN]);
    expect(credentialsOf(`Basic ${Buffer.from(`${TOKEN}:pw`).toString('base64')}`)).toEqual([TOKEN, Buffer.from(`${TOKEN}:pw`).toString('base64')]);
    expect(credentialsOf(`Basic ${TOKEN}`)).toEqual([TOKEN]);
    expect(credentialsOf(`Token ${TOKEN}`)).toEqual([]);
    expect(credentialsOf(undefined)).toEqual([]);
  });
});

describe('sendJson', () => {
  it('sends a body as JSON, and a TextBody as it is with its own content type', async () => {
    const server = await listen({
      mounts: [{ prefix: '/text', serve: (req, res) => (req.resume(), sendJson(res, { status: 429, body: new TextBody('error code: 1015'), headers: { 'retry-after': '3' } })) }],
      unmounted: { status: 404, body: { fail: 'nothing here' } },
    });
    try {
      const text = await fetch(`${server.origin}/text`);
      expect({ status: text.status, type: text.headers.get('content-type'), retry: text.headers.get('retry-after'), body: await text.text() }).toEqual({
        status: 429,
        type: 'text/plain; charset=UTF-8',
        retry: '3',
        body: 'error code: 1015',
      });
      const json = await fetch(`${server.origin}/elsewhere`);
      expect({ type: json.headers.get('content-type'), body: await json.text() }).toEqual({ type: 'application/json', body: '{"fail":"nothing here"}' });
    } finally {
      await server.close();
    }
  });
});

describe('limits', () => {
  it('RequestRateLimiter admits at most N per key per second, follows its setting, and a refusal does not count', () => {
    let perSecond = 2;
    const limit = new RequestRateLimiter(() => perSecond);
    expect([0, 10, 20].map((t) => limit.admit('a', 1000 + t))).toEqual([true, true, false]);
    expect(limit.admit('b', 1020)).toBe(true);
    // The one at 1010 is still in the window at 2005; the one at 1000 is not.
    expect(limit.admit('a', 2000)).toBe(true);
    expect(limit.admit('a', 2005)).toBe(false);
    // Had the refused requests counted, the window would still be full.
    expect(limit.admit('a', 2011)).toBe(true);
    expect(limit.admit('a', 2012)).toBe(false);
    perSecond = 0;
    expect(limit.admit('a', 2013)).toBe(true);
  });

  it('IntervalLimiter spaces counted events per key, and counts nothing while off', () => {
    let interval = 1000;
    const limit = new IntervalLimiter(() => interval);
    expect(limit.waitMs('a', 0)).toBe(0);
    limit.count('a', 0);
    expect(limit.waitMs('a', 400)).toBe(600);
    expect(limit.waitMs('b', 400)).toBe(0);
    expect(limit.waitMs('a', 1000)).toBe(0);
    interval = 0;
    limit.count('c', 5000);
    interval = 1000;
    expect(limit.waitMs('c', 5001)).toBe(0);
  });
});

describe('RecordLog', () => {
  it('keeps only the newest entries', () => {
    const log = new RecordLog<number>(3);
    for (let n = 1; n <= 5; n++) log.push(n);
    expect(log.items).toEqual([3, 4, 5]);
  });
});

describe('FaultInjector', () => {
  const hitsOf = (seed: number, n: number) => {
    const faults = new FaultInjector<Op>(seededRandom(seed));
    faults.add({ op: 'list-things', mode: 'status', rate: 0.3 });
    return Array.from({ length: n }, () => (faults.pick('list-things', undefined) ? 1 : 0));
  };

  it('hits at a set rate, the same requests for the same seed', () => {
    const a = hitsOf(42, 1000);
    expect(hitsOf(42, 1000)).toEqual(a);
    expect(hitsOf(43, 1000)).not.toEqual(a);
    const hits = a.reduce((s: number, x) => s + x, 0);
    expect(hits).toBeGreaterThan(240);
    expect(hits).toBeLessThan(360);
  });

  it('matches its op or any, only the credential it names, and is gone after `times` hits', () => {
    const faults = new FaultInjector<Op>();
    const id = faults.add({ op: 'get-thing', mode: 'drop', times: 2, apiKey: OTHER });
    faults.add({ op: 'any', mode: 'delay', ms: 1, rate: 0 });
    expect(faults.pick('list-things', OTHER)).toBeUndefined();
    expect(faults.pick('get-thing', TOKEN)).toBeUndefined();
    expect(faults.pick('get-thing', undefined)).toBeUndefined();
    expect(faults.pick('get-thing', OTHER)).toMatchObject({ id, hits: 1 });
    expect(faults.list.map((f) => f.id)).toContain(id);
    expect(faults.pick('get-thing', OTHER)).toMatchObject({ id, hits: 2 });
    expect(faults.list.map((f) => f.id)).not.toContain(id);
    faults.clear();
    expect(faults.list).toEqual([]);
  });
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

function call(origin: string, method: string, path: string, opts: { token?: string | null; body?: string; timeoutMs?: number } = {}): Promise<Answer> {
  return new Promise((resolveCall, reject) => {
    const headers: Record<string, string> = {};
    const token = opts.token === undefined ? TOKEN : opts.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    const u = new URL(`${origin}${path}`);
    const req = request({ host: u.hostname, port: u.port, method, path: u.pathname + u.search, headers, timeout: opts.timeoutMs ?? 10_000 }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolveCall({ status: res.statusCode!, headers: res.headers, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

describe('RestApi and ControlApi over HTTP', () => {
  const things = new Map<string, { id: string; owner: string }>();
  let perSecond = 0;
  const settled: { op: string; refusal?: string; status: number; trace: string }[] = [];
  let api: RestApi<Op, Caller, string>;
  let server: ListeningServer;

  beforeAll(async () => {
    api = new RestApi<Op, Caller, string>({
      basePath: '/v1',
      errors: {
        body: (code, message, suggestion) => ({ fail: { code, message, ...(suggestion ? { suggestion } : {}) } }),
        code: (status) => `http-${status}`,
        unauthorized: { message: 'who are you?' },
      },
      callerOf: (token) => callers.get(token),
      requestLimit: new RequestRateLimiter(() => perSecond),
      trace: (ex: Exchange<Op>) => `trace-${ex.record.op}`,
      settle: (ex, trace) => settled.push({ op: ex.record.op, ...(ex.refusal ? { refusal: ex.refusal } : {}), status: ex.record.status, trace }),
      routes: [
        { method: 'GET', path: '/things', op: 'list-things', answer: ({ caller }) => ({ status: 200, body: [...things.values()].filter((t) => t.owner === caller.id) }) },
        {
          method: 'GET',
          path: '/things/:id',
          op: 'get-thing',
          answer: ({ params, query, trace }) => {
            const t = things.get(params.id!);
            if (!t) throw new HttpError(404, 'no-thing', `no thing ${params.id}`, 'make it first');
            return { status: 200, body: { ...t, view: query.get('view'), trace } };
          },
        },
        {
          method: 'POST',
          path: '/things',
          op: 'make-thing',
          answer: ({ caller, body }) => {
            const id = (body as { id?: unknown } | undefined)?.id;
            if (typeof id !== 'string') throw new Error('route bug');
            things.set(id, { id, owner: caller.id });
            return { status: 201, body: { id } };
          },
        },
      ],
    });
    server = await listen({
      mounts: [api, new ControlApi('/_control', [{ method: 'GET', path: '/things/:id', answer: ({ params }) => things.get(params.id!) }, { method: 'POST', path: '/fail', answer: ({ fields }) => { throw new Error(`refused ${String(fields.why)}`); } }])],
      unmounted: { status: 404, body: { fail: 'nothing here' } },
    });
  });

  afterAll(async () => {
    await server.close();
  });

  beforeEach(() => {
    api.faults.clear();
    perSecond = 0;
  });

  it('routes by method and path with params and query, and answers route errors in the API shape', async () => {
    expect((await call(server.origin, 'POST', '/v1/things', { body: JSON.stringify({ id: 'x 1' }) })).status).toBe(201);
    expect(await call(server.origin, 'GET', '/v1/things/x%201/?view=full')).toMatchObject({ status: 200, body: { id: 'x 1', owner: 'alice', view: 'full', trace: 'trace-get-thing' } });
    expect(await call(server.origin, 'GET', '/v1/things/nope')).toMatchObject({ status: 404, body: { fail: { code: 'no-thing', message: 'no thing nope', suggestion: 'make it first' } } });
    expect((await call(server.origin, 'GET', '/v1/things', { token: OTHER })).body).toEqual([]);
  });

  it('answers 404 for an unknown path, 405 with Allow for a wrong method, 400 for bad JSON, 500 for a route that throws', async () => {
    expect(await call(server.origin, 'GET', '/v1/nothing')).toMatchObject({ status: 404, body: { fail: { code: 'http-404', message: 'No such endpoint: GET /v1/nothing.' } } });
    const wrong = await call(server.origin, 'DELETE', '/v1/things');
    expect(wrong).toMatchObject({ status: 405, body: { fail: { code: 'http-405' } } });
    expect(wrong.headers.allow).toBe('GET, POST');
    expect(await call(server.origin, 'POST', '/v1/things', { body: '{nope' })).toMatchObject({ status: 400, body: { fail: { code: 'http-400' } } });
    expect(await call(server.origin, 'POST', '/v1/things', { body: '{}' })).toMatchObject({ status: 500, body: { fail: { code: 'http-500', message: 'Emulator error: route bug' } } });
    expect(await call(server.origin, 'GET', '/elsewhere')).toMatchObject({ status: 404, body: { fail: 'nothing here' } });
  });

  it('refuses a missing or unknown credential with 401 before anything else, and logs the account, never the token', async () => {
    expect(await call(server.origin, 'GET', '/v1/things', { token: null })).toMatchObject({ status: 401, body: { fail: { code: 'http-401', message: 'who are you?' } } });
    expect((await call(server.origin, 'GET', '/v1/nothing', { token: 'wrong' })).status).toBe(401);
    expect(settled.at(-1)).toMatchObject({ op: 'unknown', refusal: 'unauthorized', status: 401 });
    expect(api.requests.items.at(-1)).toMatchObject({ method: 'GET', path: '/v1/nothing', op: 'unknown', status: 401, account: undefined });
    await call(server.origin, 'GET', '/v1/things');
    expect(api.requests.items.at(-1)).toMatchObject({ op: 'list-things', status: 200, account: 'alice' });
    expect(JSON.stringify(api.requests.items)).not.toContain(TOKEN);
  });

  it('answers 429 with Retry-After over the request limit, per caller', async () => {
    perSecond = 2;
    const statuses = [];
    for (let n = 0; n < 3; n++) statuses.push((await call(server.origin, 'GET', '/v1/things')).status);
    expect(statuses).toEqual([200, 200, 429]);
    const refused = await call(server.origin, 'GET', '/v1/things');
    expect(refused).toMatchObject({ status: 429, body: { fail: { code: 'http-429', suggestion: 'Send at most 2 requests per second.' } } });
    expect(refused.headers['retry-after']).toBe('1');
    expect(settled.at(-1)).toMatchObject({ refusal: 'rate-limited', status: 429 });
    expect((await call(server.origin, 'GET', '/v1/things', { token: OTHER })).status).toBe(200);
  });

  it('status fault: answers the status in the API shape without doing the work', async () => {
    api.faults.add({ op: 'make-thing', mode: 'status', status: 503, times: 1 });
    const r = await call(server.origin, 'POST', '/v1/things', { body: JSON.stringify({ id: 'never' }) });
    expect(r).toMatchObject({ status: 503, body: { fail: { code: 'http-503', message: 'Injected failure.' } } });
    expect(things.has('never')).toBe(false);
    expect(settled.at(-1)).toMatchObject({ op: 'make-thing', refusal: 'fault', status: 503 });
    expect(api.requests.items.at(-1)).toMatchObject({ status: 503, fault: 'status' });
    api.faults.add({ op: 'any', mode: 'status', status: 429, code: 'slow-down', times: 1 });
    const limited = await call(server.origin, 'GET', '/v1/nothing', { token: null });
    expect(limited).toMatchObject({ status: 429, body: { fail: { code: 'slow-down' } } });
    expect(limited.headers['retry-after']).toBe('1');
  });

  it('drop fault: does the work, then closes the socket without an answer', async () => {
    api.faults.add({ op: 'make-thing', mode: 'drop', times: 1 });
    await expect(call(server.origin, 'POST', '/v1/things', { body: JSON.stringify({ id: 'dropped' }) })).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect(things.get('dropped')).toEqual({ id: 'dropped', owner: 'alice' });
    expect(api.requests.items.at(-1)).toMatchObject({ op: 'make-thing', status: 0, fault: 'drop' });
    expect(settled.at(-1)).toMatchObject({ op: 'make-thing', status: 0 });
  });

  it('stall fault: does the work, then never answers', async () => {
    api.faults.add({ op: 'make-thing', mode: 'stall', times: 1 });
    await expect(call(server.origin, 'POST', '/v1/things', { body: JSON.stringify({ id: 'stalled' }), timeoutMs: 300 })).rejects.toThrow(/timed out/);
    expect(things.get('stalled')).toEqual({ id: 'stalled', owner: 'alice' });
    expect(api.requests.items.at(-1)).toMatchObject({ op: 'make-thing', status: 0, fault: 'stall' });
    expect(settled.at(-1)).toMatchObject({ op: 'make-thing', status: 0 });
    expect(settled.at(-1)).not.toHaveProperty('refusal');
  });

  it('delay fault: answers normally, late; hang fault: never answers', async () => {
    api.faults.add({ op: 'list-things', mode: 'delay', ms: 300, times: 1 });
    const t0 = Date.now();
    expect((await call(server.origin, 'GET', '/v1/things')).status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    api.faults.add({ op: 'get-thing', mode: 'hang', times: 1 });
    await expect(call(server.origin, 'GET', '/v1/things/x%201', { timeoutMs: 300 })).rejects.toThrow(/timed out/);
    expect(api.requests.items.at(-1)).toMatchObject({ op: 'get-thing', status: 0, fault: 'hang' });
    expect(settled.at(-1)).toMatchObject({ op: 'get-thing', refusal: 'fault', status: 0 });
    expect((await call(server.origin, 'GET', '/v1/things/x%201')).status).toBe(200);
  });

  it('a fault at a rate with a seeded random hits the same requests on every run', async () => {
    const run = async (seed: number) => {
      const seeded = new RestApi<Op, Caller>({
        basePath: '/v1',
        errors: { body: (code) => ({ code }), code: (s) => String(s), unauthorized: { message: 'no' } },
        callerOf: (token) => callers.get(token),
        faults: new FaultInjector<Op>(seededRandom(seed)),
        routes: [{ method: 'GET', path: '/things', op: 'list-things', answer: () => ({ status: 200, body: [] }) }],
      });
      seeded.faults.add({ op: 'list-things', mode: 'status', status: 500, rate: 0.5 });
      const own = await listen({ mounts: [seeded], unmounted: { status: 404, body: {} } });
      const statuses = [];
      for (let n = 0; n < 40; n++) statuses.push((await call(own.origin, 'GET', '/v1/things')).status);
      await own.close();
      return statuses;
    };
    const first = await run(7);
    expect(await run(7)).toEqual(first);
    expect(first).toContain(200);
    expect(first).toContain(500);
  });

  it('control API: {data}, 404 for what does not exist or no route, 400 for a refusal or bad JSON', async () => {
    expect(await call(server.origin, 'GET', '/_control/things/x%201', { token: null })).toMatchObject({ status: 200, body: { data: { id: 'x 1' } } });
    expect(await call(server.origin, 'GET', '/_control/things/none')).toMatchObject({ status: 404, body: { error: { code: 'emulator/not-found' } } });
    expect(await call(server.origin, 'GET', '/_control/nothing')).toMatchObject({ status: 404, body: { error: { code: 'emulator/not-found', message: 'No such control endpoint: GET /nothing' } } });
    expect(await call(server.origin, 'POST', '/_control/fail', { body: JSON.stringify({ why: 'because' }) })).toMatchObject({ status: 400, body: { error: { code: 'emulator/bad-request', message: 'refused because' } } });
    expect(await call(server.origin, 'POST', '/_control/fail', { body: '{' })).toMatchObject({ status: 400, body: { error: { code: 'emulator/bad-request' } } });
  });

  it('close() cuts hung requests and closes the server', async () => {
    const own = await listen({ mounts: [api], unmounted: { status: 404, body: {} } });
    api.faults.add({ op: 'list-things', mode: 'hang', times: 1 });
    const hung = call(own.origin, 'GET', '/v1/things', { timeoutMs: 60_000 });
    await new Promise<void>((r) => {
      const check = () => (api.requests.items.at(-1)?.fault === 'hang' ? r() : setTimeout(check, 10));
      check();
    });
    await own.close();
    await expect(hung).rejects.toThrow(/socket hang up|ECONNRESET/);
    await expect(call(own.origin, 'GET', '/v1/things')).rejects.toThrow(/ECONNREFUSED/);
  });
});
