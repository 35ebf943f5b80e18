// Bad and hostile input, generated with fast-check and sent to the real API
// server with server-side validation (fieldValidation=Strict, dryRun=All
// first). Every spec is either refused at admission with an error that
// names the field path, or accepted and then handled by a running
// controller: held or failed with a clear reason, never crashing it, and
// never handing unvalidated input to a shell (a recording provider shows
// argv and the contract environment exactly as declared and documented).
// Hostile acquire output (binary, endless, 10 MB, JSON bombs, huge numbers)
// fails the Lease with InvalidTarget quickly, with the controller's memory
// bounded. Last, nothing the controller writes or serves holds its SSH
// private key or a token.
import { describe, it, expect } from '@jest/globals';
import * as fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYAML } from 'yaml';
import { LeaseSpecSchema, OfferSpecSchema } from '../src/api/index.js';
import { parseDuration } from '../src/api/duration.js';
import { API_VERSION } from '../src/api/group.js';
import { parseWhere } from '../src/api/where.js';
import { parsePublicKey } from '../src/machine/keys.js';
import { leaseManifest, offerManifest } from './support/builders.js';
import { getJSON, waitFor } from './support/kube.js';
import { SSHD_PROVIDER } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

const RUNS = Number(process.env.BADINPUT_RUNS ?? 100);
const GROUP_PATH = `/apis/${API_VERSION}`;

// ---------------------------------------------------------------------------
// A raw HTTPS client with the admin certificate of the test kubeconfig: one
// request per sample, no kubectl process each time.

interface Reply {
  status: number;
  body: any;
}

let tls: { host: string; port: number; ca: Buffer; cert: Buffer; key: Buffer };

function loadTLS() {
  const kc = parseYAML(readFileSync(process.env.E2E_KUBECONFIG!, 'utf8'));
  const cluster = kc.clusters[0].cluster;
  const user = kc.users[0].user;
  const url = new URL(cluster.server);
  tls = {
    host: url.hostname,
    port: Number(url.port),
    ca: readFileSync(cluster['certificate-authority']),
    cert: readFileSync(user['client-certificate']),
    key: readFileSync(user['client-key']),
  };
}

