import { describe, expect, it } from '@jest/globals';
import { LambdaClient } from './client.js';

/** A Response whose body never ends, counting the bytes the client pulled. */
function endlessAnswer(): { fetch: typeof fetch; pulled: () => number } {
  let pulled = 0;
  const chunk = new TextEncoder().encode('{"data":['.padEnd(64 * 1024, ' '));
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
  return { fetch: (async () => new Response(body, { status: 200, headers: { 'content-type': 'application/json' } })) as typeof fetch, pulled: () => pulled };
}

describe('LambdaClient answer size', () => {
  it('stops reading an answer that never ends at the limit, and never names the key', async () => {
    const peer = endlessAnswer();
    const client = new LambdaClient({ endpoint: 'https://lambda.example/api/v1', apiKey: 'secret_key_123', fetch: peer.fetch, timeoutMs: 10_000 });
    const err = await client.listInstances().catch((e: unknown) => e);
    expect((err as Error).message).toBe('Lambda GET /instances: the answer passed 8 MiB, the limit on one answer (HTTP 200 from https://lambda.example/api/v1/instances); it was dropped unread');
    expect(err).toMatchObject({ kind: 'Unknown', answerLost: true });
    expect(peer.pulled()).toBeLessThan(9 * 1024 * 1024);
  });
});

/** A fetch that answers every request with `answer`, recording what was sent. */
function answering(answer: () => Response): { fetch: typeof fetch; sent: { method: string; url: string; body: unknown }[] } {
  const sent: { method: string; url: string; body: unknown }[] = [];
  const f = (async (url: string, init?: RequestInit) => {
    sent.push({ method: init?.method ?? 'GET', url, body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined });
    return answer();
  }) as typeof fetch;
  return { fetch: f, sent };
}

const client = (f: typeof fetch) => new LambdaClient({ endpoint: 'https://lambda.example/api/v1', apiKey: 'secret_key_123', fetch: f, timeoutMs: 10_000 });
const json = (status: number, body: unknown, headers: Record<string, string> = {}) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

describe('LambdaClient launch', () => {
  it('sends only the fields of InstanceLaunchRequest', async () => {
    const peer = answering(() => json(200, { data: { instance_ids: ['i-1'] } }));
    const ids = await client(peer.fetch).launch({ region: 'us-east-1', instanceType: 'gpu_1x_a10', sshKeyNames: ['k'], name: 'lh-1', userData: '#cloud-config\n' });
    expect(ids).toEqual(['i-1']);
    expect(peer.sent).toEqual([
      {
        method: 'POST',
        url: 'https://lambda.example/api/v1/instance-operations/launch',
        body: { region_name: 'us-east-1', instance_type_name: 'gpu_1x_a10', ssh_key_names: ['k'], file_system_names: [], name: 'lh-1', user_data: '#cloud-config\n' },
      },
    ]);
  });
});

describe('LambdaClient rate limits', () => {
  it("takes a 429 as rate limited whatever its body: Cloudflare's plain text, Lambda's shape with any code, or nothing", async () => {
    for (const answer of [
      () => new Response('error code: 1015', { status: 429, headers: { 'content-type': 'text/plain; charset=UTF-8', 'retry-after': '0' } }),
      () => json(429, { error: { code: 'global/some-new-limit', message: 'Slow down.' } }, { 'retry-after': '0' }),
      () => new Response('', { status: 429, headers: { 'retry-after': '0' } }),
    ]) {
      const peer = answering(answer);
      const err = await client(peer.fetch).launch({ region: 'r', instanceType: 't', sshKeyNames: ['k'], name: 'n' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ kind: 'RateLimited', status: 429, retryAfterMs: 0 });
      // A launch is never sent again by the client: its pacer decides when.
      expect(peer.sent).toHaveLength(1);
    }
  });

  it("names Cloudflare's text in the error, and sends anything but a launch again after the wait", async () => {
    const peer = answering(() => new Response('error code: 1015', { status: 429, headers: { 'retry-after': '0' } }));
    const err = await client(peer.fetch).listInstances().catch((e: unknown) => e);
    expect((err as Error).message).toBe('Lambda GET /instances: HTTP 429: error code: 1015');
    expect(peer.sent).toHaveLength(4);
  });

  it('does not take a code for a rate limit: a status other than 429 is what it is', async () => {
    const peer = answering(() => json(400, { error: { code: 'global/rate-limit-exceeded', message: 'Too many.' } }));
    const err = await client(peer.fetch).listInstances().catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'InvalidRequest', status: 400, code: 'global/rate-limit-exceeded' });
    expect(peer.sent).toHaveLength(1);
  });
});
