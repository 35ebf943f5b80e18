// Each target's own SSH key: made once through the checked generator, kept
// in a Secret named by the target's UID, never another target's, deleted
// with the target.
import { describe, expect, it } from '@jest/globals';
import { parsePublicKey } from '../../src/machine/keys.js';
import { targetKeySecretName, TargetKeys } from './targetkey.js';

function fakeCore() {
  const secrets = new Map<string, Record<string, string>>();
  const notFound = () => Object.assign(new Error('not found'), { code: 404 });
  const core = {
    readNamespacedSecret: async ({ namespace, name }: { namespace: string; name: string }) => {
      const data = secrets.get(`${namespace}/${name}`);
      if (!data) throw notFound();
      return { data };
    },
    createNamespacedSecret: async ({ namespace, body }: { namespace: string; body: { metadata: { name: string }; data: Record<string, string> } }) => {
      secrets.set(`${namespace}/${body.metadata.name}`, body.data);
      return body;
    },
    deleteNamespacedSecret: async ({ namespace, name }: { namespace: string; name: string }) => {
      if (!secrets.delete(`${namespace}/${name}`)) throw notFound();
      return {};
    },
  };
  return { core: core as never, secrets };
}

describe('TargetKeys', () => {
  it('gives each target its own well-formed key, kept in a Secret named by its UID', async () => {
    const { core, secrets } = fakeCore();
    const keys = new TargetKeys(core, 'leasehold-system');
    const a = await keys.key('uid-a');
    const b = await keys.key('uid-b');
    expect(a.publicKey).not.toBe(b.publicKey);
    expect(parsePublicKey(a.publicKey).ok).toBe(true);
    expect(a.publicKey).toContain('leasehold-runnertarget-uid-a');
    expect([...secrets.keys()].sort()).toEqual([`leasehold-system/${targetKeySecretName('uid-a')}`, `leasehold-system/${targetKeySecretName('uid-b')}`]);
    // Another replica (a fresh cache) reads the same key.
    expect((await new TargetKeys(core, 'leasehold-system').key('uid-a')).publicKey).toBe(a.publicKey);
  });

  it('deletes the key with the target, and a deleted key is never used again', async () => {
    const { core, secrets } = fakeCore();
    const keys = new TargetKeys(core, 'leasehold-system');
    const before = await keys.key('uid-a');
    await keys.remove('uid-a');
    expect(secrets.size).toBe(0);
    await keys.remove('uid-a');
    expect((await keys.key('uid-a')).publicKey).not.toBe(before.publicKey);
  });
});
