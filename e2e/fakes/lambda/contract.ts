// Lambda's own API description (spec/, pinned and unchanged) as a contract:
// which request bodies an operation takes and which answers it gives, per
// HTTP status. The emulator checks what it receives and what it sends here, and
// tests check what came over the wire against it.
//
// The description is OpenAPI 3.1, whose schemas are JSON Schema 2020-12, so it
// is read with Ajv's 2020-12 validator; every $ref points inside the file
// (#/components/schemas/...) and is resolved there.
//
// One tightening: an object schema that does not say what it does with fields
// it does not name is read as closed (additionalProperties: false). Lambda does
// not document what it does with an unknown field, so a client that sends one
// relies on something nobody promised (the launch body's `quantity` was one);
// and an emulator that answers with a field the schema lacks (the instances'
// `is_reserved`, which the description's examples still show but its Instance
// schema does not have) teaches its clients to read it.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

/** The pinned description: the one place its version is named (spec/README.md says where it came from). */
export const DESCRIPTION_FILE = 'lambda-cloud-api-1.10.0.json';
const DESCRIPTION_URL = new URL(`./spec/${DESCRIPTION_FILE}`, import.meta.url);

type Json = Record<string, unknown>;

/** One operation of the description, by method and path template (with the /api/v1 base). */
export interface OperationContract {
  readonly method: string;
  /** As the description writes it, e.g. "/api/v1/instances/{id}". */
  readonly path: string;
  readonly operationId: string;
  /** Whether the operation takes a JSON request body. */
  readonly takesBody: boolean;
  /** What is wrong with a request body; empty when the description allows it. */
  checkRequest(body: unknown): string[];
  /** What is wrong with an answer; undefined when the description names no answer for that status. */
  checkAnswer(status: number, body: unknown): string[] | undefined;
}

export class LambdaContract {
  readonly version: string;
  private readonly operations: { method: string; pattern: RegExp; op: OperationContract }[] = [];

  constructor(description: Json) {
    this.version = String((description.info as Json | undefined)?.version);
    const doc = closeObjects(description);
    const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false });
    // Strict mode refuses keywords it does not know, so that a newer description
    // using one that changes what validates fails here instead of passing
    // everything. These are OpenAPI's own, or the document's top level (which
    // is not a schema but holds the schemas the $refs point into).
    ajv.addVocabulary(['example', 'openapi', 'info', 'servers', 'paths', 'components', 'security', 'tags', 'x-lambda-api-keys-config-url']);
    // The formats the description uses: date-time and ipv4network are checked; password only marks a secret.
    ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/);
    ajv.addFormat('password', true);
    ajv.addFormat('ipv4network', /^(\d{1,3}\.){3}\d{1,3}\/\d{1,2}$/);
    const id = 'lambda-cloud-api.json';
    ajv.addSchema(doc, id);
    const compile = (...pointer: string[]): ValidateFunction => {
      const ref = `${id}#/${pointer.map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
      const v = ajv.getSchema(ref);
      if (!v) throw new Error(`the Lambda API description has no schema at ${ref}`);
      return v;
    };
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, o] of Object.entries(item)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        const operation = o as Json;
        const json = (x: unknown) => ((x as Json | undefined)?.content as Json | undefined)?.['application/json'] as Json | undefined;
        const takesBody = json(operation.requestBody)?.schema !== undefined;
        const request = takesBody ? lazy(() => compile('paths', path, method, 'requestBody', 'content', 'application/json', 'schema')) : undefined;
        const answers = new Map<number, () => ValidateFunction>();
        for (const [status, r] of Object.entries((operation.responses ?? {}) as Json)) {
          if (json(r)?.schema !== undefined) answers.set(Number(status), lazy(() => compile('paths', path, method, 'responses', status, 'content', 'application/json', 'schema')));
        }
        const op: OperationContract = {
          method: method.toUpperCase(),
          path,
          operationId: String(operation.operationId),
          takesBody,
          checkRequest: (body) => {
            // A body where the description has none, or none where it needs one, is as wrong as a malformed one.
            if (!request) return body === undefined ? [] : ['this operation takes no request body'];
            if (body === undefined) return ['the request body is missing'];
            const v = request();
            return v(body) ? [] : problems(v.errors);
          },
          checkAnswer: (status, body) => {
            const v = answers.get(status)?.();
            if (!v) return undefined;
            return v(body) ? [] : problems(v.errors);
          },
        };
        const pattern = new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`);
        this.operations.push({ method: op.method, pattern, op });
      }
    }
  }

  /** The operation a request goes to, by its method and its concrete path (with the /api/v1 base). */
  operation(method: string, path: string): OperationContract | undefined {
    const m = method.toUpperCase();
    // A literal path wins over a template that would also match it.
    const matching = this.operations.filter((o) => o.method === m && o.pattern.test(path));
    return matching.find((o) => !o.op.path.includes('{'))?.op ?? matching[0]?.op;
  }
}

