import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_REST_ANSWER_BYTES, sendRest } from './rest.js';
import { ProviderError } from './errors.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

async function serve(handler: (res: ServerResponse) => void): Promise<string> {
  server = createServer((_req, res) => handler(res));
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const request = (url: string, maxAnswerBytes?: number) =>
  sendRest({ method: 'GET', url: `${url}/v1/things?key=s3cret`, headers: {}, what: 'Compute Engine GET /things', timeoutMs: 10_000, ...(maxAnswerBytes ? { maxAnswerBytes } : {}) });

describe('sendRest answer size', () => {
  it('is 8 MiB by default', () => {
    expect(MAX_REST_ANSWER_BYTES).toBe(8 * 1024 * 1024);
  });

  it('reads an answer within the limit', async () => {
    const url = await serve((res) => res.end(JSON.stringify({ items: ['a'] })));
    expect((await request(url, 1024)).json).toEqual({ items: ['a'] });
  });

  it('stops reading an endless answer at the limit and says so, without the query string', async () => {
    let sent = 0;
    const url = await serve((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"items":[');
      const chunk = '"x",'.repeat(16 * 1024);
      const pump = () => {
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const err = await request(url, 1024 * 1024).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'Unknown', answerLost: true });
    expect((err as Error).message).toMatch(/^Compute Engine GET \/things: the answer passed 1 MiB, the limit on one answer \(HTTP 200 from http:\/\/127\.0\.0\.1:\d+\/v1\/things\); it was dropped unread$/);
    expect((err as Error).message).not.toContain('s3cret');
    expect(sent).toBeLessThan(32 * 1024 * 1024);
  });

  it('refuses a declared length over the limit before reading it', async () => {
    const url = await serve((res) => {
      res.writeHead(200, { 'content-length': String(2 * 1024 * 1024) });
      res.write('{');
    });
    await expect(request(url, 1024 * 1024)).rejects.toThrow(/passed 1 MiB/);
  });
});
