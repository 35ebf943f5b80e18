import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_LIST_WATCH_LIMITS, InputLimitError, KubeListWatch, statusFromObject, type RawWatchEvent } from './listwatch.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

/** A peer API server on loopback that answers every request with `handler`; returns a transport for it. */
async function peer(handler: (req: IncomingMessage, res: ServerResponse) => void, limits?: ConstructorParameters<typeof KubeListWatch>[2]) {
  server = createServer(handler);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'peer', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'peer', cluster: 'peer', user: 'u' }],
    currentContext: 'peer',
  });
  return new KubeListWatch<unknown>(kc, '/apis/batch/v1/namespaces/queue/jobs', limits);
}

/** Writes `chunk` until the client goes away. */
function endless(res: ServerResponse, chunk: string): void {
  const pump = () => {
    while (!res.destroyed && res.write(chunk));
    if (!res.destroyed) res.once('drain', pump);
  };
  res.once('close', () => res.removeAllListeners('drain'));
  pump();
}

describe('KubeListWatch limits', () => {
  it('the defaults are 4 MiB per watch event and 64 MiB per list page', () => {
    expect(DEFAULT_LIST_WATCH_LIMITS).toEqual({ watchLineBytes: 4 * 1024 * 1024, listBodyBytes: 64 * 1024 * 1024 });
  });

  it('drops a watch whose event line never ends, at the limit, naming it and the server', async () => {
    let sent = 0;
    const lw = await peer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n{"type":"ADDED","object":{"metadata":{"annotations":"');
      const chunk = 'x'.repeat(64 * 1024);
      res.on('close', () => undefined);
      const pump = () => {
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const events: RawWatchEvent[] = [];
    const err = await lw.watch({}, (e) => events.push(e), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputLimitError);
    expect((err as InputLimitError).reason).toBe('watch_line_too_large');
    expect((err as Error).message).toMatch(/^a watch event from \/apis\/batch\/v1\/namespaces\/queue\/jobs on http:\/\/127\.0\.0\.1:\d+ passed 4 MiB without ending, the limit on one watch event/);
    expect((err as Error).message).not.toContain('secret-token');
    expect(events).toEqual([{ type: 'ADDED', object: { metadata: { name: 'a' } } }]);
    // The stream was cut near the limit, not read to the end of the sender's patience.
    expect(sent).toBeLessThan(16 * 1024 * 1024);
  });

  it('delivers lines split across chunks and multi-byte characters whole', async () => {
    const line = JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'zażółć' } } }) + '\n';
    const bytes = Buffer.from(line + line);
    const lw = await peer((_req, res) => {
      res.writeHead(200);
      // One byte at a time, so a split falls inside every multi-byte character.
      let i = 0;
      const next = () => (i < bytes.length ? res.write(bytes.subarray(i, ++i), next) : res.end());
      next();
    });
    const events: RawWatchEvent[] = [];
    await lw.watch({}, (e) => events.push(e), new AbortController().signal);
    expect(events.map((e) => (e.object as { metadata: { name: string } }).metadata.name)).toEqual(['zażółć', 'zażółć']);
  });

  it('ends the stream with an error when a line is not JSON or the handler throws, never throwing out of the listener', async () => {
    const lw = await peer((_req, res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED","object":{"metadata":{"name":"a"}}}\nnot json\n');
    });
    await expect(lw.watch({}, () => undefined, new AbortController().signal)).rejects.toThrow(/unparseable watch event from .* not json/);
    const lw2 = await peer((_req, res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED","object":{}}\n');
    });
    await expect(
      lw2.watch({}, () => {
        throw new TypeError('handler bug');
      }, new AbortController().signal),
    ).rejects.toThrow(/broke off: handler bug/);
  });

  it('refuses a list body past the limit while it streams, and at once when its length is declared', async () => {
    const lw = await peer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"kind":"JobList","metadata":{"resourceVersion":"1"},"items":[');
      endless(res, JSON.stringify({ metadata: { name: 'j', annotations: { pad: 'p'.repeat(1000) } } }) + ',');
    }, { listBodyBytes: 256 * 1024 });
    const err = await lw.list({}, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputLimitError);
    expect(err).toMatchObject({ reason: 'list_body_too_large' });
    expect((err as Error).message).toMatch(/passed 256 KiB, the limit on one list page's body/);

    const declared = await peer((_req, res) => {
      res.writeHead(200, { 'content-length': String(1024 * 1024) });
      res.write('{');
    }, { listBodyBytes: 1024 });
    await expect(declared.list({}, new AbortController().signal)).rejects.toMatchObject({ reason: 'list_body_too_large' });
  });

  it('refuses a list whose items are not an array, and reads only string metadata', async () => {
    const lw = await peer((_req, res) => res.end(JSON.stringify({ items: 'many' })));
    await expect(lw.list({}, new AbortController().signal)).rejects.toThrow(/items that are not an array/);
    const odd = await peer((_req, res) => res.end(JSON.stringify({ kind: 5, items: null, metadata: { resourceVersion: 7, continue: { a: 1 } } })));
    expect(await odd.list({}, new AbortController().signal)).toEqual({ items: [], kind: undefined, apiVersion: undefined, resourceVersion: '', continue: undefined });
  });
});

describe('statusFromObject', () => {
  it('keeps only well-typed fields of an ERROR event and bounds its text', () => {
    const err = statusFromObject({ code: '410', reason: { x: 1 }, message: `a\nb${'m'.repeat(1000)}` });
    expect(err.statusCode).toBe(500);
    expect(err.reason).toBeUndefined();
    expect(err.message.startsWith('a b')).toBe(true);
    expect(err.message.length).toBe(300);
    expect(statusFromObject('nonsense').message).toBe('watch ERROR event');
  });
});
