import { describe, expect, it } from '@jest/globals';
import type { RunnerTarget } from '../../../src/api/index.js';
import { spec } from '../testing/pool.js';
import { WebhookSecrets } from './secrets.js';

const target = (namespace: string, ref?: { name: string; key?: string }): RunnerTarget => ({
  apiVersion: 'leasehold.dev/v1alpha1',
  kind: 'RunnerTarget',
  metadata: { namespace, name: 'pool', uid: 'u-1' },
  spec: { ...spec, github: { ...spec.github, ...(ref ? { webhookSecretRef: { namespace: undefined, key: 'secret', ...ref } } : {}) } },
});

describe('WebhookSecrets', () => {
  it("reads the key from the target's own namespace, keeps it a while, and reads it again after", async () => {
    let now = 0;
    const reads: string[] = [];
    const data: Record<string, Record<string, string>> = { 'team-a/hook': { secret: 'one', other: 'two' } };
    const secrets = new WebhookSecrets(async (ns, name) => (reads.push(`${ns}/${name}`), data[`${ns}/${name}`]), { ttlMs: 1000, now: () => now });
    expect(await secrets.secret(target('team-a', { name: 'hook' }))).toBe('one');
    expect(await secrets.secret(target('team-a', { name: 'hook', key: 'other' }))).toBe('two');
    // Same name in another namespace: that namespace's Secret, which does not exist.
    expect(await secrets.secret(target('team-b', { name: 'hook' }))).toBeUndefined();
    expect(reads).toEqual(['team-a/hook', 'team-a/hook', 'team-b/hook']);
    data['team-a/hook'] = { secret: 'rotated' };
    now = 999;
    expect(await secrets.secret(target('team-a', { name: 'hook' }))).toBe('one');
    expect(await secrets.secret(target('team-b', { name: 'hook' }))).toBeUndefined();
    expect(reads).toHaveLength(3);
    now = 1000;
    expect(await secrets.secret(target('team-a', { name: 'hook' }))).toBe('rotated');
  });

  it('a target without webhookSecretRef has none, and nothing is read', async () => {
    const secrets = new WebhookSecrets(async () => {
      throw new Error('not read');
    });
    expect(await secrets.secret(target('team-a'))).toBeUndefined();
  });
});
