// Hostile acquire output the other command-provider tests leave out: endless
// output with no newline, numbers too big for a port, 10 MB before a valid
// target, invalid UTF-8 and NUL, brackets inside strings; a fast-check
// property that parseTarget never throws and always answers in bounded,
// printable words; and memory that stays flat over many hostile runs.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as fc from 'fast-check';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProviderError } from '../errors.js';
import { CommandProvider } from './provider.js';
import { STDOUT_CAP_BYTES } from './run.js';
import { parseTarget, salvageState } from './target.js';

const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBcSsYOJcAf4L5+P1tE3cpXVv3qqHlgqFgDg1VTnhUv6';
let dir = '';
let scripts = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-hostile-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function sh(body: string): string {
  const path = join(dir, `acquire-${++scripts}.sh`);
  writeFileSync(path, `#!/bin/bash\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

async function launchError(acquire: string): Promise<ProviderError> {
  const p = new CommandProvider({ acquire: [acquire], release: ['/bin/true'], acquireTimeoutMs: 30_000, releaseTimeoutMs: 5_000, killGraceMs: 500 });
  try {
    await p.launch({ leaseID: 'abcd1234', machineName: 'leasehold-abcd1234', offer: 'box', where: 'cpus>=1', controllerPublicKey: HOST_KEY, signal: new AbortController().signal, onProgress: () => {} });
  } catch (err) {
    return err as ProviderError;
  }
  throw new Error('acquire was expected to fail');
}

describe('hostile acquire output fails with InvalidTarget, quickly', () => {
  it.each([
    ['endless output with no newline', 'cat /dev/zero', /more than 16 KiB/],
    ['10 MB, then a valid target', `head -c 10000000 /dev/zero | tr '\\0' x; echo; echo '{"ssh":{"host":"10.0.0.5","host_key":"${HOST_KEY}"}}'`, /more than 16 KiB/],
    ['a port of 15000 digits', `printf '{"ssh":{"host":"10.0.0.5","port":'; head -c 15000 /dev/zero | tr '\\0' 9; echo ',"host_key":"${HOST_KEY}"}}'`, /ssh\.port is the number Infinity/],
    ['a port of 1e999', `echo '{"ssh":{"host":"10.0.0.5","port":1e999,"host_key":"${HOST_KEY}"}}'`, /ssh\.port is the number Infinity/],
    ['a port of 2^53+1', `echo '{"ssh":{"host":"10.0.0.5","port":9007199254740993,"host_key":"${HOST_KEY}"}}'`, /ssh\.port is the number 9007199254740992/],
    ['a negative zero port', `echo '{"ssh":{"host":"10.0.0.5","port":-0,"host_key":"${HOST_KEY}"}}'`, /ssh\.port is the number 0/],
    ['a bracket bomb just under the cap', `printf '{"url":"https://h","x":'; head -c 8000 /dev/zero | tr '\\0' '['; head -c 8000 /dev/zero | tr '\\0' ']'; echo '}'`, /nests JSON deeper than 32 levels/],
    ['an object bomb', `printf '{"url":"https://h","x":'; for i in $(seq 1 2000); do printf '{"a":'; done; printf 1; for i in $(seq 1 2000); do printf '}'; done; echo '}'`, /nests JSON deeper than 32 levels/],
    ['invalid UTF-8 and NUL in the last line', `printf '\\xff\\xfe\\x00{"url":"https://h"}\\x00\\n'`, /printed no JSON object/],
    ['a host holding NUL', `printf '{"ssh":{"host":"10.0.0.5\\\\u0000;reboot","host_key":"${HOST_KEY}"}}\\n'`, /ssh\.host .* is not a DNS name or IP address/],
  ])('%s', async (_, body, reason) => {
    const t0 = Date.now();
    const err = await launchError(sh(body));
    expect(err).toMatchObject({ kind: 'InvalidTarget' });
    expect(err.message).toMatch(reason);
    expect(err.message.length).toBeLessThan(1000);
    expect(err.message).not.toMatch(/[\x00-\x1f\x7f]/);
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('brackets inside strings do not count as nesting', () => {
    const line = JSON.stringify({ url: 'https://h', note: '['.repeat(5000) });
    expect(parseTarget(line).ok).toBe(true);
  });
});

describe('parseTarget on arbitrary input', () => {
  const nasty = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 300 }),
    fc.json({ depthSize: 'large' }),
    fc.jsonValue().map((v) => JSON.stringify({ ssh: v })),
    fc.record({ host: fc.oneof(fc.string(), fc.ipV4(), fc.ipV6(), fc.domain()), port: fc.oneof(fc.integer(), fc.double(), fc.string()), host_key: fc.string() }).map((ssh) => JSON.stringify({ ssh })),
    fc.nat({ max: 200 }).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`),
  );

  it('never throws; refusals are short and printable; acceptances are a sane target', () => {
    fc.assert(
      fc.property(nasty, (out) => {
        const r = parseTarget(out);
        if (!r.ok) {
          expect(r.reason.length).toBeLessThan(1000);
          expect(r.reason).not.toMatch(/[\x00-\x08\x0a-\x1f\x7f]/);
          return;
        }
        if (r.target.ssh) {
          expect(Number.isInteger(r.target.ssh.port)).toBe(true);
          expect(r.target.ssh.host).not.toMatch(/[\s;|&$`'"\\/]/);
        }
        expect(Buffer.byteLength(r.state)).toBeLessThanOrEqual(STDOUT_CAP_BYTES);
        expect(() => salvageState(out, false)).not.toThrow();
      }),
      { numRuns: 500 },
    );
  });
});

describe('memory', () => {
  it('stays bounded over 20 acquires that each print 10 MB', async () => {
    const script = sh('head -c 10000000 /dev/urandom');
    await launchError(script);
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 20; i++) await launchError(script);
    const grew = process.memoryUsage().rss - before;
    // 200 MB went past; what was kept is 16 KiB each at most.
    expect(grew).toBeLessThan(48 * 2 ** 20);
  }, 60_000);
});
