// The emulator's repository and organization webhooks, against a receiver
// on loopback: REST shapes, the ping on creation, workflow_job deliveries
// as jobs are queued, start and complete, signatures, redelivery, and
// automatic retry only when asked for.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGitHubEmulator, type GitHubEmulator } from './server.js';

interface Received {
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

let receiver: Server;
let receiverURL: string;
const received: Received[] = [];
/** What the receiver answers next (then 200). */
const answers: number[] = [];

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.writeHead(answers.shift() ?? 200);
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  receiverURL = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
afterAll(() => new Promise<void>((r) => receiver.close(() => r())));

async function api(gh: GitHubEmulator, method: string, path: string, body?: unknown) {
  const res = await fetch(`${gh.url}${path}`, { method, headers: { authorization: `Bearer ${gh.token}`, accept: 'application/vnd.github+json', ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown> & Record<string, unknown>[]) : undefined };
}

const sign = (body: string, secret: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

describe('repository hooks', () => {
  let gh: GitHubEmulator;
  beforeAll(async () => {
    gh = await startGitHubEmulator({ org: 'swack-tools' });
    gh.addRepository('oxidex');
  });
  afterAll(() => gh.stop());

  it('POST creates a hook with GitHub\'s shape (secret masked), pings it at once, GET lists and reads it, DELETE removes it', async () => {
    received.length = 0;
    const made = await api(gh, 'POST', '/repos/swack-tools/oxidex/hooks', { name: 'web', events: ['workflow_job'], config: { url: receiverURL, content_type: 'json', secret: 's3cret' } });
    expect(made.status).toBe(201);
    expect(made.json).toMatchObject({ type: 'Repository', name: 'web', active: true, events: ['workflow_job'], config: { url: receiverURL, content_type: 'json', insecure_ssl: '0', secret: '********' }, ping_url: expect.stringContaining('/pings') });
    const id = made.json!.id as number;
    await gh.hooksIdle();
    expect(received).toHaveLength(1);
    const ping = received[0]!;
    expect(ping.headers).toMatchObject({ 'x-github-event': 'ping', 'x-github-hook-id': String(id), 'user-agent': expect.stringMatching(/^GitHub-Hookshot\//), 'content-type': 'application/json' });
    expect(ping.headers['x-github-delivery']).toMatch(/^[0-9a-f-]{36}$/);
    expect(ping.headers['x-hub-signature-256']).toBe(sign(ping.body, 's3cret'));
    expect(JSON.parse(ping.body)).toMatchObject({ hook_id: id, zen: expect.any(String), repository: { full_name: 'swack-tools/oxidex' } });
    expect((await api(gh, 'GET', '/repos/swack-tools/oxidex/hooks')).json).toEqual([expect.objectContaining({ id })]);
    expect((await api(gh, 'GET', `/repos/swack-tools/oxidex/hooks/${id}`)).json).toMatchObject({ id, last_response: { code: 200, status: 'active' } });
    expect((await api(gh, 'DELETE', `/repos/swack-tools/oxidex/hooks/${id}`)).status).toBe(204);
    expect((await api(gh, 'GET', `/repos/swack-tools/oxidex/hooks/${id}`)).status).toBe(404);
  });

  it.each([
    ['no config.url', { config: {} }],
    ['a name other than web', { name: 'email', config: { url: 'http://127.0.0.1:1/' } }],
    ['a content type GitHub does not have', { config: { url: 'http://127.0.0.1:1/', content_type: 'xml' } }],
  ])('%s is 422', async (_what, body) => {
    expect((await api(gh, 'POST', '/repos/swack-tools/oxidex/hooks', body)).status).toBe(422);
  });

  it('an unknown repository is 404; events default to push and content type to form', async () => {
    expect((await api(gh, 'POST', '/repos/swack-tools/nope/hooks', { config: { url: receiverURL } })).status).toBe(404);
    received.length = 0;
    const made = await api(gh, 'POST', '/repos/swack-tools/oxidex/hooks', { config: { url: receiverURL } });
    expect(made.json).toMatchObject({ events: ['push'], config: { content_type: 'form' } });
    await gh.hooksIdle();
    expect(received[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(received[0]!.body).toMatch(/^payload=/);
    expect(received[0]!.headers['x-hub-signature-256']).toBeUndefined();
    await api(gh, 'DELETE', `/repos/swack-tools/oxidex/hooks/${made.json!.id}`);
  });

  it('workflow_job is delivered when a job is queued, starts and completes; only to hooks of its repository (and the org) that subscribe to it', async () => {
    const repoHook = await api(gh, 'POST', '/repos/swack-tools/oxidex/hooks', { events: ['workflow_job'], config: { url: receiverURL, content_type: 'json', secret: 'r' } });
    const pushOnly = await api(gh, 'POST', '/repos/swack-tools/oxidex/hooks', { events: ['push'], config: { url: receiverURL, content_type: 'json' } });
    gh.addRepository('other');
    const otherHook = await api(gh, 'POST', '/repos/swack-tools/other/hooks', { events: ['workflow_job'], config: { url: receiverURL, content_type: 'json' } });
    await gh.hooksIdle();
    received.length = 0;
    const { jobIds } = gh.queueRun('oxidex', [{ labels: ['self-hosted', 'linux'] }]);
    gh.completeJob(jobIds[0]!, 'cancelled');
    await gh.hooksIdle();
    const events = received.map((r) => ({ hook: r.headers['x-github-hook-id'], event: r.headers['x-github-event'], ...(JSON.parse(r.body) as { action: string }) }));
    expect(events.map((e) => [e.hook, e.event, e.action])).toEqual([
      [String(repoHook.json!.id), 'workflow_job', 'queued'],
      [String(repoHook.json!.id), 'workflow_job', 'completed'],
    ]);
    const queued = JSON.parse(received[0]!.body);
    expect(queued).toMatchObject({
      action: 'queued',
      workflow_job: { id: jobIds[0], status: 'queued', labels: ['self-hosted', 'linux'], runner_id: null, run_id: expect.any(Number) },
      repository: { full_name: 'swack-tools/oxidex', owner: { login: 'swack-tools' } },
      organization: { login: 'swack-tools' },
      sender: { login: expect.any(String) },
    });
    expect(received[0]!.headers['x-hub-signature-256']).toBe(sign(received[0]!.body, 'r'));
    for (const h of [repoHook, pushOnly]) await api(gh, 'DELETE', `/repos/swack-tools/oxidex/hooks/${h.json!.id}`);
    await api(gh, 'DELETE', `/repos/swack-tools/other/hooks/${otherHook.json!.id}`);
  });
});

describe('organization hooks, redelivery and retry', () => {
  let gh: GitHubEmulator;
  beforeAll(async () => {
    gh = await startGitHubEmulator({ org: 'swack-tools' });
  });
  afterAll(() => gh.stop());

  it('an org hook gets every repository\'s jobs, in_progress included, with the org as target', async () => {
    const made = await api(gh, 'POST', '/orgs/swack-tools/hooks', { name: 'web', events: ['workflow_job'], config: { url: receiverURL, content_type: 'json', secret: 'o' } });
    expect(made).toMatchObject({ status: 201, json: { type: 'Organization', config: { secret: '********' } } });
    expect((await api(gh, 'GET', '/orgs/swack-tools/hooks')).json).toHaveLength(1);
    expect((await api(gh, 'POST', '/orgs/another/hooks', { config: { url: receiverURL } })).status).toBe(404);
    await gh.hooksIdle();
    received.length = 0;
    const { jobIds } = gh.queueRun('anything', [{ labels: ['self-hosted'] }]);
    await gh.hooksIdle();
    expect(received.map((r) => [r.headers['x-github-hook-installation-target-type'], JSON.parse(r.body).action, JSON.parse(r.body).workflow_job.id])).toEqual([['organization', 'queued', jobIds[0]]]);
    expect((await api(gh, 'DELETE', `/orgs/swack-tools/hooks/${made.json!.id}`)).status).toBe(204);
  });

  it('a failed delivery is not sent again by itself; POST …/attempts redelivers it (same delivery GUID, redelivery true)', async () => {
    const made = await api(gh, 'POST', '/orgs/swack-tools/hooks', { events: ['workflow_job'], config: { url: receiverURL, content_type: 'json' } });
    const id = made.json!.id as number;
    await gh.hooksIdle();
    received.length = 0;
    answers.push(503);
    gh.queueRun('anything', [{ labels: ['self-hosted'] }]);
    await gh.hooksIdle();
    expect(received).toHaveLength(1);
    const listed = (await api(gh, 'GET', `/orgs/swack-tools/hooks/${id}/deliveries`)).json as unknown as { id: number; guid: string; status_code: number; redelivery: boolean; event: string; action: string }[];
    expect(listed[0]).toMatchObject({ status_code: 503, redelivery: false, event: 'workflow_job', action: 'queued' });
    expect((await api(gh, 'POST', `/orgs/swack-tools/hooks/${id}/deliveries/${listed[0]!.id}/attempts`)).status).toBe(202);
    await gh.hooksIdle();
    expect(received).toHaveLength(2);
    expect(received[1]!.headers['x-github-delivery']).toBe(received[0]!.headers['x-github-delivery']);
    expect(received[1]!.body).toBe(received[0]!.body);
    expect(gh.hookDeliveries().at(-1)).toMatchObject({ status_code: 200, redelivery: true });
    expect((await api(gh, 'POST', `/orgs/swack-tools/hooks/${id}/deliveries/1/attempts`)).status).toBe(404);
    await api(gh, 'DELETE', `/orgs/swack-tools/hooks/${id}`);
  });

  it('with webhookRetry set, a failed event delivery is retried on its own until answered', async () => {
    gh.webhookRetry = { attempts: 3, delayMs: 10 };
    try {
      const made = await api(gh, 'POST', '/orgs/swack-tools/hooks', { events: ['workflow_job'], config: { url: receiverURL, content_type: 'json' } });
      await gh.hooksIdle();
      received.length = 0;
      answers.push(500, 502);
      gh.queueRun('anything', [{ labels: ['self-hosted'] }]);
      await gh.hooksIdle();
      expect(received).toHaveLength(3);
      expect(new Set(received.map((r) => r.headers['x-github-delivery'])).size).toBe(1);
      await api(gh, 'DELETE', `/orgs/swack-tools/hooks/${made.json!.id}`);
    } finally {
      gh.webhookRetry = undefined;
    }
  });
});
