import { describe, expect, it } from '@jest/globals';
import { InstallationIDError, loadOrCreateInstallation, newInstallationID } from './installation.js';

const loadOrCreateInstallationID = async (api: never, ns: string, name = 'leasehold-installation') => (await loadOrCreateInstallation(api, ns, name)).id;

/** A Secret store with the two calls the loader makes; `beforeCreate` runs as another replica would, between its read and its create. */
function store(
  beforeCreate?: (secrets: Map<string, Record<string, string>>) => void,
  beforeReplace?: (secrets: Map<string, Record<string, string>>, annotations: Map<string, Record<string, string>>) => boolean,
) {
  const secrets = new Map<string, Record<string, string>>();
  const annotations = new Map<string, Record<string, string>>();
  let rv = 1;
  let creates = 0;
  const api = {
    readNamespacedSecret: async ({ namespace, name }: { namespace: string; name: string }) => {
      const data = secrets.get(`${namespace}/${name}`);
      if (!data) throw Object.assign(new Error('not found'), { code: 404 });
      return { metadata: { name, resourceVersion: String(rv), annotations: annotations.get(`${namespace}/${name}`) }, data };
    },
    replaceNamespacedSecret: async ({ namespace, name, body }: { namespace: string; name: string; body: { metadata: { resourceVersion: string; annotations?: Record<string, string> }; data: Record<string, string> } }) => {
      if (beforeReplace?.(secrets, annotations)) rv++;
      if (body.metadata.resourceVersion !== String(rv)) throw Object.assign(new Error('conflict'), { code: 409 });
      rv++;
      secrets.set(`${namespace}/${name}`, body.data);
      if (body.metadata.annotations) annotations.set(`${namespace}/${name}`, body.metadata.annotations);
      return body;
    },
    createNamespacedSecret: async ({ namespace, body }: { namespace: string; body: { metadata: { name: string }; data: Record<string, string> } }) => {
      creates++;
      beforeCreate?.(secrets);
      const key = `${namespace}/${body.metadata.name}`;
      if (secrets.has(key)) throw Object.assign(new Error('exists'), { code: 409 });
      rv++;
      secrets.set(key, body.data);
      return body;
    },
  };
  return { api: api as never, secrets, annotations, creates: () => creates };
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('installation ID', () => {
  it('is made once and read back on every later start', async () => {
    const s = store();
    const first = await loadOrCreateInstallationID(s.api, 'leasehold-system');
    expect(first).toMatch(/^[a-z0-9]{8}$/);
    await expect(loadOrCreateInstallationID(s.api, 'leasehold-system')).resolves.toBe(first);
    expect(s.creates()).toBe(1);
    expect(s.secrets.get('leasehold-system/leasehold-installation')).toEqual({ id: b64(first), 'lease-records': b64('adopted') });
  });

  it('is the one another replica created first when both raced to create it', async () => {
    const s = store((secrets) => {
      if (!secrets.has('ns/leasehold-installation')) secrets.set('ns/leasehold-installation', { id: b64('replica1') });
    });
    await expect(loadOrCreateInstallationID(s.api, 'ns')).resolves.toBe('replica1');
  });

  it('on the legacy Secret, is the one another replica created between this replica\'s two reads', async () => {
    const s = store();
    const api = s.api as unknown as { readNamespacedSecret: (a: { namespace: string; name: string }) => Promise<unknown> };
    const read = api.readNamespacedSecret;
    let reads = 0;
    // The other replica's create lands after this one found no Secret and before it looks again.
    api.readNamespacedSecret = async (a) => {
      if (++reads === 2) {
        s.secrets.set('ns/leasehold-installation', { id: b64('replica1') });
        s.annotations.set('ns/leasehold-installation', { 'leasehold.dev/installation': 'leasehold-installation' });
      }
      return read(a);
    };
    await expect(loadOrCreateInstallationID(s.api, 'ns')).resolves.toBe('replica1');
  });

  it('on the legacy Secret, agrees between two replicas starting at once', async () => {
    const s = store();
    const [a, b] = await Promise.all([loadOrCreateInstallationID(s.api, 'ns'), loadOrCreateInstallationID(s.api, 'ns')]);
    expect(a).toBe(b);
  });

  it('differs between installations in different namespaces', async () => {
    const s = store();
    expect(await loadOrCreateInstallationID(s.api, 'staging')).not.toBe(await loadOrCreateInstallationID(s.api, 'prod'));
  });

  it('refuses a Secret that holds something else, naming the Secret and what to restore', async () => {
    const s = store();
    s.secrets.set('ns/leasehold-installation', { id: b64('Not-An-ID!') });
    const err = await loadOrCreateInstallationID(s.api, 'ns').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InstallationIDError);
    expect((err as Error).message).toMatch(/Secret ns\/leasehold-installation key id must hold .*restore the old value/);
  });

  it('differs between two releases in one namespace', async () => {
    const s = store();
    const a = await loadOrCreateInstallation(s.api, 'ns', 'a-installation');
    const b = await loadOrCreateInstallation(s.api, 'ns', 'b-installation');
    expect(a.id).not.toBe(b.id);
    // A new installation has no Leases from before records: status is never trusted for them.
    expect(a.leaseRecordsAdopted).toBe(true);
  });

  it("lets the first release upgraded from a per-namespace ID inherit it, and only that one", async () => {
    const s = store();
    s.secrets.set('ns/leasehold-installation', { id: b64('old00001') });
    const a = await loadOrCreateInstallation(s.api, 'ns', 'a-installation');
    expect(a).toEqual({ id: 'old00001', leaseRecordsAdopted: false });
    expect(s.annotations.get('ns/leasehold-installation')).toEqual({ 'leasehold.dev/installation': 'a-installation' });
    expect((await loadOrCreateInstallation(s.api, 'ns', 'b-installation')).id).not.toBe('old00001');
    expect((await loadOrCreateInstallation(s.api, 'ns', 'a-installation')).id).toBe('old00001');
  });

  it('claims the legacy Secret for a controller still on it, so no release upgraded beside it shares its ID', async () => {
    const s = store();
    s.secrets.set('ns/leasehold-installation', { id: b64('old00001') });
    expect(await loadOrCreateInstallationID(s.api, 'ns')).toBe('old00001');
    expect((await loadOrCreateInstallation(s.api, 'ns', 'a-installation-id')).id).not.toBe('old00001');
    expect(await loadOrCreateInstallationID(s.api, 'ns')).toBe('old00001');
  });

  it('refuses the legacy Secret to a controller on it once a release inherited its ID, naming the flag', async () => {
    const s = store();
    s.secrets.set('ns/leasehold-installation', { id: b64('old00001') });
    await loadOrCreateInstallation(s.api, 'ns', 'a-installation-id');
    await expect(loadOrCreateInstallationID(s.api, 'ns')).rejects.toThrow(/another release inherited .*--installation-secret/);
  });

  it('gives the legacy ID to one release when two claim it at once', async () => {
    let raced = false;
    const s = store(undefined, (_secrets, annotations) => {
      if (raced) return false;
      raced = true;
      annotations.set('ns/leasehold-installation', { 'leasehold.dev/installation': 'b-installation' });
      return true;
    });
    s.secrets.set('ns/leasehold-installation', { id: b64('old00001') });
    expect((await loadOrCreateInstallation(s.api, 'ns', 'a-installation')).id).not.toBe('old00001');
  });

  it('makes IDs of 8 lowercase letters and digits that do not repeat', () => {
    const ids = new Set(Array.from({ length: 1000 }, newInstallationID));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]{8}$/);
  });
});