function api(method: string, path: string, body?: unknown): Promise<Reply> {
  const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: tls.host,
        port: tls.port,
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        method,
        path,
        headers: { 'content-type': 'application/json', accept: 'application/json', ...(data ? { 'content-length': data.length } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let parsed: any = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

/** Server-side validation only: nothing is stored. */
async function admit(kind: 'Lease' | 'Offer', obj: Record<string, unknown>, dryRun = true): Promise<Reply> {
  const path = kind === 'Lease' ? `${GROUP_PATH}/namespaces/${fx.ns}/leases` : `${GROUP_PATH}/offers`;
  return api('POST', `${path}?fieldValidation=Strict${dryRun ? '&dryRun=All' : ''}`, obj);
}

const accepted = (r: Reply) => r.status === 201 || r.status === 200;
const errorText = (r: Reply) => (typeof r.body === 'string' ? r.body : String(r.body?.message ?? JSON.stringify(r.body)));

/** A refusal must be a client error that names the field path. */
function expectRefusedAt(r: Reply, path: string | RegExp, sample: unknown) {
  const text = errorText(r);
  if (r.status < 400 || r.status >= 500) throw new Error(`expected ${JSON.stringify(sample)} to be refused, got ${r.status}: ${text}`);
  const ok = typeof path === 'string' ? text.includes(path) : path.test(text);
  if (!ok) throw new Error(`refusal of ${JSON.stringify(sample).slice(0, 300)} does not name ${path}: ${text.slice(0, 500)}`);
}

// The namespace is the request path's (admit), as a tenant's kubectl would leave it.
const leaseObj = (spec: Record<string, unknown>, name = `bad-${Math.random().toString(36).slice(2, 10)}`, metadata?: Parameters<typeof leaseManifest>[3]) =>
  leaseManifest(name, undefined, spec, metadata);
const offerObj = (spec: Record<string, unknown>, name = `bad-${Math.random().toString(36).slice(2, 10)}`) => offerManifest(name, spec);

// ---------------------------------------------------------------------------
// Fixtures: device keys, a recording provider, the controller.

const fx = leaseSuite('badinput', { maxLeases: 20, before: loadTLS, setupTimeoutMs: 60_000 });
const work = mkdtempSync(join(tmpdir(), 'leasehold-badinput-'));
const PWNED = join(work, 'pwned');

function keygen(type: string, bits?: string): string {
  const f = join(work, `key-${type}-${Math.random().toString(36).slice(2)}`);
  execFileSync('ssh-keygen', ['-q', '-t', type, ...(bits ? ['-b', bits] : []), '-N', '', '-C', 'device', '-f', f]);
  return readFileSync(`${f}.pub`, 'utf8').trim().split(' ').slice(0, 2).join(' ');
}
const KEYS = [keygen('ed25519'), keygen('ed25519'), keygen('ecdsa', '256'), keygen('rsa', '2048')];

/** Shell metacharacters, line breaks and NUL: what must never reach a shell unquoted. */
const HOSTILE = [
  `$(touch ${PWNED})`,
  `\`touch ${PWNED}\``,
  `; touch ${PWNED}`,
  `| touch ${PWNED}`,
  `&& touch ${PWNED}`,
  `'; touch ${PWNED}; '`,
  `"; touch ${PWNED}; "`,
  '*',
  '~root',
  '../../etc/passwd',
  '-oProxyCommand=touch /tmp/x',
  'a\nb',
  'a\r\nb',
  'a\u0000b',
  '\u202eevil',
  '\\',
  '${IFS}',
  '%s%n',
];

// The provider records its argv (NUL-separated) and its LEASEHOLD_* environment,
// then hands over to the sshd machine provider.
const RECORDER = join(work, 'record.sh');
writeFileSync(
  RECORDER,
  `#!/bin/bash
set -euo pipefail
out="$LEASEHOLD_MACHINES_DIR/record-\${LEASEHOLD_LEASE_ID}-$1"
printf '%s\\0' "$@" > "$out.argv"
env -0 | { grep -z '^LEASEHOLD_' || true; } > "$out.env"
exec ${SSHD_PROVIDER} "$1"
`,
);
chmodSync(RECORDER, 0o755);
/** Hostile arguments that a Linux argv can carry (no NUL: that one is refused at admission). */
const ARGV_EXTRA = HOSTILE.filter((a) => !a.includes('\u0000')).concat(['', ' lead and trail ', 'ünï✓', 'x'.repeat(4096)]);

function readRecord(leaseID: string, verb: string): { argv: string[]; env: Record<string, string> } | undefined {
  const base = join(fx.machines, `record-${leaseID}-${verb}`);
  if (!existsSync(`${base}.argv`)) return undefined;
  const argv = readFileSync(`${base}.argv`, 'utf8').split('\0').slice(0, -1);
  const env = Object.fromEntries(
    readFileSync(`${base}.env`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  return { argv, env };
}

// ---------------------------------------------------------------------------
// Arbitraries

const anyText = (maxLength: number) =>
  fc.oneof(
    fc.string({ maxLength }),
    fc.string({ unit: 'binary-ascii', maxLength }),
    fc.string({ unit: 'grapheme', maxLength }),
  );
const hostile = fc.constantFrom(...HOSTILE);
const withHostile = (base: fc.Arbitrary<string>) =>
  fc.tuple(base, hostile, fc.nat()).map(([s, h, i]) => {
    const at = s.length ? i % (s.length + 1) : 0;
    return s.slice(0, at) + h + s.slice(at);
  });

const VALID_TERMS = ['gpu', 'gpu=h100', 'gpus>=2', 'cpus>=1', 'cpus>=64', 'vram>=80', 'arch=amd64', 'arch=arm64', 'os=linux', 'os=darwin', 'tool=docker', 'tool=a+b', 'tool=x.y_z-1'];
const BAD_TERMS = ['gpu>=1', 'ram>=4', 'cpu=4', 'GPU', 'gpus>=0', 'cpus>=01', 'cpus>=-1', 'cpus>=1e3', 'vram>=1000000', 'arch=x86', 'os=plan9', 'tool=', 'tool=-x', 'gpu=', 'cpus>=', 'cpus >= 1', '', '*', 'gpu=' + 'h'.repeat(65), 'tool=' + 't'.repeat(65)];
const term = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...VALID_TERMS) }, { weight: 1, arbitrary: fc.constantFrom(...BAD_TERMS) });
const whereArb = fc.oneof(
  { weight: 4, arbitrary: fc.array(term, { minLength: 1, maxLength: 6 }).map((t) => t.join(',')) },
  { weight: 2, arbitrary: anyText(40) },
  { weight: 1, arbitrary: fc.constant('*') },
  { weight: 1, arbitrary: fc.string({ minLength: 257, maxLength: 3000 }) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom('cpus>=1', 'tool=abc', 'gpu'), { minLength: 80, maxLength: 200 }).map((t) => t.join(',')) },
  { weight: 2, arbitrary: withHostile(fc.array(fc.constantFrom(...VALID_TERMS), { minLength: 1, maxLength: 3 }).map((t) => t.join(','))) },
);

const comment = fc.oneof(fc.constant(''), fc.string({ maxLength: 40 }), hostile, anyText(20), fc.constant('c'.repeat(20000)));
const sshKeyArb = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...KEYS), comment).map(([k, c]) => (c ? `${k} ${c}` : k)) },
  { weight: 1, arbitrary: anyText(80) },
  // Matches the key pattern, but the key data is not a key.
  { weight: 2, arbitrary: fc.constantFrom('ssh-ed25519 AAAA', 'ssh-rsa AAAAB3NzaC1yc2E= x', 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==', `ssh-rsa ${KEYS[0]!.split(' ')[1]}`, 'ecdsa-sha2-nistp256 QUJD', 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI===') },
  { weight: 1, arbitrary: fc.constantFrom(...KEYS).map((k) => `command="touch ${PWNED}" ${k}`) },
  { weight: 1, arbitrary: fc.constantFrom(...KEYS).map((k) => `${k} one\n${KEYS[1]} smuggled`) },
  { weight: 1, arbitrary: fc.constantFrom(...KEYS).map((k) => `${k}\u0000x`) },
);
const sshKeysArb = fc.oneof(
  { weight: 4, arbitrary: fc.array(sshKeyArb, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom(...KEYS), { minLength: 17, maxLength: 40 }) },
);

