// The import rules of the tree, read from the source: a kind's controller
// never imports another kind's (what two kinds share sits below them, in
// src/); src/ and controllers/ never import cli/, cmd/ or e2e/, nor cli/
// controllers/; a unit test needs nothing from e2e/ (a test against an
// emulator of e2e/fakes is named *.emulator.test.ts and runs in the
// emulators project); no module imports itself through others; and every
// kind is registered in the same shape.
import { describe, it, expect } from '@jest/globals';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIRS = ['src', 'controllers', 'cli', 'cmd', 'e2e', 'bench'];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sources(path);
    return /\.(ts|mts|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The file a relative specifier names: `./x.js` is written for `./x.ts`. */
function resolveImport(from: string, spec: string): string | undefined {
  const base = resolve(dirname(from), spec);
  for (const c of [base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mts'), base, `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(c) && statSync(c).isFile()) return relative(ROOT, c);
  }
  return undefined;
}

const IMPORT = /^\s*(?:import|export)\s[^;]*?\sfrom\s+['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)|^\s*import\s+['"](\.[^'"]+)['"]/gms;

/** Every file under DIRS with the files it imports (type-only imports too: they tie the files together just the same). */
const graph = new Map<string, string[]>();
for (const file of DIRS.flatMap((d) => sources(join(ROOT, d)))) {
  const deps = new Set<string>();
  for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const target = resolveImport(file, (m[1] ?? m[2] ?? m[3])!);
    if (target) deps.add(target);
  }
  graph.set(relative(ROOT, file), [...deps]);
}
const edges = [...graph].flatMap(([from, deps]) => deps.map((to) => ({ from, to })));
const isTest = (f: string) => /\.test\.ts$/.test(f);
const topOf = (f: string) => f.split('/')[0]!;

/** The strongly connected components of more than one file, or of a file importing itself (Tarjan). */
function cycles(): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('the import rules of the tree', () => {
  it('reads the tree: the graph has the files and their imports', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get('cmd/controller.ts')).toContain('controllers/lease/register.ts');
  });

  it('no kind imports another kind: controllers/<kind> imports only its own folder among controllers/', () => {
    const kindOf = (f: string) => (f.startsWith('controllers/') ? f.split('/')[1] : undefined);
    const crossing = edges.filter(({ from, to }) => kindOf(from) && kindOf(to) && kindOf(from) !== kindOf(to));
    expect(crossing.map(({ from, to }) => `${from} -> ${to}`)).toEqual([]);
  });

  it('src/ and controllers/ code imports nothing from cli/, cmd/ or e2e/', () => {
    const upward = edges.filter(({ from, to }) => ['src', 'controllers'].includes(topOf(from)) && !isTest(from) && ['cli', 'cmd', 'e2e'].includes(topOf(to)));
    expect(upward.map(({ from, to }) => `${from} -> ${to}`)).toEqual([]);
  });

  it('cli/ imports nothing from controllers/: what the CLI shares with a controller is in src/', () => {
    const reaching = edges.filter(({ from, to }) => topOf(from) === 'cli' && topOf(to) === 'controllers');
    expect(reaching.map(({ from, to }) => `${from} -> ${to}`)).toEqual([]);
  });

  it('unit tests import nothing from e2e/: a test against an emulator is named *.emulator.test.ts', () => {
    const unit = (f: string) => ['src', 'controllers', 'cli', 'cmd'].includes(topOf(f)) && isTest(f) && !f.endsWith('.emulator.test.ts');
    // What a unit test imports from its own package may not reach e2e/ either: each crossing into e2e/ is named once.
    const crossings = (start: string): string[] => {
      const seen = new Set<string>([start]);
      const queue = [start];
      const found: string[] = [];
      while (queue.length) {
        const f = queue.shift()!;
        for (const d of graph.get(f) ?? []) {
          if (topOf(d) === 'e2e') found.push(f === start ? d : `${f} -> ${d}`);
          else if (!seen.has(d)) (seen.add(d), queue.push(d));
        }
      }
      return found;
    };
    const reaching = [...graph.keys()].filter(unit).flatMap((f) => crossings(f).map((c) => `${f} -> ${c}`));
    expect(reaching).toEqual([]);
  });

  it(`no import cycle in ${DIRS.join(', ')}`, () => {
    expect(cycles().map((c) => c.join(' <-> '))).toEqual([]);
  });

  it('every kind registers the same way: register<Kind>Controller(mgr, <Kind>ControllerOptions extends ControllerOptions): <Kind>Reconciler', () => {
    const kinds = readdirSync(join(ROOT, 'controllers'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(kinds.length).toBeGreaterThanOrEqual(4);
    const off = kinds.flatMap((kind) => {
      const src = readFileSync(join(ROOT, 'controllers', kind, 'register.ts'), 'utf8');
      const fn = /^export function register(\w+)Controller\(mgr: Manager, opts: (\w+)ControllerOptions\): (\w+)Reconciler \{/m.exec(src);
      if (!fn || ![fn[1], fn[2], fn[3]].every((k) => k!.toLowerCase() === kind)) return [`controllers/${kind}/register.ts: no register<Kind>Controller(mgr: Manager, opts: <Kind>ControllerOptions): <Kind>Reconciler`];
      if (!new RegExp(`^export interface ${fn[2]}ControllerOptions extends ControllerOptions \\{`, 'm').test(src)) return [`controllers/${kind}/register.ts: ${fn[2]}ControllerOptions does not extend ControllerOptions`];
      if (!/mgr\.add\(\{ name: '\w+', concurrency: opts\.concurrency,/.test(src)) return [`controllers/${kind}/register.ts: its queue's workers are not opts.concurrency`];
      return [];
    });
    expect(off).toEqual([]);
  });
});
