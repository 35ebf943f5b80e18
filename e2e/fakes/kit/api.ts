// The request pipeline of an emulated REST API, and of its control API.
//
// An API request goes: match a route (its op names it for faults) -> find the
// caller by credential -> log it -> pick a fault -> act the fault out (delay,
// hang, or an error answer instead of the work) -> read and parse the body ->
// refuse a missing caller (401) or one over the request limit (429) -> the
// route's answer -> drop the socket instead of answering, or keep it open
// without answering, if the fault says so.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FaultInjector, type Fault } from './faults.js';
import { DEFAULT_MAX_BODY, HttpError, credentialsOf, parseJson, readBody, sendJson, type Mount, type Reply } from './http.js';
import type { RequestRateLimiter } from './limits.js';
import { RecordLog, type RequestRecord } from './log.js';
import { RouteTable, type RouteMatch, type RoutePattern } from './routes.js';

export interface ApiCall<Caller, Trace> {
  method: string;
  /** The path below the API's base path. */
  path: string;
  params: Record<string, string>;
  query: URLSearchParams;
  /** The request's headers (lower-case names), e.g. for conditional requests. */
  headers: IncomingMessage['headers'];
  caller: Caller;
  /** The parsed JSON body; undefined when empty. */
  body: unknown;
  /** What the emulator's `trace` made of this request. */
  trace: Trace;
}

export interface ApiRoute<Op extends string, Caller, Trace> extends RoutePattern {
  /** The operation faults name; several routes may share one. */
  op: Op;
  answer(call: ApiCall<Caller, Trace>): Reply | Promise<Reply>;
}

/** How the API shapes errors. */
export interface ErrorStyle {
  /** `status` is the HTTP status the body goes with (some APIs repeat it in the body). */
  body(code: string, message: string, suggestion: string | undefined, status: number): unknown;
  /** The code of an error raised without one (by the kit, or an injected status fault). */
  code(status: number): string;
  /** What a request without a valid credential is told. */
  unauthorized: { message: string; suggestion?: string };
}

/** Why the kit answered instead of the route. */
export type Refusal = 'fault' | 'unauthorized' | 'rate-limited';

/** One request as the pipeline saw it, for the emulator's `trace` and `settle` hooks. */
export interface Exchange<Op extends string> {
  readonly record: RequestRecord<Op>;
  readonly fault: Fault<Op> | undefined;
  refusal?: Refusal;
  /** The answer decided on, also when a drop or stall fault keeps it from being sent; undefined on hang. */
  reply?: Reply;
}

export interface RestApiOptions<Op extends string, Caller extends { id: string }, Trace> {
  /** Where the API is mounted, e.g. "/api/v1"; logged paths include it. */
  basePath: string;
  routes: readonly ApiRoute<Op, Caller, Trace>[];
  errors: ErrorStyle;
  /** The caller a credential (API key, token) belongs to. Every route needs one. */
  callerOf(credential: string): Caller | undefined;
  faults?: FaultInjector<Op>;
  requests?: RecordLog<RequestRecord<Op>>;
  /** A limit on every caller's requests, checked after auth. */
  requestLimit?: RequestRateLimiter;
  /** Called once a request is logged and its fault picked; what it returns goes to the route. */
  trace?(exchange: Exchange<Op>): Trace;
  /** Called once the request is done with: answered, dropped, hung or stalled. */
  settle?(exchange: Exchange<Op>, trace: Trace): void;
  /** The error for a request no route takes (default: 405 with Allow where the path has other methods, else 404). */
  unrouted?(method: string, path: string, allowed: string[]): HttpError;
  maxBodyBytes?: number;
}

export class RestApi<Op extends string, Caller extends { id: string }, Trace = undefined> implements Mount {
  readonly prefix: string;
  readonly faults: FaultInjector<Op>;
  readonly requests: RecordLog<RequestRecord<Op>>;
  private readonly table: RouteTable<ApiRoute<Op, Caller, Trace>>;

  constructor(private readonly opts: RestApiOptions<Op, Caller, Trace>) {
    this.prefix = opts.basePath;
    this.faults = opts.faults ?? new FaultInjector<Op>();
    this.requests = opts.requests ?? new RecordLog();
    this.table = new RouteTable(opts.routes);
  }

  /** An error answer in the API's shape. */
  errorReply(e: HttpError): Reply {
    const code = e.code ?? this.opts.errors.code(e.status);
    return { status: e.status, body: this.opts.errors.body(code, e.message, e.suggestion, e.status), ...(e.headers ? { headers: e.headers } : {}) };
  }

  serve(req: IncomingMessage, res: ServerResponse, path: string, url: URL): void {
    this.exchange(req, res, path, url).catch((e: Error) => {
      if (!res.headersSent) sendJson(res, this.errorReply(new HttpError(500, undefined, `Emulator error: ${e.message}`)));
    });
  }