const durationArb = fc.oneof(
  fc.constantFrom('20m', '0', '1ns', '1h30m', '.5s', '1.s', '2562047h', '2562048h', '9999999999999h', '99999999999999999999s', '-5m', '-0', '5', 'm', '1e9h', '1 h', '1H', '1d', '1w', '', 'P1D', '1µs', '1μs', 'NaN', 'Infinity'),
  fc.integer({ min: -100000, max: 100000 }).map((n) => `${n}s`),
  fc.bigInt({ min: 0n, max: 10n ** 30n }).map((n) => `${n}ms`),
  fc.string({ maxLength: 70 }),
  withHostile(fc.constantFrom('1m', '20m')),
);

const argvArb = fc.oneof(
  { weight: 4, arbitrary: fc.array(fc.oneof(hostile, anyText(50)), { minLength: 1, maxLength: 8 }) },
  { weight: 1, arbitrary: fc.constant([]) },
  { weight: 1, arbitrary: fc.array(fc.constant('x'), { minLength: 65, maxLength: 70 }) },
  { weight: 1, arbitrary: fc.constant(['/bin/true', 'x'.repeat(4097)]) },
);
const shapeArb = fc.record(
  {
    os: fc.oneof(fc.constantFrom('linux', 'darwin', 'windows', 'Linux', 'plan9'), anyText(10)),
    arch: fc.oneof(fc.constantFrom('amd64', 'arm64', 'x86_64'), anyText(10)),
    cpus: fc.oneof(fc.integer({ min: -5, max: 200000 }), fc.constantFrom(0, 1.5, 1e12, Number.MAX_SAFE_INTEGER)),
    gpu: fc.oneof(anyText(20), fc.string({ minLength: 129, maxLength: 300 }), hostile),
    gpus: fc.integer({ min: -2, max: 2000 }),
    tools: fc.array(fc.oneof(fc.constantFrom('docker', 'a+b'), hostile, anyText(10)), { maxLength: 70 }),
  },
  { requiredKeys: [] },
);

