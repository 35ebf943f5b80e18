// No client of the controller follows a redirect while it carries a
// credential: a loopback server that answers 3xx to every request points at
// a second one, which must never be asked anything; the error names both
// places and no credential.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGceEmulator, type GceEmulator } from '../../e2e/fakes/gce/server.js';
import { ProviderError } from './errors.js';
import { MetadataTokenSource, parseServiceAccountKey } from './gce/auth.js';
import { GceClient } from './gce/client.js';
import { GitHubClient } from './github/client.js';
import { LambdaClient } from './lambda/client.js';
import { sendRest } from './rest.js';

interface Loopback {
  server: Server;
  url: string;
  seen: IncomingMessage[];
}

async function listen(answer: (req: IncomingMessage, res: import('node:http').ServerResponse) => void): Promise<Loopback> {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    seen.push(req);
    answer(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

let landing: Loopback;
let redirector: Loopback;
let status = 307;
let gce: GceEmulator;

beforeAll(async () => {
  landing = await listen((_req, res) => res.end('{}'));
  redirector = await listen((req, res) => {
    res.writeHead(status, { location: `${landing.url}${req.url}` });
    res.end();
  });
  gce = await startGceEmulator();
});
afterAll(async () => {
  for (const s of [landing.server, redirector.server]) await new Promise<void>((r) => s.close(() => r()));
  await gce.stop();
});

async function refusal(p: Promise<unknown>): Promise<ProviderError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(ProviderError);
  return e as ProviderError;
}

function expectRefused(e: ProviderError, secret: string): void {
  expect(e.message).toContain(`${redirector.url}/`);
  expect(e.message).toContain(`a redirect to ${landing.url}/`);
  expect(e.message).toContain('redirects are not followed');
  expect(e.message).not.toContain(secret);
  expect(e.retryable).toBe(false);
  expect(landing.seen).toHaveLength(0);
}

describe('a redirect from an allowed endpoint', () => {
  it.each([301, 302, 303, 307, 308])('HTTP %i is refused, never followed', async (code) => {
    status = code;
    const e = await refusal(sendRest({ method: 'POST', url: `${redirector.url}/x?token=abc`, headers: { authorization: 'Bearer s3cret' }, body: {}, what: 'test', timeoutMs: 5000 }));
    expectRefused(e, 's3cret');
    expect(e.message).not.toContain('token=abc');
    status = 307;
  });

  it('stops the GitHub token at the first place', async () => {
    const client = new GitHubClient({ org: 'acme', credentials: { token: 'ghp_tenantbait' }, api: redirector.url });
    expectRefused(await refusal(client.listRunners()), 'ghp_tenantbait');
    expect(redirector.seen.at(-1)!.headers.authorization).toBe('Bearer ghp_tenantbait');
  });

  it("stops the GitHub App's signed JWT at the first place", async () => {
    const privateKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    const client = new GitHubClient({ org: 'acme', credentials: { appId: '1', installationId: '2', privateKey }, api: redirector.url });
    expectRefused(await refusal(client.listRunners()), 'BEGIN');
  });

  it('stops the Compute Engine token exchange (the signed assertion) at the first place', async () => {
    const key = parseServiceAccountKey(JSON.stringify(gce.serviceAccountKey));
    const client = new GceClient({ key, project: gce.project, endpoint: gce.url, tokenUrl: `${redirector.url}/token` });
    expectRefused(await refusal(client.list('us-central1-a', {})), 'BEGIN');
  });

  it('stops the Compute Engine access token at the first place', async () => {
    const key = parseServiceAccountKey(JSON.stringify(gce.serviceAccountKey));
    const client = new GceClient({ key, project: gce.project, endpoint: `${redirector.url}/compute/v1`, tokenUrl: gce.serviceAccountKey.token_uri });
    const e = await refusal(client.list('us-central1-a', {}));
    expectRefused(e, 'Bearer');
    expect(redirector.seen.at(-1)!.headers.authorization).toMatch(/^Bearer /);
  });

  it('refuses a redirect from the metadata server', async () => {
    await refusal(new MetadataTokenSource({ baseUrl: `${redirector.url}/computeMetadata/v1` }).token());
    expect(landing.seen).toHaveLength(0);
  });

  it('stops the Lambda API key at the first place', async () => {
    const client = new LambdaClient({ endpoint: `${redirector.url}/api/v1`, apiKey: 'secret_lambda_key' });
    expectRefused(await refusal(client.listInstanceTypes()), 'secret_lambda_key');
  });

  it.each([301, 307])('stops a Lambda launch (POST) at the first place on HTTP %i, sent once', async (code) => {
    status = code;
    const client = new LambdaClient({ endpoint: `${redirector.url}/api/v1`, apiKey: 'secret_lambda_key' });
    const before = redirector.seen.length;
    const e = await refusal(client.launch({ region: 'us-east-1', instanceType: 'gpu_1x_a10', sshKeyNames: ['k'], name: 'leasehold-x-y' }));
    status = 307;
    expectRefused(e, 'secret_lambda_key');
    expect(e.message).toContain(`${redirector.url}/api/v1/instance-operations/launch`);
    expect(redirector.seen.slice(before).map((r) => r.method)).toEqual(['POST']);
  });
});
