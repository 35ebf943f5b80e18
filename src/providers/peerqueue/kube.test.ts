import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
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
