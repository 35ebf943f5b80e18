// Turns the zod schemas into CustomResourceDefinitions.
//
// z.toJSONSchema gives JSON Schema; Kubernetes wants a *structural* OpenAPI
// v3 schema: every node typed, no $ref, no anyOf/oneOf carrying types, no
// `additionalProperties` next to `properties`, and only the keywords
// apiextensions.k8s.io/v1 knows. toStructural enforces that, and throws with
// the path of anything it cannot express rather than emit a CRD the API server
// would refuse.

import { z } from 'zod';
import YAML from 'yaml';
import { API_VERSION, CATEGORY, GROUP, VERSION } from './common.js';
import { KINDS, type KindDefinition } from './kinds.js';

export { KINDS, type KindDefinition };

/** A JSON (Schema) value, loosely typed. */
export type JSONSchema = { [key: string]: unknown };

const PASS = new Set([
  'type',
  'format',
  'title',
  'description',
  'default',
  'enum',
  'nullable',
  'pattern',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'required',
]);

/** Keywords that carry nothing Kubernetes can use, dropped silently. */
const DROP = new Set(['$schema', '$id', 'id', 'propertyNames', 'examples', '$defs', 'definitions']);

export class SchemaError extends Error {
  constructor(path: string, what: string) {
    super(`${path || '<root>'}: ${what}`);
    this.name = 'SchemaError';
  }
}

function isObject(v: unknown): v is JSONSchema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Refuses regular-expression features Go's RE2 lacks. */
function checkRE2(path: string, pattern: string): void {
  if (/\(\?[=!]|\(\?<[=!]/.test(pattern)) throw new SchemaError(path, `pattern uses lookaround, which RE2 lacks: ${pattern}`);
  if (/\\[1-9]/.test(pattern)) throw new SchemaError(path, `pattern uses a backreference, which RE2 lacks: ${pattern}`);
}

/**
 * Converts one JSON Schema node (from z.toJSONSchema, target openapi-3.0) to
 * a structural schema node. `defs` resolves local $refs by inlining them.
 */
export function toStructural(node: JSONSchema, path = '', defs: JSONSchema = {}, seen: string[] = []): JSONSchema {
  if (typeof node.$ref === 'string') {
    const ref = node.$ref;
    const m = /^#\/(?:\$defs|definitions|components\/schemas)\/(.+)$/.exec(ref);
    const target = m ? defs[m[1] ?? ''] : undefined;
    if (!isObject(target)) throw new SchemaError(path, `cannot resolve $ref ${ref}`);
    if (seen.includes(ref)) throw new SchemaError(path, `recursive schema ${ref} cannot be structural`);
    const { $ref: _ignored, ...siblings } = node;
    return toStructural({ ...target, ...siblings }, path, defs, [...seen, ref]);
  }

  for (const k of ['anyOf', 'oneOf', 'allOf', 'not']) {
    if (k in node) {
      throw new SchemaError(
        path,
        `${k} cannot be expressed in a structural schema: use optional fields and a CEL rule (x-kubernetes-validations) instead`,
      );
    }
  }

  const out: JSONSchema = {};
  const preserve = node['x-kubernetes-preserve-unknown-fields'] === true;
  for (const [key, value] of Object.entries(node)) {
    if (DROP.has(key)) continue;
    if (key.startsWith('x-kubernetes-')) {
      out[key] = value;
      continue;
    }
    switch (key) {
      case 'properties': {
        if (!isObject(value)) throw new SchemaError(path, 'properties must be an object');
        const props: JSONSchema = {};
        for (const [name, sub] of Object.entries(value)) {
          if (!isObject(sub)) throw new SchemaError(`${path}.${name}`, 'schema must be an object');
          props[name] = toStructural(sub, `${path}.${name}`, defs, seen);
        }
        out.properties = props;
        break;
      }
      case 'additionalProperties': {
        if (value === false) break; // pruning already drops unknown fields
        if (value === true || (isObject(value) && Object.keys(value).length === 0)) {
          if (!preserve) {
            throw new SchemaError(
              path,
              'an open object needs x-kubernetes-preserve-unknown-fields: true set explicitly in its meta',
            );
          }
          break;
        }
        if (!isObject(value)) throw new SchemaError(path, 'additionalProperties must be a schema');
        if ('properties' in node) {
          throw new SchemaError(path, 'properties and an additionalProperties schema cannot be combined');
        }
        out.additionalProperties = toStructural(value, `${path}[*]`, defs, seen);
        break;
      }
      case 'items': {
        if (!isObject(value)) throw new SchemaError(path, 'items must be one schema (tuples are not structural)');
        out.items = toStructural(value, `${path}[*]`, defs, seen);
        break;
      }
      case 'minimum':
      case 'maximum': {
        // z.int() adds the safe-integer range; Kubernetes integers are int64.
        if (typeof value === 'number' && Math.abs(value) === Number.MAX_SAFE_INTEGER) break;
        out[key] = value;
        break;
      }
      case 'pattern': {
        if (typeof value !== 'string') throw new SchemaError(path, 'pattern must be a string');
        // Formats Kubernetes validates itself need no (ECMAScript-flavoured) zod pattern.
        if (node.format === 'date-time' || node.format === 'email') break;
        checkRE2(path, value);
        out.pattern = value;
        break;
      }
      case 'uniqueItems': {
        if (value === true) throw new SchemaError(path, 'uniqueItems: true is refused by Kubernetes; use x-kubernetes-list-type: set');
        break;
      }
      default: {
        if (!PASS.has(key)) throw new SchemaError(path, `keyword ${key} is not supported in a CRD schema`);
        out[key] = value;
      }
    }
  }

  if (typeof out.type !== 'string' && !preserve && out['x-kubernetes-int-or-string'] !== true) {
    throw new SchemaError(path, 'every node of a structural schema needs a type');
  }
  if (out.type === 'object' && out.properties === undefined && out.additionalProperties === undefined && !preserve) {
    throw new SchemaError(path, 'an object needs properties, additionalProperties or x-kubernetes-preserve-unknown-fields');
  }
  return out;
}

/** The JSON Schema of a zod schema, as the CRD generator sees it. */
export function jsonSchemaOf(schema: z.ZodType): JSONSchema {
  return z.toJSONSchema(schema, { io: 'input', target: 'openapi-3.0', unrepresentable: 'throw' }) as JSONSchema;
}

/** The structural schema of a zod schema. */
export function structuralOf(schema: z.ZodType, path = ''): JSONSchema {
  const json = jsonSchemaOf(schema);
  const defs = { ...(isObject(json.$defs) ? json.$defs : {}), ...(isObject(json.definitions) ? json.definitions : {}) };
  return toStructural(json, path, defs);
}

function descriptionOf(schema: z.ZodType): string {
  const d = z.globalRegistry.get(schema)?.description ?? schema.description;
  if (!d) throw new Error('every kind needs a description');
  return d;
}

/** The openAPIV3Schema of one kind. */
export function openAPISchemaFor(def: KindDefinition): JSONSchema {
  return {
    type: 'object',
    description: descriptionOf(def.schema),
    properties: {
      apiVersion: {
        type: 'string',
        description: `The versioned schema of this representation of the object: ${API_VERSION}.`,
      },
      kind: {
        type: 'string',
        description: `The REST resource this object represents: ${def.kind}.`,
      },
      metadata: { type: 'object' },
      spec: structuralOf(def.spec, '.spec'),
      status: structuralOf(def.status, '.status'),
    },
    required: ['spec'],
  };
}

/** Sorts the keys of every map, recursively; arrays keep their order. */
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (!isObject(v)) return v;
  const out: JSONSchema = {};
  for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k]);
  return out;
}

