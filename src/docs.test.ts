// The documentation, README.md and every page under docs/, checked without a
// cluster: the YAML it shows parses, each leasehold.dev object in it is valid
// against the API's own schemas (the ones crds/ is generated from), chart
// values it shows exist in the chart, every spec field of every kind is named
// somewhere, and every relative link and #anchor leads somewhere.
import { describe, it, expect } from '@jest/globals';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { API_VERSION, GROUP, KINDS, structuralOf } from './api/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const text = (page: string) => readFileSync(join(ROOT, page), 'utf8');

interface Block {
  page: string;
  line: number;
  yaml: string;
}

/** The ```yaml blocks of a page, and the YAML fed to a command in a ```sh block (`<<'YAML'` ... `YAML`). */
function yamlBlocks(page: string, src: string): Block[] {
  const out: Block[] = [];
  const lines = src.split('\n');
  let fence: { lang: string; line: number; body: string[] } | undefined;
  let heredoc: { line: number; body: string[] } | undefined;
  lines.forEach((l, i) => {
    if (!fence) {
      const m = /^```(\S*)/.exec(l);
      if (m) fence = { lang: m[1]!, line: i + 1, body: [] };
      return;
    }
    if (l.startsWith('```')) {
      if (fence.lang === 'yaml') out.push({ page, line: fence.line, yaml: fence.body.join('\n') });
      fence = undefined;
      return;
    }
    fence.body.push(l);
    if (fence.lang !== 'sh') return;
    if (heredoc) {
      if (l === 'YAML') {
        out.push({ page, line: heredoc.line, yaml: heredoc.body.join('\n') });
        heredoc = undefined;
      } else heredoc.body.push(l);
    } else if (/<<\s*'?YAML'?\s*$/.test(l)) heredoc = { line: i + 1, body: [] };
  });
  return out;
}

const blocks = PAGES.flatMap((p) => yamlBlocks(p, text(p)));

// An SSH key shown as `AAAA...` stands for the reader's own; give the schema one of the right form.
const KEY_PLACEHOLDER = /AAAA\.\.\./g;
const SOME_KEY = 'AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';

/** Paths of `value` that the chart's values.yaml does not have (maps that are empty there take any key). */
function unknownValues(value: unknown, chart: unknown, path: string[] = []): string[] {
  if (!isMap(value) || !isMap(chart) || Object.keys(chart).length === 0) return [];
  return Object.entries(value).flatMap(([k, v]) => (k in chart ? unknownValues(v, chart[k], [...path, k]) : [[...path, k].join('.')]));
}
function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

describe('YAML in README.md and docs/', () => {
  it('is read from every page, and shows every kind', () => {
    const pages = new Set(blocks.map((b) => b.page));
    expect([...pages]).toEqual(expect.arrayContaining(['README.md', 'docs/lease.md', 'docs/offer.md', 'docs/peerfleet.md', 'docs/runnertarget.md', 'docs/tenancy.md']));
    const kinds = new Set(blocks.flatMap((b) => YAML.parseAllDocuments(b.yaml).map((d) => d.toJS()?.kind)));
    for (const def of KINDS) expect(kinds).toContain(def.kind);
  });

  it.each(blocks.map((b) => [`${b.page}:${b.line}`, b] as const))('%s parses, and what it shows is valid', (_, b) => {
    const chart = YAML.parse(readFileSync(join(ROOT, 'charts', 'leasehold', 'values.yaml'), 'utf8'));
    for (const doc of YAML.parseAllDocuments(b.yaml)) {
      expect(doc.errors.map((e) => e.message)).toEqual([]);
      const obj = doc.toJS();
      if (!isMap(obj)) throw new Error(`${b.page}:${b.line}: not a mapping`);
      if (typeof obj.apiVersion === 'string' && obj.apiVersion.startsWith(`${GROUP}/`)) {
        expect(obj.apiVersion).toBe(API_VERSION);
        const def = KINDS.find((k) => k.kind === obj.kind);
        expect(def?.kind).toBe(obj.kind);
        const parsed = def!.schema.safeParse(YAML.parse(YAML.stringify(obj).replace(KEY_PLACEHOLDER, SOME_KEY)));
        expect(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([]);
      } else if (obj.apiVersion === undefined && obj.kind === undefined) {
        // Chart values, as given to helm with -f.
        expect(unknownValues(obj, chart)).toEqual([]);
      }
    }
  });
});

describe('README.md and docs/', () => {
  const docs = PAGES.map(text).join('\n');

  it.each(KINDS.map((d) => [d.kind, d] as const))('name every spec field of %s', (_, def) => {
    const fields: string[] = [];
    const walk = (s: Record<string, unknown>, path: string) => {
      for (const [k, v] of Object.entries((s.properties ?? {}) as Record<string, Record<string, unknown>>)) {
        fields.push(`${path}${k}`);
        walk(v, `${path}${k}.`);
      }
      if (s.items) walk(s.items as Record<string, unknown>, path);
    };
    walk(structuralOf(def.spec) as Record<string, unknown>, '');
    expect(fields.length).toBeGreaterThan(0);
    expect(fields.filter((f) => !new RegExp(`\\b${f.split('.').pop()}\\b`).test(docs))).toEqual([]);
  });

  /** GitHub's anchors: headings (lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats) and explicit ids. */
  function anchors(src: string): Set<string> {
    const out = new Set<string>();
    const seen = new Map<string, number>();
    let fence = false;
    for (const l of src.split('\n')) {
      if (l.startsWith('```')) fence = !fence;
      if (fence) continue;
      const h = /^#{1,6} (.*)$/.exec(l);
      if (h) {
        const slug = h[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, '').replace(/ /g, '-');
        const n = seen.get(slug) ?? 0;
        seen.set(slug, n + 1);
        out.add(n === 0 ? slug : `${slug}-${n}`);
      }
      for (const m of l.matchAll(/<a (?:id|name)="([^"]+)"/g)) out.add(m[1]!);
    }
    return out;
  }

  const links = PAGES.flatMap((page) => {
    const found: [string, string][] = [];
    let fence = false;
    for (const l of text(page).split('\n')) {
      if (l.startsWith('```')) fence = !fence;
      if (fence) continue;
      for (const m of l.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!/^[a-z]+:/.test(m[1]!)) found.push([page, m[1]!]);
      }
    }
    return found;
  });

  it('have relative links to check', () => {
    expect(links.length).toBeGreaterThan(20);
    expect(links.some(([page, link]) => page === 'README.md' && link.startsWith('docs/'))).toBe(true);
  });

  it.each(links)('%s: %s leads somewhere', (page, link) => {
    const [path, anchor] = link.split('#') as [string, string | undefined];
    const target = path === '' ? page : normalize(join(dirname(page), path));
    expect(existsSync(join(ROOT, target))).toBe(true);
    if (anchor !== undefined) expect([...anchors(text(target))]).toContain(anchor);
  });
});
