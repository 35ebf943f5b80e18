// A target's endpoints against the admin's allow-lists, and the refusal
// coming before any Secret is read or any request is sent.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunnerTarget } from '../../../src/api/index.js';
import { endpointRefusal, TargetSpecError, tokenEndpointRefusal, type TargetEndpointPolicy } from './endpoints.js';
import { TargetProviders } from '../checkrun/providers.js';
import { spec } from '../testing/pool.js';

const defaults: TargetEndpointPolicy = {
  github: { allowed: ['https://api.github.com'], allowLoopbackHTTP: false },
  gce: { allowed: ['https://compute.googleapis.com'], allowLoopbackHTTP: false },
  gceToken: { allowed: ['https://oauth2.googleapis.com/token'], allowLoopbackHTTP: false },
};
const with_ = (github: string, gce: string) => ({ github: { ...spec.github, apiURL: github }, gce: { ...spec.gce, endpoint: gce } });

describe('endpointRefusal', () => {
  it.each([
    ['the public endpoints', 'https://api.github.com', 'https://compute.googleapis.com/compute/v1', undefined],
    ['a GitHub server the admin did not list', 'https://ghe.tenant.example/api/v3', 'https://compute.googleapis.com/compute/v1', /spec\.github\.apiURL https:\/\/ghe\.tenant\.example\/api\/v3 is not an endpoint the admin allowed.*runnerTarget\.allowedEndpoints\.github/],
    ['a look-alike host', 'https://api.github.com.tenant.example', 'https://compute.googleapis.com/compute/v1', /spec\.github\.apiURL/],
    ['a Compute Engine endpoint the admin did not list', 'https://api.github.com', 'https://compute.tenant.example/compute/v1', /spec\.gce\.endpoint .*runnerTarget\.allowedEndpoints\.gce/],
    ['plain http', 'http://api.github.com', 'https://compute.googleapis.com/compute/v1', /is not https/],
    ['loopback without the test flag', 'http://127.0.0.1:8080', 'https://compute.googleapis.com/compute/v1', /is not https/],
  ])('%s', (_what, github, gce, refused) => {
    const e = endpointRefusal(with_(github, gce), defaults);
    if (refused === undefined) expect(e).toBeUndefined();
    else {
      expect(e?.reason).toBe('EndpointNotAllowed');
      expect(e?.message).toMatch(refused);
    }
  });

  it('names both fields when both are refused', () => {
    const e = endpointRefusal(with_('https://evil.example', 'https://evil.example'), defaults);
    expect(e?.message).toContain('spec.github.apiURL');
    expect(e?.message).toContain('spec.gce.endpoint');
  });

  it('allows a listed loopback emulator only with the test flag', () => {
    const listed = { ...defaults, github: { allowed: ['http://127.0.0.1:9000'], allowLoopbackHTTP: true }, gce: { allowed: ['http://127.0.0.1:9001'], allowLoopbackHTTP: true } };
    expect(endpointRefusal(with_('http://127.0.0.1:9000', 'http://127.0.0.1:9001/compute/v1'), listed)).toBeUndefined();
    expect(endpointRefusal(with_('http://127.0.0.1:9002', 'http://127.0.0.1:9001/compute/v1'), listed)?.reason).toBe('EndpointNotAllowed');
  });
});

describe('tokenEndpointRefusal', () => {
  it.each([
    ["Google's token endpoint", 'https://oauth2.googleapis.com/token', undefined],
    ['a token endpoint the key writer chose', 'https://tokens.tenant.example/token', /the token_uri of the key in spec\.gce\.credentialsSecretRef https:\/\/tokens\.tenant\.example\/token is not an endpoint the admin allowed.*runnerTarget\.allowedEndpoints\.gceToken/],
    ['another path on the Google host', 'https://oauth2.googleapis.com/elsewhere', /is not an endpoint the admin allowed/],
    ['plain http', 'http://oauth2.googleapis.com/token', /is not https/],
    ['not a URL', 'tokens', /is not a URL/],
  ])('%s', (_what, url, refused) => {
    const e = tokenEndpointRefusal(url, defaults);
    if (refused === undefined) expect(e).toBeUndefined();
    else {
      expect(e?.reason).toBe('EndpointNotAllowed');
      expect(e?.message).toMatch(refused);
    }
  });
});

describe('TargetProviders with an unlisted endpoint', () => {
  let server: Server;
  let url: string;
  let received = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      received++;
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('refuses before reading any Secret and before any request', async () => {
    let reads = 0;
    const secrets = async () => {
      reads++;
      return { token: 'ghp_secret', 'key.json': '{}' };
    };
    const target: RunnerTarget = {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'RunnerTarget',
      metadata: { namespace: 'team', name: 'pool', uid: 'u-1' },
      spec: { ...spec, ...with_(url, `${url}/compute/v1`) },
    };
    const providers = new TargetProviders({ secrets, endpoints: { ...defaults, github: { ...defaults.github, allowLoopbackHTTP: true }, gce: { ...defaults.gce, allowLoopbackHTTP: true } } });
    const e = await providers.clients(target).then(() => undefined, (err: unknown) => err);
    expect(e).toBeInstanceOf(TargetSpecError);
    expect((e as TargetSpecError).reason).toBe('EndpointNotAllowed');
    expect(reads).toBe(0);
    expect(received).toBe(0);
  });

  it("refuses a key whose token_uri names an unlisted server, before the signed assertion is sent there", async () => {
    const key = { type: 'service_account', project_id: 'p', client_email: 'sa@p.iam.gserviceaccount.com', private_key_id: 'k1', token_uri: `${url}/token`, private_key: (await import('node:crypto')).generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) };
    const secrets = async () => ({ token: 'ghp_secret', 'key.json': JSON.stringify(key) });
    const target: RunnerTarget = {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'RunnerTarget',
      metadata: { namespace: 'team', name: 'pool', uid: 'u-1' },
      spec: { ...spec, gce: { ...spec.gce, endpoint: 'https://compute.googleapis.com/compute/v1', credentialsSecretRef: { name: 'gce-key', key: 'key.json' } }, github: { ...spec.github, apiURL: 'https://api.github.com' } },
    };
    const e = await new TargetProviders({ secrets, endpoints: { ...defaults, gceToken: { ...defaults.gceToken, allowLoopbackHTTP: true } } }).clients(target).then(() => undefined, (err: unknown) => err);
    expect(e).toBeInstanceOf(TargetSpecError);
    expect((e as TargetSpecError).reason).toBe('EndpointNotAllowed');
    expect((e as TargetSpecError).message).toContain(`the token_uri of the key in spec.gce.credentialsSecretRef ${url}/token is not an endpoint the admin allowed`);
    expect(received).toBe(0);
  });
});