export function crdName(def: KindDefinition): string {
  return `${def.plural}.${GROUP}`;
}

export function crdFileName(def: KindDefinition): string {
  return `${GROUP}_${def.plural}.yaml`;
}

/** The CustomResourceDefinition of one kind, as a plain object. */
export function crdFor(def: KindDefinition): JSONSchema {
  const version: JSONSchema = {
    name: VERSION,
    served: true,
    storage: true,
    subresources: { status: {} },
    additionalPrinterColumns: def.printerColumns.map((c) => ({
      name: c.name,
      type: c.type,
      ...(c.format ? { format: c.format } : {}),
      jsonPath: c.jsonPath,
      description: c.description,
      ...(c.priority !== undefined ? { priority: c.priority } : {}),
    })),
    ...(def.selectableFields ? { selectableFields: def.selectableFields.map((jsonPath) => ({ jsonPath })) } : {}),
    schema: { openAPIV3Schema: sortKeys(openAPISchemaFor(def)) },
  };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: crdName(def),
      labels: { 'app.kubernetes.io/part-of': 'leasehold' },
    },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: def.shortNames,
        categories: [CATEGORY],
      },
      scope: def.scope,
      versions: [version],
    },
  };
}

export const CRD_HEADER = '# generated by `npm run gen:crds`; do not edit.\n';

/** Renders one CRD as YAML text (header comment included). */
export function renderCRD(def: KindDefinition): string {
  // YAML 1.1 quoting (yes/no/on/off stay strings) matches what the Go YAML
  // readers of kubectl and the API server assume.
  const body = YAML.stringify(crdFor(def), { lineWidth: 0, version: '1.1' });
  return CRD_HEADER + '---\n' + body;
}

/** Every CRD, keyed by its file name under crds/. */
export function renderCRDs(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const def of [...KINDS].sort((a, b) => a.plural.localeCompare(b.plural))) out[crdFileName(def)] = renderCRD(def);
  return out;
}
