// The webhook server on a loopback port with fake targets, secrets and
// reconciler: each refusal, and a signed queued delivery asking a check of
// exactly the target whose secret signed it.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import type { RunnerTarget } from '../../../src/api/index.js';
import { spec } from '../testing/pool.js';
import { workflowJobPayload } from '../testing/webhook.js';
import { startWebhookServer } from './server.js';
import { signatureOf } from './signature.js';

const target = (name: string, github: Partial<RunnerTarget['spec']['github']> = {}): RunnerTarget => ({
  apiVersion: 'leasehold.dev/v1alpha1',
  kind: 'RunnerTarget',
  metadata: { namespace: 'ci', name, uid: `u-${name}` },
  spec: { ...spec, github: { ...spec.github, ...github } },
});

const SECRETS: Record<string, string> = { 'hook-a': 'secret-a', 'hook-b': 'secret-b' };
const targets = [
  target('a', { webhookSecretRef: { name: 'hook-a', key: 'secret', namespace: undefined } }),
  target('b', { webhookSecretRef: { name: 'hook-b', key: 'secret', namespace: undefined } }),
  // Follows the same repository, but takes no webhooks.
  target('none'),
];

let server: Server;
let url: string;
let leader = true;
const requested: string[] = [];
let accept = true;
const registry = new Registry();

beforeAll(async () => {
  server = await startWebhookServer({
    port: 0,
    host: '127.0.0.1',
    bodyLimitBytes: 64 * 1024,
    registry,
    leader: () => leader,
    targets: () => targets,
    secret: async (t) => SECRETS[t.spec.github.webhookSecretRef?.name ?? ''],
    requestCheck: (key) => (requested.push(key), accept),
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function deliver(opts: { body?: string | Buffer; secret?: string | undefined; event?: string; method?: string; type?: string; signature?: string; headers?: Record<string, string> } = {}) {
  const body = opts.body ?? JSON.stringify(workflowJobPayload());
  const raw = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const headers: Record<string, string> = {
    'content-type': opts.type ?? 'application/json',
    'x-github-event': opts.event ?? 'workflow_job',
    'x-github-delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958',
    'user-agent': 'GitHub-Hookshot/044aadd',
    ...opts.headers,
  };
  const secret = 'secret' in opts ? opts.secret : 'secret-a';
  if (opts.signature !== undefined) headers['x-hub-signature-256'] = opts.signature;
  else if (secret !== undefined) headers['x-hub-signature-256'] = signatureOf(raw, secret);
  if (opts.event === '') delete headers['x-github-event'];
  const method = opts.method ?? 'POST';
  const res = await fetch(url, { method, headers, ...(method === 'GET' || method === 'HEAD' ? {} : { body: raw }) });
  return { status: res.status, body: (await res.text()) };
}

const count = async (result: string) => (await registry.getSingleMetric('leasehold_github_webhook_deliveries_total')!.get()).values.find((v) => v.labels.result === result)?.value ?? 0;

describe('the webhook server', () => {
  it('a signed queued delivery requests a check of exactly the target whose secret signed it', async () => {
    requested.length = 0;
    expect(await deliver()).toMatchObject({ status: 202 });
    expect(requested).toEqual(['ci/a']);
    expect(await deliver({ secret: 'secret-b' })).toMatchObject({ status: 202 });
    expect(requested).toEqual(['ci/a', 'ci/b']);
    expect(await count('accepted')).toBe(2);
  });

  it('a request the reconciler coalesced is answered 202 and counted as such', async () => {
    requested.length = 0;
    accept = false;
    try {
      expect(await deliver()).toMatchObject({ status: 202, body: expect.stringContaining('moments ago') });
    } finally {
      accept = true;
    }
    expect(await count('coalesced')).toBe(1);
  });

  it.each([
    ['no signature', { secret: undefined }],
    ['a signature made with a secret no target has', { secret: 'guessed' }],
    ['a signature that is not sha256=hex', { signature: 'sha1=abcdef' }],
    ['a signature of another body', { signature: signatureOf(Buffer.from('{}'), 'secret-a') }],
  ])('%s: 401, counted, nothing requested', async (_what, opts) => {
    requested.length = 0;
    const before = await count('unauthorized');
    expect(await deliver(opts)).toMatchObject({ status: 401 });
    expect(requested).toEqual([]);
    expect(await count('unauthorized')).toBe(before + 1);
  });

  it('a forged delivery is refused before its body is parsed: not JSON, still 401', async () => {
    expect(await deliver({ body: 'not json', secret: 'guessed' })).toMatchObject({ status: 401 });
  });

  it.each([
    ['GET', { method: 'GET' }, 405, 'method_not_allowed'],
    ['PUT', { method: 'PUT' }, 405, 'method_not_allowed'],
    ['a form-encoded body', { type: 'application/x-www-form-urlencoded' }, 415, 'unsupported_media_type'],
    ['no X-GitHub-Event', { event: '' }, 400, 'malformed'],
    ['a signed body that is not JSON', { body: '{"action":' }, 400, 'malformed'],
    ['a signed body that is not a workflow_job payload', { body: JSON.stringify({ action: 'queued' }) }, 400, 'malformed'],
  ])('%s: %s', async (_what, opts, status, result) => {
    requested.length = 0;
    const before = await count(result);
    expect(await deliver(opts)).toMatchObject({ status });
    expect(requested).toEqual([]);
    expect(await count(result)).toBe(before + 1);
  });

  it('a body over the limit is refused with 413, whether declared or streamed', async () => {
    const big = Buffer.alloc(64 * 1024 + 1, 0x20);
    expect(await deliver({ body: big })).toMatchObject({ status: 413 });
    // Chunked: no content-length to refuse it by, so the count of bytes read does.
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-github-event': 'workflow_job' },
      body: new ReadableStream({
        start(c) {
          for (let i = 0; i < 5; i++) c.enqueue(new Uint8Array(20 * 1024));
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await count('too_large')).toBe(2);
  });

  it('a replica that is not the leader answers 503 and requests nothing', async () => {
    requested.length = 0;
    leader = false;
    try {
      expect(await deliver()).toMatchObject({ status: 503 });
    } finally {
      leader = true;
    }
    expect(requested).toEqual([]);
    expect(await count('not_leader')).toBe(1);
  });

  it('ping is answered 200 when signed, 401 when not', async () => {
    const ping = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1, hook: { type: 'Organization', events: ['workflow_job'] }, organization: { login: 'swack-tools' } });
    expect(await deliver({ event: 'ping', body: ping })).toMatchObject({ status: 200 });
    expect(await deliver({ event: 'ping', body: ping, secret: 'guessed' })).toMatchObject({ status: 401 });
    expect(await count('ping')).toBe(1);
  });

  it('other actions and events, and jobs no signer serves, are answered 200 and request nothing', async () => {
    requested.length = 0;
    expect(await deliver({ body: JSON.stringify(workflowJobPayload({ action: 'completed' })) })).toMatchObject({ status: 200 });
    expect(await deliver({ body: JSON.stringify(workflowJobPayload({ labels: ['windows'] })) })).toMatchObject({ status: 200 });
    expect(await deliver({ event: 'push', body: '{}' })).toMatchObject({ status: 200 });
    expect(requested).toEqual([]);
  });
});
