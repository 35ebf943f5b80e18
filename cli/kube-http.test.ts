// The CLI's own API client against a local HTTP server: the requests it
// sends (paths, merge patch, preconditions, credentials, impersonation) and
// the errors it throws, read by the same helpers as client-node's.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Lease } from '../src/api/lease.js';
import { statusCode } from '../src/kube/errors.js';
import { connect } from './kube.js';
import { answerLost, apiErrorText } from './leaseapi.js';
import { HttpLeaseAPI } from './kube-http.js';
import { readKubeconfig } from './kubeconfig.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let server: http.Server;
let url: string;
const seen: Seen[] = [];
const answers: Array<[number, unknown]> = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const [code, answer] = answers.shift() ?? [200, {}];
      res.writeHead(code, { 'Content-Type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

const dir = mkdtempSync(join(tmpdir(), 'leasehold-kubeconfig-'));
function kubeconfig(name: string, doc: Record<string, unknown>): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(doc), { mode: 0o600 });
  return file;
}
const plain = (user: Record<string, unknown>, context: Record<string, unknown> = {}) => ({
  'current-context': 'c',
  clusters: [{ name: 'k', cluster: { server: `${url}/`, 'insecure-skip-tls-verify': true } }],
  users: [{ name: 'u', user }],
  contexts: [{ name: 'c', context: { cluster: 'k', user: 'u', ...context } }],
});
const lease = (name: string) => ({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Lease', metadata: { name, namespace: 'ml' }, spec: { where: 'cpus>=1' } }) as Lease;

describe('the CLI API client', () => {
  it('sends the calls a run makes with the token and impersonation of the kubeconfig, on one kept-alive connection', async () => {
    const cluster = await connect({ kubeconfig: kubeconfig('token', plain({ token: 't0k', as: 'alice', 'as-groups': ['team'] }, { namespace: 'ml' })) } as never, {});
    expect(cluster.namespace).toBe('ml');
    seen.length = 0;
    answers.push([200, { items: [lease('a')] }], [200, lease('a')], [404, { kind: 'Status', message: 'leases "b" not found' }]);
    expect((await cluster.leases.list('ml')).map((l) => l.metadata?.name)).toEqual(['a']);
    await cluster.leases.patch('ml', 'a', { metadata: { resourceVersion: '7' } });
    expect(await cluster.leases.get('ml', 'b')).toBeUndefined();
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET /apis/leasehold.dev/v1alpha1/namespaces/ml/leases',
      'PATCH /apis/leasehold.dev/v1alpha1/namespaces/ml/leases/a',
      'GET /apis/leasehold.dev/v1alpha1/namespaces/ml/leases/b',
    ]);
    expect(seen[1]!.headers['content-type']).toBe('application/merge-patch+json');
    expect(JSON.parse(seen[1]!.body)).toEqual({ metadata: { resourceVersion: '7' } });
    for (const s of seen) {
      expect(s.headers.authorization).toBe('Bearer t0k');
      expect(s.headers['impersonate-user']).toBe('alice');
      expect(s.headers['impersonate-group']).toBe('team');
      expect(s.headers.connection).toBe('keep-alive');
    }
  });

  it('throws errors that statusCode, apiErrorText and answerLost read as they read client-node\'s', async () => {
    const api = new HttpLeaseAPI({ server: url, insecure: true });
    answers.push([409, { kind: 'Status', message: 'the object has been modified' }], [403, { kind: 'Status', message: 'leases is forbidden: User "alice" cannot create' }]);
    const conflict = await api.patch('ml', 'a', {}).catch((e: unknown) => e);
    expect(statusCode(conflict)).toBe(409);
    expect(answerLost(conflict)).toBe(false);
    const forbidden = await api.create(lease('c')).catch((e: unknown) => e);
    expect(apiErrorText(forbidden, 'create')).toMatch(/^create: forbidden \(leases is forbidden: User "alice" cannot create\); Leases need the leasehold-lease-editor role/);
    const gone = await new HttpLeaseAPI({ server: 'http://127.0.0.1:1', insecure: true }).list('ml').catch((e: unknown) => e);
    expect(statusCode(gone)).toBeUndefined();
    expect(answerLost(gone)).toBe(true);
  });

  it('deletes with the resourceVersion as a precondition, and says false when the Lease was gone', async () => {
    const api = new HttpLeaseAPI({ server: url, insecure: true });
    seen.length = 0;
    answers.push([200, {}], [404, { kind: 'Status' }]);
    expect(await api.delete('ml', 'a', '12')).toBe(true);
    expect(await api.delete('ml', 'a')).toBe(false);
    expect(seen.map((s) => [s.method, s.body])).toEqual([['DELETE', JSON.stringify({ preconditions: { resourceVersion: '12' } })], ['DELETE', '']]);
  });

  it('runs the exec plugin once for its token', async () => {
    const plugin = join(dir, 'plugin.sh');
    const count = join(dir, 'plugin-runs');
    writeFileSync(plugin, `#!/bin/sh\necho run >> ${count}\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-'"$WHO"'"}}'\n`);
    chmodSync(plugin, 0o755);
    const cluster = await connect({ kubeconfig: kubeconfig('exec', plain({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, env: [{ name: 'WHO', value: 'plugin' }] } })) } as never, {});
    seen.length = 0;
    await cluster.leases.list('ml');
    await cluster.leases.list(undefined);
    expect(seen.map((s) => [s.url, s.headers.authorization])).toEqual([
      ['/apis/leasehold.dev/v1alpha1/namespaces/ml/leases', 'Bearer from-plugin'],
      ['/apis/leasehold.dev/v1alpha1/leases', 'Bearer from-plugin'],
    ]);
    expect(readFileSync(count, 'utf8')).toBe('run\n');
  });
});