let loaded: LambdaContract | undefined;

/** The pinned description, read and compiled once per process. */
export function lambdaContract(): LambdaContract {
  loaded ??= new LambdaContract(JSON.parse(readFileSync(fileURLToPath(DESCRIPTION_URL), 'utf8')) as Json);
  return loaded;
}

function lazy<T>(make: () => T): () => T {
  let made: { v: T } | undefined;
  return () => (made ??= { v: make() }).v;
}

/** Ajv's errors as short sentences naming the field, at most a handful (an anyOf miss lists every branch). */
function problems(errors: ErrorObject[] | null | undefined): string[] {
  const out = new Set<string>();
  for (const e of errors ?? []) {
    const at = e.instancePath === '' ? 'the body' : e.instancePath.slice(1).replace(/\//g, '.');
    if (e.keyword === 'additionalProperties') {
      const field = (e.params as { additionalProperty: string }).additionalProperty;
      out.add(`${at === 'the body' ? field : `${at}.${field}`} is not a field the API describes`);
    } else if (e.keyword === 'const') out.add(`${at} must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}`);
    else out.add(`${at} ${e.message ?? 'is invalid'}`);
  }
  return [...out].slice(0, 8);
}

// The positions in a JSON Schema that hold one schema, a list of them, or a map of them.
const ONE = ['additionalProperties', 'items', 'not', 'contains', 'propertyNames', 'if', 'then', 'else', 'unevaluatedItems', 'unevaluatedProperties'];
const LIST = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const MAP = ['properties', 'patternProperties', '$defs', 'dependentSchemas'];

/** A copy of the description in which every object schema that leaves unnamed fields open is closed (see the top of the file). */
function closeObjects(description: Json): Json {
  const doc = structuredClone(description);
  const close = (s: unknown): void => {
    if (!s || typeof s !== 'object' || Array.isArray(s)) return;
    const schema = s as Json;
    if (schema.properties && schema.additionalProperties === undefined && schema.patternProperties === undefined && schema.unevaluatedProperties === undefined) {
      schema.additionalProperties = false;
    }
    for (const k of ONE) close(schema[k]);
    for (const k of LIST) if (Array.isArray(schema[k])) (schema[k] as unknown[]).forEach(close);
    for (const k of MAP) if (schema[k] && typeof schema[k] === 'object') Object.values(schema[k] as Json).forEach(close);
  };
  for (const s of Object.values(((doc.components as Json | undefined)?.schemas ?? {}) as Json)) close(s);
  const media = (x: unknown) => Object.values((((x as Json | undefined)?.content ?? {}) as Json)).forEach((m) => close((m as Json).schema));
  for (const item of Object.values((doc.paths ?? {}) as Record<string, Json>)) {
    for (const o of Object.values(item)) {
      if (!o || typeof o !== 'object') continue;
      media((o as Json).requestBody);
      for (const r of Object.values(((o as Json).responses ?? {}) as Json)) media(r);
    }
  }
  return doc;
}
