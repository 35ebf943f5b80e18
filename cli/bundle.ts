// The CLI as one minified file (npm's bin and the krew plugin are both this
// file): Node then reads one file instead of resolving hundreds of modules,
// and the modules a command does not use are never evaluated (main.ts
// imports each command when it is picked). esbuild: maintained, one package
// with no dependencies beyond its binary, runs on Node 20 (engines >=18), and
// the TypeScript it compiles is what tsx already runs here.
//
//   node --import tsx cli/bundle.ts [OUTFILE]     (default dist/bin/leasehold.mjs)
import { build, type BuildOptions } from 'esbuild';
import { chmodSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const CLI_ENTRY = 'cmd/leasehold.ts';
export const CLI_BUNDLE = 'dist/bin/leasehold.mjs';

/** The build, apart from where it goes: the keep-it test builds the same with its modules split out. */
export const BUNDLE_OPTIONS: BuildOptions = {
  entryPoints: [CLI_ENTRY],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  minify: true,
  legalComments: 'none',
  // ssh2's optional native speed-ups: ssh2 falls back to JavaScript without them.
  external: ['cpu-features', '*.node'],
  // ssh2 and other CommonJS packages call require() and read __dirname, which an ES module lacks.
  banner: {
    js: "import { createRequire as __lhRequire } from 'node:module'; import { fileURLToPath as __lhPath } from 'node:url'; import { dirname as __lhDir } from 'node:path'; const require = __lhRequire(import.meta.url); const __filename = __lhPath(import.meta.url); const __dirname = __lhDir(__filename);",
  },
  logLevel: 'warning',
};

export async function bundleCLI(outfile = CLI_BUNDLE): Promise<void> {
  await build({ ...BUNDLE_OPTIONS, outfile });
  chmodSync(outfile, 0o755);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await bundleCLI(process.argv[2]);
