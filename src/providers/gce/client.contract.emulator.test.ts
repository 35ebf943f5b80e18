// Every request the Compute Engine client makes, held to the pinned discovery
// document (e2e/fakes/gce/discovery.json, fetched by `make contracts`): it is a
// method the document has, and each query parameter it carries is one that
// method declares. The client runs each of its calls against the emulator,
// through a fetch that records the URLs.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { loadPinnedDocument, methodForRequest, queryParametersOf, type DiscoveryDocument } from '../../../e2e/fakes/gce/discovery.js';
import { startGceEmulator, type GceEmulator } from '../../../e2e/fakes/gce/server.js';
import { parseServiceAccountKey } from './auth.js';
import { GceClient } from './client.js';
import { instanceSpec } from './testing/instances.js';

const ZONE = 'us-central1-a';

const spec = (name: string, zone = ZONE) => instanceSpec(name, { zone, labels: { 'leasehold-target': 'contract', 'leasehold-installation': 'i1' }, maxRunDurationSeconds: 3600 });

describe('GceClient requests against the pinned discovery document', () => {
  let doc: DiscoveryDocument;
  let g: GceEmulator;
  let client: GceClient;
  const sent: { method: string; url: URL }[] = [];
  beforeAll(async () => {
    doc = loadPinnedDocument();
    g = await startGceEmulator({ pendingMs: 5, runningMs: 5, bootMs: 5 });
    const recording: typeof fetch = (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (url.pathname.startsWith('/compute/v1/')) sent.push({ method: init?.method ?? 'GET', url });
      return fetch(input, init);
    };
    // Pages of one, so that pageToken is sent too.
    client = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl, pageSize: 1, fetch: recording });
  });
  afterAll(() => g.stop());

  it('calls only methods of the document, with only the query parameters each declares', async () => {
    const filter = { labels: { 'leasehold-target': 'contract', 'leasehold-installation': 'i1' }, namePrefix: 'contract-' };
    await client.waitOperation(await client.insert(spec('contract-1')));
    const op = await client.insert(spec('contract-2', 'us-central1-b'));
    await client.getOperation(op.zone, op.name);
    await client.waitOperation(op);
    await g.waitForStatus(ZONE, 'contract-1', 'RUNNING');
    await client.get(ZONE, 'contract-1');
    expect(await client.hostKeys(ZONE, 'contract-1')).not.toHaveLength(0);
    await client.insert(spec('contract-3'));
    expect((await client.list(ZONE, filter)).map((i) => i.name)).toEqual(['contract-1', 'contract-3']);
    expect((await client.listAll(filter)).instances.map((i) => i.name).sort()).toEqual(['contract-1', 'contract-2', 'contract-3']);
    await client.waitOperation(await client.delete(ZONE, 'contract-1', randomUUID()));

    const root = new URL(g.url).pathname.replace(/\/?$/, '/');
    const used = new Map<string, Set<string>>();
    const undeclared = new Set<string>();
    for (const { method, url } of sent) {
      const m = methodForRequest(doc, method, url.pathname.slice(root.length));
      if (!m) {
        undeclared.add(`${method} ${url.pathname}: no method of revision ${doc.revision}`);
        continue;
      }
      const declared = queryParametersOf(doc, m);
      const params = used.get(m.id) ?? new Set<string>();
      for (const k of url.searchParams.keys()) {
        params.add(k);
        if (!declared.has(k)) undeclared.add(`${m.id}: ${k}`);
      }
      used.set(m.id, params);
    }
    expect([...undeclared]).toEqual([]);
    // Every call of the client was made, so none goes unchecked.
    expect(Object.fromEntries([...used].map(([id, ps]) => [id, [...ps].sort()]))).toEqual({
      'compute.instances.insert': ['requestId'],
      'compute.instances.get': [],
      'compute.instances.getGuestAttributes': ['queryPath'],
      'compute.instances.list': ['filter', 'maxResults', 'pageToken'],
      'compute.instances.aggregatedList': ['filter', 'maxResults', 'pageToken'],
      'compute.instances.delete': ['requestId'],
      'compute.zoneOperations.get': [],
      'compute.zoneOperations.wait': [],
    });
  });
});
