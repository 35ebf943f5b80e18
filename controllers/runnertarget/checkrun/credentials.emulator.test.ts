// Which identity a target's Compute Engine calls use: its key Secret, or,
// without one, the controller's own identity from the metadata server, and
// that only where the platform admin allowed it (--runner-gce-own-identity).
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import type { RunnerTarget } from '../../../src/api/index.js';
import { metadataBaseUrl, MetadataTokenSource } from '../../../src/providers/gce/auth.js';
import { startGceEmulator, type GceEmulator } from '../../../e2e/fakes/gce/server.js';
import { CredentialsError, TargetProviders } from './providers.js';
import { spec } from '../testing/pool.js';

describe('TargetProviders: Compute Engine credentials', () => {
  let g: GceEmulator;
  beforeAll(async () => {
    g = await startGceEmulator();
  });
  afterAll(() => g.stop());

  const target = (gce: Partial<RunnerTarget['spec']['gce']> = {}): RunnerTarget => {
    const { credentialsSecretRef: _none, ...rest } = spec.gce;
    return {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'RunnerTarget',
      metadata: { namespace: 'ci', name: 'pool', uid: 'u-1' },
      spec: { ...spec, gce: { ...rest, project: g.project, endpoint: g.url, ...gce } },
    };
  };
  const secrets = async (_ns: string, name: string): Promise<Record<string, string> | undefined> =>
    name === 'gh' ? { token: 'ghp_test' } : name === 'gce-key' ? { 'key.json': JSON.stringify(g.serviceAccountKey) } : undefined;
  const refusal = async (p: Promise<unknown>): Promise<CredentialsError> => {
    try {
      await p;
    } catch (e) {
      expect(e).toBeInstanceOf(CredentialsError);
      return e as CredentialsError;
    }
    throw new Error('expected a CredentialsError');
  };
  // The emulator and the endpoint a target chose in one test, both listed: these tests are about identities, not endpoints.
  const endpoints = () => ({ github: { allowed: ['https://api.github.com'], allowLoopbackHTTP: true }, gce: { allowed: [g.url, 'https://compute.example.com'], allowLoopbackHTTP: true }, gceToken: { allowed: [`${new URL(g.url).origin}/token`], allowLoopbackHTTP: true } });
  const metadata = () => ({ tokens: new MetadataTokenSource({ baseUrl: metadataBaseUrl({ GCE_METADATA_HOST: g.metadataHost }) }), endpoint: g.url });

  it('refuses a target without credentialsSecretRef while own identity is off, naming the field and the setting, before any request', async () => {
    const before = g.requests.length;
    const e = await refusal(new TargetProviders({ secrets, endpoints: endpoints() }).clients(target()));
    expect(e.reason).toBe('OwnIdentityDisabled');
    expect(e.message).toContain('spec.gce.credentialsSecretRef is not set');
    expect(e.message).toContain('runnerTarget.gceOwnIdentity=true (--runner-gce-own-identity)');
    expect(g.requests.length).toBe(before);
  });

  it('calls Compute Engine as the controller identity when own identity is on', async () => {
    const { gce } = await new TargetProviders({ secrets, endpoints: endpoints(), ownIdentity: metadata() }).clients(target());
    await gce.list('us-central1-a', {});
    expect(g.requests.filter((r) => r.op === 'list').at(-1)).toMatchObject({ status: 200, account: g.serviceAccountKey.client_email });
    expect(g.requests.some((r) => r.op === 'metadata-token')).toBe(true);
  });

  it("never sends the controller's token to an endpoint the target chose", async () => {
    const before = g.requests.filter((r) => r.op === 'metadata-token').length;
    const e = await refusal(new TargetProviders({ secrets, endpoints: endpoints(), ownIdentity: metadata() }).clients(target({ endpoint: 'https://compute.example.com/compute/v1' })));
    expect(e.reason).toBe('CredentialsInvalid');
    expect(e.message).toContain('spec.gce.endpoint https://compute.example.com/compute/v1 is not');
    expect(e.message).toContain('set spec.gce.credentialsSecretRef');
    expect(g.requests.filter((r) => r.op === 'metadata-token').length).toBe(before);
  });

  it('uses the key Secret when one is named, even with own identity on', async () => {
    const before = g.requests.filter((r) => r.op === 'metadata-token').length;
    const { gce } = await new TargetProviders({ secrets, endpoints: endpoints(), ownIdentity: metadata() }).clients(target({ credentialsSecretRef: { name: 'gce-key', namespace: undefined, key: 'key.json' } }));
    await gce.list('us-central1-a', {});
    expect(g.requests.filter((r) => r.op === 'metadata-token').length).toBe(before);
    expect(g.requests.filter((r) => r.op === 'token').at(-1)).toMatchObject({ status: 200 });
  });

  it('ends the check as a credentials problem when the identity is lost, naming the metadata server and the fix', async () => {
    g.metadataServiceAccount = undefined;
    try {
      const e = await refusal(new TargetProviders({ secrets, endpoints: endpoints(), ownIdentity: metadata() }).clients(target()));
      expect(e.reason).toBe('CredentialsInvalid');
      expect(e.message).toMatch(/metadata server at http:\/\/127\.0\.0\.1:\d+\/computeMetadata\/v1 has no service account/);
      expect(e.message).toContain('set spec.gce.credentialsSecretRef or run the controller with a GCE identity');
    } finally {
      g.metadataServiceAccount = g.serviceAccountKey.client_email;
    }
  });
});
