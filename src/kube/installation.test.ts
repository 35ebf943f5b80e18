import { describe, expect, it } from '@jest/globals';
import { InstallationIDError, loadOrCreateInstallationID, newInstallationID } from './installation.js';

/** A Secret store with the two calls the loader makes; `beforeCreate` runs as another replica would, between its read and its create. */
function store(beforeCreate?: (secrets: Map<string, Record<string, string>>) => void) {
  const secrets = new Map<string, Record<string, string>>();
  let creates = 0;
  const api = {
    readNamespacedSecret: async ({ namespace, name }: { namespace: string; name: string }) => {
      const data = secrets.get(`${namespace}/${name}`);
      if (!data) throw Object.assign(new Error('not found'), { code: 404 });
      return { data };
    },
    createNamespacedSecret: async ({ namespace, body }: { namespace: string; body: { metadata: { name: string }; data: Record<string, string> } }) => {
      creates++;
      beforeCreate?.(secrets);
      const key = `${namespace}/${body.metadata.name}`;
      if (secrets.has(key)) throw Object.assign(new Error('exists'), { code: 409 });
      secrets.set(key, body.data);
      return body;
    },
  };
  return { api: api as never, secrets, creates: () => creates };
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('installation ID', () => {
  it('is made once and read back on every later start', async () => {
    const s = store();
    const first = await loadOrCreateInstallationID(s.api, 'leasehold-system');
    expect(first).toMatch(/^[a-z0-9]{8}$/);
    await expect(loadOrCreateInstallationID(s.api, 'leasehold-system')).resolves.toBe(first);
    expect(s.creates()).toBe(1);
    expect(s.secrets.get('leasehold-system/leasehold-installation')).toEqual({ id: b64(first) });
  });

  it('is the one another replica created first when both raced to create it', async () => {
    const s = store((secrets) => {
      if (!secrets.has('ns/leasehold-installation')) secrets.set('ns/leasehold-installation', { id: b64('replica1') });
    });
    await expect(loadOrCreateInstallationID(s.api, 'ns')).resolves.toBe('replica1');
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

  it('makes IDs of 8 lowercase letters and digits that do not repeat', () => {
    const ids = new Set(Array.from({ length: 1000 }, newInstallationID));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]{8}$/);
  });
});
