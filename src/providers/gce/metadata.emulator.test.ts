// Compute Engine calls as the controller's own identity: tokens from the
// metadata server (the emulator's, reached through GCE_METADATA_HOST as
// Google's libraries do), cached and renewed before they expire, and errors
// that say where the metadata server was looked for and what to set instead.
import { describe, it, expect, beforeAll, afterAll, afterEach } from '@jest/globals';
import { createServer } from 'node:net';
import { startGceEmulator, type GceEmulator } from '../../../e2e/fakes/gce/server.js';
import { ProviderError } from '../errors.js';
import { METADATA_HOST, MetadataTokenSource, metadataBaseUrl } from './auth.js';
import { GceClient } from './client.js';

const ZONE = 'us-central1-a';

async function refusal(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ProviderError);
    return e as ProviderError;
  }
  throw new Error('expected the call to fail');
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('metadataBaseUrl', () => {
  it.each([
    ['unset', undefined, `http://${METADATA_HOST}/computeMetadata/v1`],
    ['empty', '', `http://${METADATA_HOST}/computeMetadata/v1`],
    ['a host and port', '127.0.0.1:8080', 'http://127.0.0.1:8080/computeMetadata/v1'],
    ['a bare IP', '169.254.169.254', 'http://169.254.169.254/computeMetadata/v1'],
    ['a URL with a trailing slash', 'http://metadata.test:9/', 'http://metadata.test:9/computeMetadata/v1'],
  ])('GCE_METADATA_HOST %s', (_what, value, url) => {
    expect(metadataBaseUrl(value === undefined ? {} : { GCE_METADATA_HOST: value })).toBe(url);
  });
});

describe('MetadataTokenSource against the emulator', () => {
  let g: GceEmulator;
  beforeAll(async () => {
    g = await startGceEmulator();
  });
  afterAll(() => g.stop());
  afterEach(() => {
    g.clearFaults();
    g.tokenTtlSeconds = 3600;
    g.metadataServiceAccount = g.serviceAccountKey.client_email;
  });
  const metadataRequests = () => g.requests.filter((r) => r.op === 'metadata-token').length;
  const ownIdentity = (tokens = new MetadataTokenSource({ baseUrl: metadataBaseUrl({ GCE_METADATA_HOST: g.metadataHost }) })) => new GceClient({ tokens, project: g.project, endpoint: g.url });

  it('calls Compute Engine as the attached service account, with one token for many calls', async () => {
    const client = ownIdentity();
    const before = metadataRequests();
    await Promise.all([client.list(ZONE, {}), client.list(ZONE, {}), client.list(ZONE, {})]);
    await client.list(ZONE, {});
    expect(metadataRequests() - before).toBe(1);
    expect(g.requests.filter((r) => r.op === 'list').at(-1)).toMatchObject({ status: 200, account: g.serviceAccountKey.client_email });
    expect(g.requests.filter((r) => r.op === 'token')).toHaveLength(0);
  });

  it('renews the token before it expires, so no call is refused', async () => {
    g.tokenTtlSeconds = 1;
    const client = ownIdentity();
    const before = metadataRequests();
    await client.list(ZONE, {});
    const end = Date.now() + 10_000;
    while (metadataRequests() - before < 2 && Date.now() < end) {
      await client.list(ZONE, {});
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(metadataRequests() - before).toBe(2);
    expect(g.requests.filter((r) => r.op === 'list' && r.status === 401)).toHaveLength(0);
  });

  it('asks the metadata server again once when the API refuses the cached token', async () => {
    const client = ownIdentity();
    await client.list(ZONE, {});
    const before = metadataRequests();
    g.fault({ op: 'list', mode: 'status', status: 401, times: 1 });
    await client.list(ZONE, {});
    expect(metadataRequests() - before).toBe(1);
  });

  it('names the address and the fix when no metadata server answers', async () => {
    const base = metadataBaseUrl({ GCE_METADATA_HOST: `127.0.0.1:${await closedPort()}` });
    const e = await refusal(new MetadataTokenSource({ baseUrl: base }).token());
    expect(e.kind).toBe('Unauthorized');
    expect(e.message).toContain(`no credentialsSecretRef and no metadata server reachable at ${base}`);
    expect(e.message).toContain('set spec.gce.credentialsSecretRef or run the controller with a GCE identity');
  });

  it.each([
    ['no service account is attached', () => (g.metadataServiceAccount = undefined), () => new MetadataTokenSource({ baseUrl: metadataBaseUrl({ GCE_METADATA_HOST: g.metadataHost }) }), /has no service account for the controller/, false],
    ['the metadata server fails', () => g.fault({ op: 'metadata-token', mode: 'status', status: 503, times: 1 }), () => new MetadataTokenSource({ baseUrl: metadataBaseUrl({ GCE_METADATA_HOST: g.metadataHost }) }), /gave no token \(HTTP 503\)/, true],
    ['something else answers (no Metadata-Flavor)', () => undefined, () => new MetadataTokenSource({ baseUrl: `${g.origin}/not-metadata` }), /is not a metadata server/, false],
  ])('refuses when %s, saying what to set', async (_what, arrange, source, message, retryable) => {
    arrange();
    const e = await refusal(source().token());
    expect(e).toMatchObject({ kind: 'Unauthorized', retryable });
    expect(e.message).toMatch(message);
    expect(e.message).toContain('set spec.gce.credentialsSecretRef');
  });

  it('never puts the token in an error', async () => {
    const tokens: string[] = [];
    const source = new MetadataTokenSource({
      baseUrl: metadataBaseUrl({ GCE_METADATA_HOST: g.metadataHost }),
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        tokens.push(((await res.clone().json()) as { access_token: string }).access_token);
        return res;
      },
    });
    const e = await refusal(ownIdentity(source).get(ZONE, 'missing'));
    expect(tokens).toHaveLength(1);
    expect(`${e.message} ${String(e.stack)}`).not.toContain(tokens[0]!);
  });
});
