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
import {
  LEASE_NAMES,
  LeaseSchema,
  LeaseSpecSchema,
  LeaseStatusSchema,
} from './lease.js';
import {
  OFFER_NAMES,
  OfferSchema,
  OfferSpecSchema,
  OfferStatusSchema,
} from './offer.js';
import {
  PEERFLEET_NAMES,
  PeerFleetSchema,
  PeerFleetSpecSchema,
  PeerFleetStatusSchema,
} from './peerfleet.js';
import {
  RUNNERTARGET_NAMES,
  RunnerTargetSchema,
  RunnerTargetSpecSchema,
  RunnerTargetStatusSchema,
} from './runnertarget.js';

/** A JSON (Schema) value, loosely typed. */
export type JSONSchema = { [key: string]: unknown };

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description: string;
  priority?: number;
  format?: string;
}

export interface KindDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  scope: 'Namespaced' | 'Cluster';
  /** The whole object, for runtime validation. */
  schema: z.ZodType;
  spec: z.ZodType;
  status: z.ZodType;
  printerColumns: PrinterColumn[];
  /** Fields `kubectl get --field-selector` may use. */
  selectableFields?: string[];
}

const age: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description: 'Time since the object was created.',
};

function readyColumn(priority?: number): PrinterColumn {
  return {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
    description: 'Status of the Ready condition.',
    ...(priority !== undefined ? { priority } : {}),
  };
}

export const KINDS: readonly KindDefinition[] = [
  {
    ...LEASE_NAMES,
    scope: 'Namespaced',
    schema: LeaseSchema,
    spec: LeaseSpecSchema,
    status: LeaseStatusSchema,
    printerColumns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Where the lease is in its life.' },
      { name: 'Where', type: 'string', jsonPath: '.spec.where', description: 'What the machine must have.' },
      { name: 'Offer', type: 'string', jsonPath: '.status.offer', description: 'The Offer the machine came from.' },
      { name: 'Price/h', type: 'number', jsonPath: '.status.pricePerHour', description: 'US dollars per hour.' },
      { name: 'Host', type: 'string', jsonPath: '.status.machine.ssh.host', description: 'SSH host of the machine.' },
      { name: 'Ended', type: 'string', jsonPath: '.status.endReason', description: 'Why the lease ended (or is ending).' },
      age,
      {
        name: 'Instance-Type',
        type: 'string',
        jsonPath: '.status.instanceType',
        description: 'Provider instance type.',
        priority: 1,
      },
      { name: 'Region', type: 'string', jsonPath: '.status.region', description: 'Region of the machine.', priority: 1 },
      {
        name: 'Expires',
        type: 'string',
        jsonPath: '.status.expiresAt',
        description: 'When maxLifetime releases the machine.',
        priority: 1,
      },
    ],
    selectableFields: ['.spec.where', '.status.phase', '.status.offer'],
  },
  {
    ...OFFER_NAMES,
    scope: 'Cluster',
    schema: OfferSchema,
    spec: OfferSpecSchema,
    status: OfferStatusSchema,
    printerColumns: [
      readyColumn(),
      { name: 'Active', type: 'integer', jsonPath: '.status.activeLeases', description: 'Leases using the Offer.' },
      { name: 'Price/h', type: 'number', jsonPath: '.spec.pricePerHour', description: 'US dollars per hour.' },
      { name: 'Idle-Timeout', type: 'string', jsonPath: '.spec.idleTimeout', description: 'Idle time before release.' },
      { name: 'Max-Lifetime', type: 'string', jsonPath: '.spec.maxLifetime', description: 'Longest a lease lasts.' },
      age,
      {
        name: 'GPU',
        type: 'string',
        jsonPath: '.spec.command.shape.gpu',
        description: 'GPU model of a command Offer.',
        priority: 1,
      },
      {
        name: 'Max-Price/h',
        type: 'number',
        jsonPath: '.spec.lambda.maxPricePerHour',
        description: 'Price cap of a Lambda Offer.',
        priority: 1,
      },
      {
        name: 'Listed',
        type: 'date',
        jsonPath: '.status.lastListTime',
        description: 'Last successful listing.',
        priority: 1,
      },
    ],
  },
  {
    ...PEERFLEET_NAMES,
    scope: 'Namespaced',
    schema: PeerFleetSchema,
    spec: PeerFleetSpecSchema,
    status: PeerFleetStatusSchema,
    printerColumns: [
      { name: 'Origin', type: 'string', jsonPath: '.spec.origin', description: 'API server of the peer.' },
      { name: 'Peer-Namespace', type: 'string', jsonPath: '.spec.namespace', description: 'Namespace of the peer queue.' },
      { name: 'Ready', type: 'boolean', jsonPath: '.status.verdict.ready', description: 'Whether lending can start.' },
      { name: 'Listed', type: 'boolean', jsonPath: '.spec.listed', description: 'Whether our nodes are offered.' },
      { name: 'Price/GPU-h', type: 'number', jsonPath: '.spec.pricePerGPUHour', description: 'US dollars per GPU-hour.' },
      { name: 'Earned', type: 'number', jsonPath: '.status.accounting.amountUSD', description: 'US dollars earned.' },
      age,
      { name: 'Verdict', type: 'string', jsonPath: '.status.verdict.code', description: 'Readiness verdict.', priority: 1 },
    ],
  },
  {
    ...RUNNERTARGET_NAMES,
    scope: 'Namespaced',
    schema: RunnerTargetSchema,
    spec: RunnerTargetSpecSchema,
    status: RunnerTargetStatusSchema,
    printerColumns: [
      { name: 'Org', type: 'string', jsonPath: '.spec.github.org', description: 'GitHub organization.' },
      { name: 'Floor', type: 'integer', jsonPath: '.spec.floor', description: 'Hosts always kept.' },
      { name: 'Max', type: 'integer', jsonPath: '.spec.maxHosts', description: 'Most hosts at once.' },
      { name: 'Desired', type: 'integer', jsonPath: '.status.plan.desired', description: 'Hosts the last check wanted.' },
      { name: 'Spend-Today', type: 'number', jsonPath: '.status.spendTodayUSD', description: 'US dollars today.' },
      { name: 'Budget', type: 'number', jsonPath: '.spec.dailyBudgetUSD', description: 'US dollars per day.' },
      age,
      { name: 'Project', type: 'string', jsonPath: '.spec.gce.project', description: 'GCE project.', priority: 1 },
      readyColumn(1),
    ],
  },
];

// ---------------------------------------------------------------------------
// JSON Schema -> structural schema

/** Keywords apiextensions.k8s.io/v1 accepts and that pass through unchanged. */
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