  private async exchange(req: IncomingMessage, res: ServerResponse, path: string, url: URL): Promise<void> {
    const method = req.method ?? 'GET';
    const match = this.table.match(method, path);
    const op = match.route?.op ?? 'unknown';
    const credentials = credentialsOf(req.headers.authorization);
    let caller: Caller | undefined;
    for (const c of credentials) if ((caller = this.opts.callerOf(c))) break;
    const record = this.requests.push({ time: Date.now(), method, path: `${this.prefix}${path}`, op, status: 0, account: caller?.id });
    const fault = this.faults.pick(op, credentials[0]);
    if (fault) record.fault = fault.mode;
    const ex: Exchange<Op> = { record, fault };
    const trace = this.opts.trace ? this.opts.trace(ex) : (undefined as Trace);
    const settle = () => this.opts.settle?.(ex, trace);
    // A delayed request is read, and counted by the request limit, as it
    // arrives: a server that has the request does the work even when the
    // client stops waiting (a launch that lands late).
    let body: Promise<string> | undefined;
    let admitted: boolean | undefined;
    if (fault?.mode === 'delay') {
      admitted = caller && this.opts.requestLimit ? this.opts.requestLimit.admit(caller.id) : true;
      body = readBody(req, this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY);
      body.catch(() => undefined);
      await new Promise<void>((r) => setTimeout(r, fault.ms ?? 1000));
    }
    if (fault?.mode === 'hang') {
      ex.refusal = 'fault';
      settle();
      req.resume();
      return; // never answered; closing the server cuts the socket
    }
    if (fault?.mode === 'status') {
      req.resume();
      ex.refusal = 'fault';
      const status = fault.status ?? 500;
      ex.reply = this.errorReply(new HttpError(status, fault.code, fault.message ?? 'Injected failure.', 'Try again later.', status === 429 ? { 'retry-after': '1' } : undefined));
    } else {
      ex.reply = await this.answer(req, ex, match, { method, path, params: {}, query: url.searchParams, headers: req.headers, caller, trace }, body, admitted);
    }
    if (fault?.mode === 'drop') {
      settle();
      req.socket.destroy();
      return;
    }
    if (fault?.mode === 'stall') {
      settle();
      return; // done, never answered; closing the server cuts the socket
    }
    record.status = ex.reply.status;
    settle();
    sendJson(res, ex.reply);
  }

  // Everything after the fault: the body, auth, the request limit, the route.
  private async answer(
    req: IncomingMessage,
    ex: Exchange<Op>,
    match: RouteMatch<ApiRoute<Op, Caller, Trace>>,
    call: Omit<ApiCall<Caller | undefined, Trace>, 'body'>,
    preRead?: Promise<string>,
    admitted?: boolean,
  ): Promise<Reply> {
    const { caller, method, path } = call;
    try {
      const text = await (preRead ?? readBody(req, this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY));
      if (!caller) {
        ex.refusal = 'unauthorized';
        const { message, suggestion } = this.opts.errors.unauthorized;
        throw new HttpError(401, undefined, message, suggestion);
      }
      const body = parseJson(text);
      const limit = this.opts.requestLimit;
      if (limit && !(admitted ?? limit.admit(caller.id))) {
        ex.refusal = 'rate-limited';
        throw new HttpError(429, undefined, 'Too many requests.', `Send at most ${limit.limit} requests per second.`, { 'retry-after': '1' });
      }
      if (!match.route) throw (this.opts.unrouted ?? defaultUnrouted)(method, `${this.prefix}${path}`, match.allowed);
      return await match.route.answer({ ...call, params: match.params, caller, body });
    } catch (e) {
      if (e instanceof HttpError) return this.errorReply(e);
      return this.errorReply(new HttpError(500, undefined, `Emulator error: ${(e as Error).message}`));
    }
  }
}

export function noSuchEndpoint(method: string, path: string): HttpError {
  return new HttpError(404, undefined, `No such endpoint: ${method} ${path}.`);
}

function defaultUnrouted(method: string, path: string, allowed: string[]): HttpError {
  if (allowed.length === 0) return noSuchEndpoint(method, path);
  return new HttpError(405, undefined, `${method} is not allowed on ${path}; use ${allowed.join(' or ')}.`, undefined, { allow: allowed.join(', ') });
}

export interface ControlCall {
  params: Record<string, string>;
  query: URLSearchParams;
  /** The parsed JSON body; undefined when empty. */
  body: unknown;
  /** The body when it is an object, else an empty one: fields to pick from. */
  fields: Record<string, unknown>;
}

export interface ControlRoute extends RoutePattern {
  /** The data to answer with; undefined when the object named does not exist (404). */
  answer(call: ControlCall): unknown;
}

/**
 * The emulator's own API for tests in other processes: no auth, no faults,
 * `{data}` on success, `{error: {code, message}}` on failure; a thrown Error
 * is the caller's mistake (400).
 */
export class ControlApi implements Mount {
  private readonly table: RouteTable<ControlRoute>;

  constructor(
    readonly prefix: string,
    routes: readonly ControlRoute[],
  ) {
    this.table = new RouteTable(routes);
  }

  serve(req: IncomingMessage, res: ServerResponse, path: string, url: URL): void {
    const method = req.method ?? 'GET';
    const notFound = (): Reply => ({ status: 404, body: controlError('emulator/not-found', `No such control endpoint: ${method} ${path}`) });
    readBody(req)
      .then(async (text): Promise<Reply> => {
        const body = parseJson(text);
        const match = this.table.match(method, path);
        if (!match.route) return notFound();
        const fields = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
        const data: unknown = await match.route.answer({ params: match.params, query: url.searchParams, body, fields });
        return data === undefined ? notFound() : { status: 200, body: { data } };
      })
      .then(
        (reply) => sendJson(res, reply),
        (e: Error) => sendJson(res, { status: 400, body: controlError('emulator/bad-request', e.message) }),
      );
  }
}

function controlError(code: string, message: string) {
  return { error: { code, message } };
}
