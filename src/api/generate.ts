// Writes crds/ and the Helm chart's copy (charts/leasehold/crds/) from the
// zod schemas: `npm run gen:crds`.

import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GROUP } from './common.js';
import { renderCRDs } from './crd.js';

export const CRDS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'crds');
/** Helm installs whatever is in a chart's crds/ before the templates; it must equal crds/. */
export const CHART_CRDS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'charts', 'leasehold', 'crds');

export function writeCRDs(dir = CRDS_DIR): string[] {
  mkdirSync(dir, { recursive: true });
  const files = renderCRDs();
  for (const old of readdirSync(dir)) {
    if (old.startsWith(`${GROUP}_`) && old.endsWith('.yaml') && !(old in files)) rmSync(join(dir, old));
  }
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return Object.keys(files);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const name of writeCRDs()) console.log(`wrote crds/${name}`);
  for (const name of writeCRDs(CHART_CRDS_DIR)) console.log(`wrote charts/leasehold/crds/${name}`);
}