const FIELD_NAME = fc.stringMatching(/^[a-z][a-zA-Z0-9]{0,15}$/);

// ---------------------------------------------------------------------------

/** Accepted samples the zod schema (the source of truth) or the controller's own checks would refuse: the controller gets these. */
const acceptedButInvalid: { spec: any; why: string }[] = [];
const seenWhy = new Set<string>();
function keepForController(spec: any, why: string) {
  if (seenWhy.has(why) || acceptedButInvalid.length >= 6) return;
  seenWhy.add(why);
  acceptedButInvalid.push({ spec, why });
}

describe('admission of generated bad input', () => {
  it('where: refused at spec.where exactly when the where parser refuses it', async () => {
    await fc.assert(
      fc.asyncProperty(whereArb, async (where) => {
        const r = await admit('Lease', leaseObj({ where }));
        const parsed = parseWhere(where);
        if (parsed.ok) {
          if (!accepted(r)) throw new Error(`a where the parser accepts, ${JSON.stringify(where)}, was refused: ${errorText(r)}`);
        } else {
          expectRefusedAt(r, 'spec.where', where);
        }
      }),
      { numRuns: RUNS * 2 },
    );
  }, 120_000);

  it('sshKeys: bad keys, 17+ keys, line breaks, NUL and options are refused at spec.sshKeys; what passes is kept for the controller', async () => {
    await fc.assert(
      fc.asyncProperty(sshKeysArb, async (sshKeys) => {
        const spec = { where: 'cpus>=1', sshKeys };
        const r = await admit('Lease', leaseObj(spec));
        if (!accepted(r)) {
          expectRefusedAt(r, 'spec.sshKeys', sshKeys);
          return;
        }
        expect(sshKeys.length).toBeLessThanOrEqual(16);
        for (const [i, k] of sshKeys.entries()) {
          // Nothing that could become a second authorized_keys entry or an option gets in.
          expect(k).not.toMatch(/[\r\n\u0000]/);
          expect(k).toMatch(/^(ssh-|ecdsa-|sk-)/);
          const p = parsePublicKey(k);
          if (!p.ok) keepForController(spec, `sshKeys[${i}]: ${p.error}`);
        }
        if (!LeaseSpecSchema.safeParse(spec).success) keepForController(spec, 'zod refuses the Lease spec');
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('offer, names, annotations and unknown fields of a Lease are refused at their paths', async () => {
    const caseArb = fc.oneof(
      fc.record({ kind: fc.constant('offer' as const), v: fc.oneof(anyText(30), fc.string({ minLength: 254, maxLength: 400 }), hostile) }),
      fc.record({ kind: fc.constant('name' as const), v: fc.oneof(anyText(30), fc.string({ minLength: 254, maxLength: 400 }), hostile) }),
      fc.record({ kind: fc.constant('annotation' as const), k: fc.oneof(fc.constantFrom('leasehold.dev/activity', 'note'), anyText(20), hostile), v: fc.oneof(anyText(40), hostile) }),
      fc.record({ kind: fc.constant('unknownSpec' as const), k: FIELD_NAME.filter((k) => !['where', 'offer', 'sshKeys'].includes(k)) }),
      fc.record({ kind: fc.constant('unknownTop' as const), k: FIELD_NAME.filter((k) => !['spec', 'status', 'metadata', 'kind', 'apiVersion'].includes(k)) }),
    );
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const spec: Record<string, unknown> = { where: 'cpus>=1' };
        let obj: any;
        if (c.kind === 'offer') obj = leaseObj({ ...spec, offer: c.v });
        else if (c.kind === 'name') obj = leaseObj(spec, c.v);
        else if (c.kind === 'annotation') obj = leaseObj(spec, undefined, { annotations: { [c.k]: c.v } });
        else if (c.kind === 'unknownSpec') obj = leaseObj({ ...spec, [c.k]: 'x' });
        else obj = { ...leaseObj(spec), [c.k]: 'x' };
        const r = await admit('Lease', obj);
        if (c.kind === 'offer') {
          const valid = LeaseSpecSchema.safeParse(obj.spec).success;
          if (valid) expect(accepted(r)).toBe(true);
          else expectRefusedAt(r, 'spec.offer', c.v);
        } else if (c.kind === 'name') {
          const valid = c.v.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(c.v);
          if (valid) expect(accepted(r)).toBe(true);
          else expectRefusedAt(r, /metadata\.name|name: Invalid|name or generateName is required/, c.v);
        } else if (c.kind === 'annotation') {
          if (!accepted(r)) expectRefusedAt(r, 'metadata.annotations', c);
        } else if (c.kind === 'unknownSpec') {
          expectRefusedAt(r, `unknown field "spec.${c.k}"`, c);
        } else {
          expectRefusedAt(r, `unknown field "${c.k}"`, c);
        }
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('Offer durations: negative, unit-less, absurd and overflowing ones are refused at their path; an accepted one always parses', async () => {
    await fc.assert(
      fc.asyncProperty(durationArb, fc.constantFrom('idleTimeout', 'maxLifetime'), async (d, field) => {
        const spec = { command: { acquire: ['/bin/true'], release: ['/bin/true'], shape: { cpus: 1 } }, [field]: d };
        const r = await admit('Offer', offerObj(spec));
        if (accepted(r)) {
          // The controller computes expiresAt and timers from it: it must parse.
          expect(() => parseDuration(d)).not.toThrow();
          expect(OfferSpecSchema.safeParse(spec).success).toBe(true);
        } else {
          expectRefusedAt(r, `spec.${field}`, d);
        }
      }),
      { numRuns: RUNS * 2 },
    );
  }, 120_000);

  it('Offer commands and shapes: refused at their path unless the schema accepts them; no NUL reaches an argv', async () => {
    await fc.assert(
      fc.asyncProperty(argvArb, shapeArb, fc.boolean(), async (acquire, shape, bad) => {
        const spec = { command: { acquire: bad ? acquire : ['/bin/true'], release: ['/bin/true'], shape: bad ? { cpus: 1 } : shape } };
        const r = await admit('Offer', offerObj(spec));
        const zodOk = OfferSpecSchema.safeParse(spec).success;
        if (accepted(r)) {
          expect(zodOk).toBe(true);
          for (const a of spec.command.acquire) expect(a).not.toContain('\u0000');
        } else {
          expectRefusedAt(r, bad ? 'spec.command.acquire' : 'spec.command.shape', spec.command);
          expect(zodOk).toBe(false);
        }
      }),
      { numRuns: RUNS * 2 },
    );
  }, 120_000);
});

// ---------------------------------------------------------------------------

const HOST_KEY_OK = KEYS[0]!;
/** acquire scripts that break the 16 KiB output rule or print bombs. */
const HOSTILE_OUTPUT: Record<string, string> = {
  binary: 'head -c 10000000 /dev/urandom',
  endless: 'yes',
  'endless-no-newline': 'cat /dev/zero',
  tenmb: `head -c 10000000 /dev/zero | tr '\\0' x; echo; echo '{"ssh":{"host":"127.0.0.1","host_key":"${HOST_KEY_OK}"}}'`,
  'deep-arrays': `printf '{"ssh":{"host":"127.0.0.1","host_key":"${HOST_KEY_OK}"},"x":'; head -c 7000 /dev/zero | tr '\\0' '['; head -c 7000 /dev/zero | tr '\\0' ']'; echo '}'`,
  'huge-number': `printf '{"ssh":{"host":"127.0.0.1","port":'; head -c 15000 /dev/zero | tr '\\0' 9; echo ',"host_key":"${HOST_KEY_OK}"}}'`,
  'overflow-number': `echo '{"ssh":{"host":"127.0.0.1","port":1e999,"host_key":"${HOST_KEY_OK}"}}'`,
};

describe('a running controller with what admission lets through', () => {
  it('runs a recording provider with argv exactly as declared and the documented environment, and installs only valid keys', async () => {
    const acquire = [RECORDER, 'acquire', ...ARGV_EXTRA];
    const release = [RECORDER, 'release', ...ARGV_EXTRA];
    const offer = await fx.offer('rec', { acquire, release, shape: { os: 'linux', arch: 'amd64', cpus: 1, tools: ['a+b', 'x.y_z-1'] }, idleTimeout: '10m' });
    const where = 'cpus>=1,tool=a+b,tool=x.y_z-1';
    const comments = HOSTILE.filter((h) => !/[\r\n\u0000\u202e]/.test(h));
    const sshKeys = [`${KEYS[1]} ${comments[0]}`, `${KEYS[2]} ${comments.slice(1).join(' ')}`, KEYS[3]!];
    // Hostile annotations are data to the controller: stored, never interpreted as more than a timestamp.
    await admit('Lease', { ...leaseObj({ where, offer, sshKeys }, 'hostile-ok', { annotations: { 'leasehold.dev/activity': `$(touch ${PWNED})`, note: 'a\nb\u0000c' } }) }, false);
    const st = await fx.waitPhase('hostile-ok', 'Ready', 60_000);

    const rec = readRecord(st.leaseID, 'acquire');
    expect(rec).toBeDefined();
    expect(rec!.argv).toEqual(acquire.slice(1));
    const pub = readFileSync(join(fx.machines, st.leaseID, 'authorized_keys'), 'utf8');
    const controllerKey = pub.split('\n')[0]!;
    // The controller passes its own environment on, so LEASEHOLD_* settings of whoever runs the tests (LEASEHOLD_CACHE) arrive too.
    const ambient = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('LEASEHOLD_')));
    expect(rec!.env).toEqual({
      ...ambient,
      LEASEHOLD_LEASE_ID: st.leaseID,
      LEASEHOLD_OFFER: offer,
      LEASEHOLD_LEASE_WHERE: where,
      LEASEHOLD_LEASE_SSH_KEY: controllerKey,
      LEASEHOLD_MACHINES_DIR: fx.machines,
    });
    expect(parseWhere(rec!.env.LEASEHOLD_LEASE_WHERE!).ok).toBe(true);
    // authorized_keys: the controller's key, then each device key, one line each, no options.
    expect(pub.trimEnd().split('\n')).toEqual([controllerKey, ...sshKeys.map((k) => k.replace(/[ \t]+/g, ' '))]);

    await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'hostile-ok', '--timeout=60s']);
    const rel = readRecord(st.leaseID, 'release');
    expect(rel!.argv).toEqual(release.slice(1));
    expect(rel!.env.LEASEHOLD_LEASE_WHERE).toBeUndefined();
    expect(rel!.env.LEASEHOLD_LEASE_SSH_KEY).toBeUndefined();
    expect(JSON.parse(rel!.env.LEASEHOLD_LEASE_STATE!).ssh.host).toBe('127.0.0.1');
    expect(existsSync(PWNED)).toBe(false);
  }, 120_000);

  it('holds a Lease whose keys admission accepted but are not keys, with a reason naming spec.sshKeys, renting nothing', async () => {
    expect(acceptedButInvalid.length).toBeGreaterThan(0);
    const offer = `rec-${fx.suffix}`;
    const names: string[] = [];
    for (const [i, { spec }] of acceptedButInvalid.entries()) {
      const name = `held-${i}`;
      names.push(name);
      const r = await admit('Lease', leaseObj({ ...spec, offer }, name), false);
      expect(accepted(r)).toBe(true);
    }
    for (const name of names) {
      const st = await waitFor(`${name} held`, async () => {
        const s = await fx.status(name);
        return s?.phase === 'Pending' && s.reason === 'InvalidSpec' ? s : undefined;
      }, 30_000, 250);
      expect(st.message).toMatch(/spec\.sshKeys\[\d+\]/);
      expect(st.leaseID).toBeUndefined();
    }
    // Nothing was acquired for them.
    const records = readdirSync(fx.machines).filter((f) => f.startsWith('record-') && f.endsWith('-acquire.argv'));
    expect(records).toHaveLength(1);
  }, 60_000);

  it('fails hostile acquire output with InvalidTarget quickly, with memory bounded', async () => {
    const rss0 = await fx.controller.metric('leasehold_process_resident_memory_bytes');
    const names = Object.keys(HOSTILE_OUTPUT);
    const t0 = Date.now();
    for (const name of names) {
      const offer = await fx.offer(`out-${name}`, { acquire: ['/bin/sh', '-c', HOSTILE_OUTPUT[name]!], release: ['/bin/true'], shape: { os: 'linux', arch: 'amd64', cpus: 1 } });
      await fx.lease(`out-${name}`, { where: 'cpus>=1', offer });
    }
    let peak = rss0;
    for (const name of names) {
      const st = await waitFor(`out-${name} failed`, async () => {
        peak = Math.max(peak, await fx.controller.metric('leasehold_process_resident_memory_bytes'));
        const s = await fx.status(`out-${name}`);
        return s?.phase === 'Failed' ? s : undefined;
      }, 30_000, 250);
      expect([name, st.reason]).toEqual([name, 'InvalidTarget']);
      expect(st.message.length).toBeLessThan(2000);
    }
    const took = Date.now() - t0;
    const rss1 = await fx.controller.metric('leasehold_process_resident_memory_bytes');
    process.stdout.write(`hostile output: ${names.length} Leases Failed/InvalidTarget in ${took} ms; controller RSS ${Math.round(rss0 / 2 ** 20)} MiB before, peak ${Math.round(peak / 2 ** 20)} MiB, ${Math.round(rss1 / 2 ** 20)} MiB after\n`);
    expect(took).toBeLessThan(30_000);
    expect(peak - rss0).toBeLessThan(64 * 2 ** 20);
  }, 90_000);

  it('is still up: /healthz answers and the process is alive', async () => {
    expect(fx.controller.child.exitCode).toBeNull();
    expect(fx.controller.child.signalCode).toBeNull();
    const health = await fetch(fx.controller.metricsURL.replace('/metrics', '/healthz'));
    expect(health.status).toBe(200);
  });

  it('leaks no private key material or token into its log, events, statuses or metrics', async () => {
    const secret = await getJSON(fx.kubectl, ['-n', fx.ns, 'secret', 'leasehold-controller-ssh']);
    expect(secret).toBeDefined();
    const privateB64 = secret.data['id_ed25519'] as string;
    const privatePEM = Buffer.from(privateB64, 'base64').toString();
    const bodyLines = privatePEM.split('\n').filter((l) => l && !l.startsWith('-----'));
    const adminKey = readFileSync(tls.key ? parseYAML(readFileSync(process.env.E2E_KUBECONFIG!, 'utf8')).users[0].user['client-key'] : '', 'utf8');
    const adminLines = adminKey.split('\n').filter((l) => l && !l.startsWith('-----'));
    const needles = [privateB64, privatePEM.trim(), ...bodyLines, ...adminLines, 'PRIVATE KEY'];
    expect(bodyLines.length).toBeGreaterThan(0);

    const sources: Record<string, string> = {
      'controller log': readFileSync(fx.controller.logFile, 'utf8'),
      events: JSON.stringify(await getJSON(fx.kubectl, ['-n', fx.ns, 'events'])),
      leases: JSON.stringify((await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev']))?.items.map((l: any) => l.status)),
      offers: JSON.stringify((await getJSON(fx.kubectl, ['offers.leasehold.dev']))?.items.map((o: any) => o.status)),
      metrics: await (await fetch(fx.controller.metricsURL)).text(),
    };
    expect(sources['controller log']!.length).toBeGreaterThan(0);
    const hits: string[] = [];
    for (const [where, text] of Object.entries(sources)) {
      for (const n of needles) if (text.includes(n)) hits.push(`${where}: ${n.slice(0, 20)}…`);
      if (/Bearer\s+[A-Za-z0-9._~+/-]{8,}/i.test(text)) hits.push(`${where}: a bearer token`);
      if (/"(token|apiKey|password)"\s*:\s*"[^"]{8,}"/i.test(text)) hits.push(`${where}: a token-like field`);
    }
    expect(hits).toEqual([]);
  });
});
