// What `leasehold run` loads before it reaches the machine. Node's start-up
// and @kubernetes/client-node's loading were most of a run's overhead over
// plain ssh (bench/README.md, "cli"); this keeps client-node, XState and the
// zod schemas out of a run's way.
import { describe, expect, it } from '@jest/globals';
import { build, type Metafile } from 'esbuild';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { BUNDLE_OPTIONS, CLI_ENTRY } from './bundle.js';

/**
 * The source modules a run evaluates: the CLI built as the bundle is, but
 * with each import() in a chunk of its own, then what the entry chunk and
 * the run command's chunk import statically, transitively.
 */
async function runModules(): Promise<string[]> {
  const outdir = mkdtempSync(join(tmpdir(), 'leasehold-startup-'));
  const { metafile } = await build({ ...BUNDLE_OPTIONS, outdir, splitting: true, write: false, metafile: true, minify: false, logLevel: 'silent' });
  const outputs: Metafile['outputs'] = metafile.outputs;
  const start = Object.keys(outputs).filter((o) => outputs[o]!.entryPoint === CLI_ENTRY || outputs[o]!.entryPoint === 'cli/run.ts');
  const seen = new Set<string>();
  const walk = (o: string) => {
    if (seen.has(o)) return;
    seen.add(o);
    for (const i of outputs[o]!.imports) if (i.kind === 'import-statement' && !i.external) walk(i.path);
  };
  start.forEach(walk);
  return [...seen].flatMap((o) => Object.keys(outputs[o]!.inputs)).map((i) => relative(process.cwd(), i));
}

describe('leasehold run start-up', () => {
  it('loads neither @kubernetes/client-node nor XState nor zod, and does load its own client and ssh2', async () => {
    const modules = await runModules();
    const packages = new Set(modules.filter((m) => m.includes('node_modules/')).map((m) => m.replace(/.*node_modules\/((@[^/]+\/)?[^/]+).*/, '$1')));
    expect([...packages].filter((p) => ['@kubernetes/client-node', 'xstate', 'zod'].includes(p))).toEqual([]);
    expect(modules.filter((m) => /^(cli\/kube-client-node|src\/api\/(index|runnertarget|peerfleet|crd))\.ts$/.test(m))).toEqual([]);
    // The walk found the run's own path, so the absences above mean something.
    expect(modules).toContain('cli/kube-http.ts');
    expect(modules.some((m) => m.includes('node_modules/ssh2/'))).toBe(true);
  }, 60_000);
});
