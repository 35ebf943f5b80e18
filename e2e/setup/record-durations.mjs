// Records per-file e2e times for the shard split: reads jest --json result files
// (npx jest --selectProjects e2e --json --outputFile=F) and merges each file's
// time into durations.json. Usage: node e2e/setup/record-durations.mjs F...
import { readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';

const out = new URL('./durations.json', import.meta.url);
const seconds = JSON.parse(readFileSync(out, 'utf8'));
for (const file of process.argv.slice(2)) {
  for (const r of JSON.parse(readFileSync(file, 'utf8')).testResults) {
    seconds[relative(process.cwd(), r.name)] = Math.round((r.endTime - r.startTime) / 1000);
  }
}
const sorted = Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => (a < b ? -1 : 1)));
writeFileSync(out, `${JSON.stringify(sorted, null, 2)}\n`);
const total = Object.values(sorted).reduce((n, s) => n + s, 0);
console.log(`${Object.keys(sorted).length} files, ${total} s in all`);
