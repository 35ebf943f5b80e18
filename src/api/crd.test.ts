import { describe, it, expect } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { z } from 'zod';
import { CRD_HEADER, KINDS, SchemaError, crdFor, renderCRDs, structuralOf, toStructural, type JSONSchema } from './crd.js';
import { GROUP } from './common.js';
import { WHERE_PATTERN } from './where.js';

const CRDS = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'crds');

describe('crds/', () => {
  // crds/ and the Helm chart's copy in charts/leasehold/crds/.
  it.each(['crds', 'charts/leasehold/crds'])('%s/ is up to date with the zod schemas', (rel) => {
    const dir = join(CRDS, '..', rel);
    const want = renderCRDs();
    const have: Record<string, string> = {};
    for (const f of readdirSync(dir).filter((f) => f.startsWith(`${GROUP}_`) && f.endsWith('.yaml'))) {
      have[f] = readFileSync(join(dir, f), 'utf8');
    }
    const stale = Object.keys({ ...want, ...have }).filter((f) => want[f] !== have[f]);
    if (stale.length > 0) throw new Error(`${rel}/ is stale: run npm run gen:crds (differs: ${stale.join(', ')})`);
  });

  it('renders deterministically, with the header', () => {
    const a = renderCRDs();
    const b = renderCRDs();
    expect(a).toEqual(b);
    expect(Object.keys(a).sort()).toEqual([
      'leasehold.dev_leases.yaml',
      'leasehold.dev_offers.yaml',
      'leasehold.dev_peerfleets.yaml',
      'leasehold.dev_runnertargets.yaml',
    ]);
    for (const text of Object.values(a)) expect(text.startsWith(CRD_HEADER)).toBe(true);
  });

  it('parses back to the same CRD objects', () => {
    const files = renderCRDs();
    for (const def of KINDS) {
      const text = files[`${GROUP}_${def.plural}.yaml`]!;
      expect(YAML.parse(text)).toEqual(JSON.parse(JSON.stringify(crdFor(def))));
    }
  });
});

/** Walks every schema node with its path. */
function walk(node: JSONSchema, path: string, visit: (n: JSONSchema, p: string) => void): void {
  visit(node, path);
  const props = node.properties as Record<string, JSONSchema> | undefined;
  for (const [k, v] of Object.entries(props ?? {})) walk(v, `${path}.${k}`, visit);
  if (node.items) walk(node.items as JSONSchema, `${path}[*]`, visit);
  if (node.additionalProperties && typeof node.additionalProperties === 'object') {
    walk(node.additionalProperties as JSONSchema, `${path}{*}`, visit);
  }
}

describe.each(KINDS.map((d) => [d.kind, d] as const))('%s CRD', (_kind, def) => {
  const crd = crdFor(def) as any;
  const version = crd.spec.versions[0];
  const root = version.schema.openAPIV3Schema as JSONSchema;

  it('has the names, scope, subresource and category', () => {
    expect(crd.metadata.name).toBe(`${def.plural}.${GROUP}`);
    expect(crd.spec.names.categories).toEqual(['leasehold']);
    expect(crd.spec.names.shortNames.length).toBeGreaterThan(0);
    expect(crd.spec.names.listKind).toBe(`${def.kind}List`);
    expect(version.subresources).toEqual({ status: {} });
    expect(version.served && version.storage).toBe(true);
    expect(crd.spec.scope).toBe(def.kind === 'Offer' ? 'Cluster' : 'Namespaced');
  });

  it('is a structural schema', () => {
    walk(root, '', (n, p) => {
      const where = p || '<root>';
      expect({ where, type: typeof n.type }).toEqual({ where, type: 'string' });
      for (const k of ['$ref', '$schema', '$defs', 'anyOf', 'oneOf', 'allOf', 'not', 'const', 'propertyNames']) {
        expect({ where, k, present: k in n }).toEqual({ where, k, present: false });
      }
      if (n.properties !== undefined) expect({ where, ap: n.additionalProperties }).toEqual({ where, ap: undefined });
      expect({ where, ap: n.additionalProperties === false }).toEqual({ where, ap: false });
      if (n.type === 'object' && n.properties === undefined && n.additionalProperties === undefined) {
        // Only metadata is left for the API server to describe.
        expect(where).toBe('.metadata');
      }
      if (n.type === 'array') expect({ where, maxItems: typeof n.maxItems }).toEqual({ where, maxItems: 'number' });
      const rootScalar = where === '.apiVersion' || where === '.kind';
      if (n.type === 'string' && n.enum === undefined && n.format !== 'date-time' && !rootScalar) {
        expect({ where, maxLength: typeof n.maxLength }).toEqual({ where, maxLength: 'number' });
      }
      if (typeof n.pattern === 'string') expect(() => new RegExp(n.pattern as string)).not.toThrow();
    });
    expect(root.properties).toHaveProperty('spec');
    expect(root.properties).toHaveProperty('status');
    expect(root.required).toEqual(['spec']);
  });

  it('describes every field for kubectl explain', () => {
    walk(root, '', (n, p) => {
      if (p === '.metadata' || p.includes('[*]') || p.includes('{*}')) return;
      expect({ p, description: typeof n.description }).toEqual({ p, description: 'string' });
    });
    walk(root, '', (n, p) => {
      if (typeof n.description === 'string') expect({ p, empty: n.description.trim() === '' }).toEqual({ p, empty: false });
    });
  });

  it('has printer columns with an Age', () => {
    const cols = version.additionalPrinterColumns as Array<{ name: string; jsonPath: string }>;
    expect(cols.some((c) => c.jsonPath === '.metadata.creationTimestamp')).toBe(true);
  });
});

