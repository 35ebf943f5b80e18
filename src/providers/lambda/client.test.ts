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
