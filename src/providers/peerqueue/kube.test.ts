import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createNetServer, type Server as NetServer } from 'node:net';
import { Metrics } from '../../kube/metrics.js';
import { KubePeerQueue, peerError } from './kube.js';

const listen = async <S extends Server | NetServer>(srv: S): Promise<number> => {
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return (srv.address() as { port: number }).port;
};

describe('peerError', () => {
  const apiError = (code: number, body: string) => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body });
  it.each([
    [401, 'Unauthorized', undefined],
    [403, 'Forbidden', undefined],
    [503, 'Unreachable', 'infra_down'],
  ])('an HTTP %s answer is %s', (code, kind, failureClass) => {
    const err = peerError(apiError(code, JSON.stringify({ kind: 'Status', reason: 'Nope' })));
    expect(err).toMatchObject({ kind, failureClass });
    expect(err.message).toBe(`HTTP ${code} Nope`);
  });

  const fetchError = (code: string, message: string) => Object.assign(new Error(message), { code, type: 'system' });
  it.each([
    ['ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:1', 'infra_down'],
    ['EPROTO', 'write EPROTO 80:error:0A00010B:SSL routines:ssl3_get_record:wrong version number', 'config'],
    ['EPROTO', 'write EPROTO', 'infra_down'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate', 'config'],
  ])('a transport error %s (%s) is Unreachable %s', (code, message, failureClass) => {
    expect(peerError(fetchError(code, message))).toMatchObject({ kind: 'Unreachable', failureClass });
  });

  it('finds the code on the cause of a wrapped error', () => {
    const wrapped = new Error('request failed', { cause: fetchError('ECONNRESET', 'socket hang up') });
    expect(peerError(wrapped)).toMatchObject({ kind: 'Unreachable', failureClass: 'infra_down' });
  });
});

describe('KubePeerQueue against local servers', () => {
  let plain: Server;
  let silent: NetServer;
  let plainPort: number;
  let silentPort: number;
  beforeAll(async () => {
    plain = createServer((_, res) => res.end('plain http'));
    // Accepts connections and never answers: a peer that hangs.
    silent = createNetServer(() => undefined);
    [plainPort, silentPort] = [await listen(plain), await listen(silent)];
  });
  afterAll(() => {
    plain.close();
    silent.close();
  });
  const queue = (port: number, timeoutMs?: number) =>
    new KubePeerQueue({ name: 'peer', server: `https://127.0.0.1:${port}`, token: 'secret-token', namespace: 'queue', metrics: new Metrics(), ...(timeoutMs ? { timeoutMs } : {}) });

  it('an https origin that answers in plain HTTP is a config error', async () => {
    await expect(queue(plainPort).probe()).rejects.toMatchObject({ kind: 'Unreachable', failureClass: 'config' });
  });

  it('a peer that never answers is infra_down once the request times out', async () => {
    await expect(queue(silentPort, 300).probe()).rejects.toMatchObject({ kind: 'Unreachable', failureClass: 'infra_down' });
  });

  it('never puts the token in an error message', async () => {
    const err = await queue(plainPort).probe().catch((e: Error) => e);
    expect(String((err as Error).message)).not.toContain('secret-token');
  });
});

describe('KubePeerQueue reads a peer as another party', () => {
  const job = (name: string, extra: Record<string, unknown> = {}) => ({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: 'queue', resourceVersion: '7', creationTimestamp: '2026-12-01T00:00:00Z', labels: { 'leasehold.dev/lendable': 'true' }, ...extra },
    spec: { template: { spec: { containers: [{ name: 'main', image: 'busybox' }] } } },
  });
  let answer: (path: string) => { status: number; headers?: Record<string, string>; body: string };
  const seen: { server: string; authorization: string | undefined }[] = [];
  let peer: Server;
  let other: Server;
  let peerPort: number;
  let otherPort: number;
  let ca: string;
  beforeAll(async () => {
    // A real TLS peer: the redirect must be refused with the peer's CA pinned, as in production.
    const dir = mkdtempSync(join(tmpdir(), 'peer-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-days', '1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    const tls = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
    ca = tls.cert.toString();
    rmSync(dir, { recursive: true, force: true });
    const https = (handler: (req: IncomingMessage, res: ServerResponse) => void) => createHttpsServer(tls, handler) as unknown as Server;
    peer = https((req, res) => {
      seen.push({ server: 'peer', authorization: req.headers.authorization });
      const a = answer(req.url ?? '');
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
      res.end(a.body);
    });
    other = https((req, res) => {
      seen.push({ server: 'other', authorization: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'JobList', apiVersion: 'batch/v1', metadata: {}, items: [] }));
    });
    [peerPort, otherPort] = [await listen(peer), await listen(other)];
  });
  afterAll(() => {
    peer.close();
    other.close();
  });
  const queue = (metrics = new Metrics(), answerBytes?: number) =>
    new KubePeerQueue({ name: 'peer:team-a/fleet', server: `https://127.0.0.1:${peerPort}`, caPEM: ca, token: 'secret-token', namespace: 'queue', metrics, ...(answerBytes ? { answerBytes } : {}) });

  it('does not follow a redirect, and says where it pointed', async () => {
    seen.length = 0;
    answer = () => ({ status: 302, headers: { location: `https://127.0.0.1:${otherPort}/apis/batch/v1/namespaces/queue/jobs` }, body: '' });
    const err = await queue().probe().catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'Unreachable', failureClass: 'config' });
    expect((err as Error).message).toContain(`https://127.0.0.1:${peerPort}/apis/batch/v1/namespaces/queue/jobs`);
    expect((err as Error).message).toContain(`redirect to https://127.0.0.1:${otherPort}/apis/batch/v1/namespaces/queue/jobs`);
    expect((err as Error).message).not.toContain('secret-token');
    expect(seen.map((s) => s.server)).toEqual(['peer']);
  });

  it('drops an answer past the size limit unread', async () => {
    answer = () => ({ status: 200, body: JSON.stringify({ kind: 'JobList', metadata: {}, items: Array.from({ length: 50 }, (_, i) => job(`j${i}`)) }) });
    const err = await queue(new Metrics(), 4096).listQueued().catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'Unknown' });
    expect((err as Error).message).toMatch(/more than 4 KiB, the limit on one answer/);
  });

  it('leaves out listed Jobs that fail the peer Job check, and counts them', async () => {
    answer = () => ({ status: 200, body: JSON.stringify({ kind: 'JobList', metadata: {}, items: [job('good'), job('bad', { annotations: 'not a map' })] }) });
    const metrics = new Metrics();
    const jobs = await queue(metrics).listQueued();
    expect(jobs.map((j) => j.metadata?.name)).toEqual(['good']);
    expect((await metrics.objectsDropped.get()).values).toEqual([expect.objectContaining({ value: 1, labels: { cluster: 'peer:team-a/fleet', reason: 'invalid_object' } })]);
  });

  it('refuses a read Job that fails the check, naming the field', async () => {
    answer = () => ({ status: 200, body: JSON.stringify(job('bad', { labels: ['not', 'a', 'map'] })) });
    await expect(queue().get('bad')).rejects.toMatchObject({ kind: 'Unknown', message: expect.stringContaining('metadata.labels') });
  });

  it('sends the token to the peer on every request', async () => {
    seen.length = 0;
    answer = () => ({ status: 200, body: JSON.stringify(job('good')) });
    await expect(queue().get('good')).resolves.toMatchObject({ metadata: { name: 'good' } });
    expect(seen).toEqual([{ server: 'peer', authorization: 'Bearer secret-token' }]);
  });
});
