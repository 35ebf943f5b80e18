// The Lambda client against the emulator, which holds every request body to
// Lambda's API description: each call the client makes is one the description
// allows, and a rate-limited launch, answered with Cloudflare's plain text as
// Lambda's docs describe, comes back as RateLimited.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { startLambdaEmulator, type LambdaEmulator } from '../../../e2e/fakes/lambda/server.js';
import { LambdaClient } from './client.js';

const PUBLIC_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T leasehold-test';

describe('LambdaClient against the Lambda emulator', () => {
  let emu: LambdaEmulator;
  let client: LambdaClient;

  beforeAll(async () => {
    emu = await startLambdaEmulator({ sshd: false, bootMs: 50, terminateMs: 50, launchIntervalMs: 60_000, requestsPerSecond: 0, fileSystems: [{ name: 'shared', region: 'us-east-1' }] });
    client = new LambdaClient({ endpoint: emu.url, apiKey: emu.apiKey, timeoutMs: 10_000 });
  });

  afterAll(async () => {
    await emu.stop();
  });

  it('sends only what the description allows, from adding a key to terminating', async () => {
    await client.addSshKey('leasehold', PUBLIC_KEY);
    expect((await client.listSshKeys()).map((k) => k.name)).toEqual(['leasehold']);
    expect((await client.listInstanceTypes()).map((t) => t.name)).toContain('gpu_1x_a10');
    expect(await client.listFileSystems()).toEqual([{ name: 'shared', region: 'us-east-1' }]);
    const [id] = await client.launch({ region: 'us-east-1', instanceType: 'gpu_1x_a10', sshKeyNames: ['leasehold'], fileSystemNames: ['shared'], name: 'lh-test', userData: '#cloud-config\n' });
    expect(await client.getInstance(id!)).toMatchObject({ id, name: 'lh-test', region: 'us-east-1', instanceType: 'gpu_1x_a10' });
    expect((await client.listInstances()).map((i) => i.id)).toEqual([id]);
    await client.terminate([id!]);
    expect(emu.refusedRequests).toEqual([]);
    expect(emu.launches.map((l) => l.outcome)).toEqual(['launched']);
  });

  it("takes Lambda's launch limit, Cloudflare's 429 with plain text, as RateLimited and does not send the launch again", async () => {
    const err = await client.launch({ region: 'us-east-1', instanceType: 'gpu_1x_a10', sshKeyNames: ['leasehold'], name: 'lh-again' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'RateLimited', status: 429, code: undefined });
    expect((err as Error).message).toBe('Lambda POST /instance-operations/launch: HTTP 429: error code: 1015');
    expect((err as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
    expect(emu.launches.map((l) => l.outcome)).toEqual(['launched', 'rate-limited']);
  });
});
