// The emulator held to Lambda's API description (contract.ts): a request body
// the description does not allow is refused as Lambda refuses a bad request
// and recorded, and every answer the emulator gives is checked against the
// description's answer for that operation and status; one that does not
// match is recorded as a breach, which stop() then reports.
import type { Exchange } from '../kit/api.js';
import { HttpError, TextBody } from '../kit/http.js';
import { RecordLog } from '../kit/log.js';
import type { LambdaContract } from './contract.js';
import type { AccountState, ApiOp, ContractBreach, RefusedRequest } from './types.js';

export class Conformance {
  readonly refused = new RecordLog<RefusedRequest>();
  readonly breaches = new RecordLog<ContractBreach>();

  constructor(
    private readonly contract: LambdaContract,
    /** The base path the description's paths start with. */
    private readonly base: string,
  ) {}

  /**
   * The 400 for a request body the description does not allow, recorded; undefined when it allows it.
   * `path` is the route's path below the base, with `:param` segments.
   */
  refusal(method: string, path: string, account: AccountState, body: unknown): HttpError | undefined {
    const op = this.contract.operation(method, `${this.base}${path.replace(/:[^/]+/g, 'x')}`);
    // Bodies of operations that take none are not looked at: a GET or DELETE ignores what it is sent.
    if (!op?.takesBody) return undefined;
    const problems = op.checkRequest(body);
    if (problems.length === 0) return undefined;
    this.refused.push({ time: Date.now(), account: account.id, method: op.method, path: op.path, operationId: op.operationId, problems });
    return new HttpError(400, 'global/invalid-parameters', `Invalid request data: ${problems.join('; ')}.`, `Send only what the API reference documents for ${op.operationId}.`);
  }

  /** Checks the answer to one request, once it is decided on. */
  observe(ex: Exchange<ApiOp>): void {
    const reply = ex.reply;
    // A status fault answers what the test asked for; a hung request has no answer.
    if (!reply || ex.refusal === 'fault') return;
    const { method, path } = ex.record;
    const op = this.contract.operation(method, path);
    // An endpoint the description does not have has no answer to hold to.
    if (!op) return;
    // Lambda's rate limits answer from Cloudflare, in front of the API and
    // outside its description: 429 with a plain-text body (see errors.ts).
    if (reply.status === 429) return;
    const breach = (problems: string[]) =>
      this.breaches.push({ time: Date.now(), method, path, status: reply.status, operationId: op.operationId, problems });
    if (reply.body instanceof TextBody) return void breach(['the body is text, not JSON']);
    const problems = op.checkAnswer(reply.status, reply.body);
    if (problems === undefined) breach([`the description has no ${reply.status} answer for ${op.operationId}`]);
    else if (problems.length > 0) breach(problems);
  }

  /** What stop() throws when any answer broke the description. */
  breachError(): Error | undefined {
    const all = this.breaches.items;
    if (all.length === 0) return undefined;
    const lines = all.slice(0, 10).map((b) => `${b.method} ${b.path} answered ${b.status}: ${b.problems.join('; ')}`);
    return new Error(`the Lambda emulator gave ${all.length} answer(s) its API description does not allow:\n${lines.join('\n')}`);
  }
}
