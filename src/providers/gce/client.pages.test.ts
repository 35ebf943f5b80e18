// The Compute Engine client's bound on listings, against a test-only HTTP
// server on loopback: the emulator ends every listing, so this server answers
// well-formed instances.list and aggregatedList pages whose nextPageToken
// never runs out, or comes round again.
import { describe, it, expect, beforeAll, afterAll, beforeEach } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isProviderError, ProviderError } from '../errors.js';
import { GceClient, MAX_PAGES } from './client.js';

const ZONE = 'us-central1-a';
const PROJECT = 'leasehold-test';

type Tokens = (page: number) => string | undefined;

const instance = (page: number) => ({
  kind: 'compute#instance',
  id: String(1000 + page),
  name: `vm-${page}`,
  zone: `https://www.googleapis.com/compute/v1/projects/${PROJECT}/zones/${ZONE}`,
  machineType: `https://www.googleapis.com/compute/v1/projects/${PROJECT}/zones/${ZONE}/machineTypes/e2-standard-4`,
  status: 'RUNNING',
  labels: { 'leasehold-target': 'ci' },
});

describe('GceClient listings stop on endless page tokens', () => {
  let server: Server;
  let endpoint: string;
  let tokens: Tokens = () => undefined;
  let requests = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const sent = url.searchParams.get('pageToken');
      const page = sent ? Number(sent.split('-')[1]) + 1 : 1;
      const next = tokens(page);
      const aggregated = url.pathname.endsWith('/aggregated/instances');
      const body = aggregated
        ? { kind: 'compute#instanceAggregatedList', id: `projects/${PROJECT}/aggregated/instances`, items: { [`zones/${ZONE}`]: { instances: [instance(page)] } }, ...(next ? { nextPageToken: next } : {}) }
        : { kind: 'compute#instanceList', id: `projects/${PROJECT}/zones/${ZONE}/instances`, items: [instance(page)], ...(next ? { nextPageToken: next } : {}) };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/compute/v1`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    requests = 0;
  });

  const client = () => new GceClient({ project: PROJECT, endpoint, tokens: { token: async () => 'test-token', invalidate: () => {} }, timeoutMs: 5000 });

  async function caught(p: Promise<unknown>): Promise<ProviderError> {
    try {
      await p;
    } catch (e) {
      expect(isProviderError(e)).toBe(true);
      return e as ProviderError;
    }
    throw new Error('expected the listing to fail');
  }

  // A fresh token on every page (page-1, page-2, ...), never none.
  const endless: Tokens = (page) => `page-${page}`;

  it.each([
    [`list ${ZONE}`, (c: GceClient) => c.list(ZONE, {})],
    ['aggregatedList', (c: GceClient) => c.listAll({})],
  ])('%s reads at most MAX_PAGES pages of a listing that never ends, then fails with a typed error', async (what, call) => {
    tokens = endless;
    const err = await caught(call(client()));
    expect(err.kind).toBe('Unknown');
    expect(err.message).toContain(`Compute Engine ${what}`);
    expect(err.message).toContain(`after ${MAX_PAGES}`);
    expect(requests).toBe(MAX_PAGES);
  });

  it.each([
    [`list ${ZONE}`, (c: GceClient) => c.list(ZONE, {})],
    ['aggregatedList', (c: GceClient) => c.listAll({})],
  ])('%s stops at the first page token that comes round again', async (what, call) => {
    // Pages 1, 2 and 3 hand out page-1, page-2, page-3; page 4 answers page-2 again.
    tokens = (page) => (page === 4 ? 'page-1' : `page-${page}`);
    const err = await caught(call(client()));
    expect(err.kind).toBe('Unknown');
    expect(err.message).toMatch(new RegExp(`Compute Engine ${what}: page 4 handed back a page token an earlier page gave`));
    expect(requests).toBe(4);
  });

  it('still reads a listing of exactly MAX_PAGES pages in full', async () => {
    tokens = (page) => (page < MAX_PAGES ? `page-${page}` : undefined);
    const listed = await client().list(ZONE, {});
    expect(listed).toHaveLength(MAX_PAGES);
    expect(listed.at(-1)?.name).toBe(`vm-${MAX_PAGES}`);
    const all = await client().listAll({});
    expect(all.instances).toHaveLength(MAX_PAGES);
  });
});