describe('reading the kubeconfig', () => {
  it('merges $KUBECONFIG as kubectl does: the first file to set a value wins; paths are relative to their file', () => {
    const sub = join(dir, 'sub');
    mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, 'ca.crt'), 'CA');
    writeFileSync(join(sub, 'token'), 'file-token\n');
    const first = kubeconfig('first', { 'current-context': 'one', contexts: [{ name: 'one', context: { cluster: 'k1', user: 'u1', namespace: 'first-ns' } }] });
    const second = join(sub, 'second');
    writeFileSync(second, JSON.stringify({
      'current-context': 'two',
      clusters: [{ name: 'k1', cluster: { server: 'https://one.example:6443', 'certificate-authority': 'ca.crt', 'tls-server-name': 'api' } }],
      users: [{ name: 'u1', user: { 'token-file': 'token' } }],
      contexts: [{ name: 'one', context: { cluster: 'elsewhere' } }, { name: 'two', context: { cluster: 'k1', user: 'u1' } }],
    }));
    const read = readKubeconfig(undefined, undefined, { KUBECONFIG: `${first}:${join(dir, 'missing')}:${second}` });
    expect(read).toEqual({ endpoint: { server: 'https://one.example:6443', insecure: false, ca: Buffer.from('CA'), servername: 'api', token: 'file-token', namespace: 'first-ns' } });
    expect(readKubeconfig(undefined, 'two', { KUBECONFIG: `${first}:${second}` })).toMatchObject({ endpoint: { server: 'https://one.example:6443' } });
    expect(() => readKubeconfig(undefined, 'three', { KUBECONFIG: second })).toThrow('--context three: no such context in the kubeconfig');
  });

  it('leaves to client-node what its own client cannot do', async () => {
    const withProvider = kubeconfig('provider', plain({ 'auth-provider': { name: 'oidc', config: {} } }));
    expect(readKubeconfig(withProvider, undefined, {})).toEqual({ unsupported: 'auth-provider' });
    const proxied = kubeconfig('proxy', { ...plain({}), clusters: [{ name: 'k', cluster: { server: 'https://x', 'proxy-url': 'http://proxy:3128' } }] });
    expect(readKubeconfig(proxied, undefined, {})).toEqual({ unsupported: 'proxy-url' });
    const viaClientNode = await connect({ kubeconfig: proxied } as never, {});
    expect(viaClientNode.leases).not.toBeInstanceOf(HttpLeaseAPI);
    expect(viaClientNode.leases.constructor.name).toBe('ClientNodeLeaseAPI');
    expect(readKubeconfig(undefined, undefined, { HOME: join(dir, 'nohome') })).toEqual({ unsupported: 'no kubeconfig file' });
  });

  it('refuses plain HTTP unless the kubeconfig skips TLS verification, as client-node does', () => {
    const file = kubeconfig('http', { ...plain({}), clusters: [{ name: 'k', cluster: { server: 'http://127.0.0.1:8080' } }] });
    expect(() => readKubeconfig(file, undefined, {})).toThrow('plain HTTP; set insecure-skip-tls-verify');
  });
});
