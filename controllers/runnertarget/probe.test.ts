import { describe, expect, it } from '@jest/globals';
import { parseProbe } from './probe.js';

const psi = (some: number) => `some avg10=0.00 avg60=${some.toFixed(2)} avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0`;
const head = (files: Record<string, string>) => Object.entries(files).map(([f, t]) => `==> ${f} <==\n${t}\n`).join('\n');

describe('parseProbe', () => {
  it.each([
    ['a job process', 'running', 'running'],
    ['no job process', 'none', 'none'],
    ['an answer cut short', '', 'unknown'],
  ])('%s', (_what, job, expected) => {
    const out = head({ '/proc/pressure/cpu': psi(12), '/proc/pressure/memory': psi(0), '/proc/pressure/io': psi(3), job });
    expect(parseProbe(out)).toMatchObject({ job: expected, pressure: { cpu: { some: { avg60: 12 } }, io: { some: { avg60: 3 } } } });
  });

  it('a kernel without PSI gives no pressure evidence, but the job answer stands', () => {
    const p = parseProbe(head({ job: 'none' }));
    expect(p).toEqual({ job: 'none' });
  });
});