describe('Lease CRD details', () => {
  const lease = crdFor(KINDS.find((k) => k.kind === 'Lease')!) as any;
  const v = lease.spec.versions[0];
  const spec = v.schema.openAPIV3Schema.properties.spec;

  it('validates where at admission', () => {
    expect(spec.properties.where.pattern).toBe(new RegExp(WHERE_PATTERN).source);
    expect(spec.properties.where.maxLength).toBe(256);
    expect(spec.properties.where['x-kubernetes-validations'][0]).toEqual({
      rule: "self != '*'",
      message: expect.stringContaining('a Lease must name what it needs'),
    });
    expect(spec.properties.sshKeys.maxItems).toBe(16);
    expect(spec.required).toEqual(['where']);
  });

  it('has the documented columns', () => {
    const cols = v.additionalPrinterColumns.map((c: any) => [c.name.toUpperCase(), c.jsonPath, c.priority ?? 0]);
    expect(cols).toEqual([
      ['PHASE', '.status.phase', 0],
      ['WHERE', '.spec.where', 0],
      ['OFFER', '.status.offer', 0],
      ['PRICE/H', '.status.pricePerHour', 0],
      ['HOST', '.status.machine.ssh.host', 0],
      ['BUSY', '.status.usage.busy', 0],
      ['ENDED', '.status.endReason', 0],
      ['AGE', '.metadata.creationTimestamp', 0],
      ['INSTANCE-TYPE', '.status.instanceType', 1],
      ['REGION', '.status.region', 1],
      ['EXPIRES', '.status.expiresAt', 1],
    ]);
    expect(lease.spec.names.shortNames).toEqual(['lhl']);
  });

  it('keeps defaults and makes conditions a map keyed by type', () => {
    const status = v.schema.openAPIV3Schema.properties.status;
    expect(status.properties.conditions['x-kubernetes-list-type']).toBe('map');
    expect(status.properties.conditions['x-kubernetes-list-map-keys']).toEqual(['type']);
    const offer = crdFor(KINDS.find((k) => k.kind === 'Offer')!) as any;
    const ospec = offer.spec.versions[0].schema.openAPIV3Schema.properties.spec;
    expect(ospec.properties.idleTimeout.default).toBe('20m');
    expect(ospec.properties.maxLifetime.default).toBe('12h');
    expect(ospec.required).toBeUndefined();
    expect(ospec['x-kubernetes-validations'][0].rule).toBe('has(self.command) != has(self.lambda)');
  });
});

describe('toStructural', () => {
  it('drops what Kubernetes refuses and keeps what it needs', () => {
    const s = structuralOf(
      z
        .object({
          n: z.int().min(0).describe('n'),
          m: z.record(z.string(), z.string()).describe('m'),
          t: z.iso.datetime().describe('t'),
          e: z.enum(['a', 'b']).default('a').describe('e'),
          l: z.literal('x').describe('l'),
          p: z.number().positive().describe('p'),
        })
        .strict(),
    );
    expect(s).toEqual({
      type: 'object',
      properties: {
        n: { type: 'integer', minimum: 0, description: 'n' },
        m: { type: 'object', additionalProperties: { type: 'string' }, description: 'm' },
        t: { type: 'string', format: 'date-time', description: 't' },
        e: { type: 'string', enum: ['a', 'b'], default: 'a', description: 'e' },
        l: { type: 'string', enum: ['x'], description: 'l' },
        p: { type: 'number', minimum: 0, exclusiveMinimum: true, description: 'p' },
      },
      required: ['n', 'm', 't', 'l', 'p'],
    });
  });

  it('carries custom meta keys through', () => {
    const s = structuralOf(z.string().max(3).meta({ description: 'd', 'x-kubernetes-validations': [{ rule: 'self != "a"' }] }));
    expect(s).toEqual({ type: 'string', maxLength: 3, description: 'd', 'x-kubernetes-validations': [{ rule: 'self != "a"' }] });
  });

  it.each<[string, z.ZodType, RegExp]>([
    ['a union', z.object({ u: z.union([z.string(), z.number()]) }), /\.u: anyOf cannot be expressed/],
    ['an open object', z.object({ o: z.looseObject({ a: z.string() }) }), /\.o: an open object needs x-kubernetes-preserve-unknown-fields/],
    ['a lookahead', z.object({ e: z.string().regex(/^(?!a)b$/) }), /\.e: pattern uses lookaround/],
    ['a backreference', z.object({ e: z.string().regex(/^(a)\1$/) }), /\.e: pattern uses a backreference/],
    ['a tuple', z.object({ t: z.tuple([z.string(), z.number()]) }), /\.t(\[\*\])?: /],
    ['an untyped node', z.object({ a: z.any() }), /\.a: every node of a structural schema needs a type/],
  ])('refuses %s', (_name, schema, message) => {
    expect(() => structuralOf(schema)).toThrow(message);
  });

  it('inlines local $refs', () => {
    const node = toStructural(
      { type: 'object', properties: { a: { $ref: '#/$defs/A', description: 'a' } } },
      '',
      { A: { type: 'string' } },
    );
    expect(node).toEqual({ type: 'object', properties: { a: { type: 'string', description: 'a' } } });
    expect(() => toStructural({ $ref: '#/$defs/B' })).toThrow(SchemaError);
  });
});
