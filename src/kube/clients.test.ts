import { describe, expect, it } from '@jest/globals';
import { remoteKubeConfig } from './clients.js';

describe('remoteKubeConfig', () => {
  it('points at the remote server with the bearer token and CA, verifying TLS', async () => {
    const kc = remoteKubeConfig({ name: 'peer-a', server: 'https://peer.example:6443', token: 'tok', caPEM: '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n' });
    expect(kc.getCurrentCluster()).toMatchObject({ name: 'peer-a', server: 'https://peer.example:6443', skipTLSVerify: false });
    expect(Buffer.from(kc.getCurrentCluster()!.caData!, 'base64').toString()).toContain('BEGIN CERTIFICATE');
    const opts: { headers?: Record<string, string> } = {};
    await kc.applyToHTTPSOptions(opts as never);
    expect(opts.headers?.Authorization).toBe('Bearer tok');
  });

  it('leaves the CA to the system roots when none is given', () => {
    const kc = remoteKubeConfig({ name: 'peer-b', server: 'https://peer.example', token: 't' });
    expect(kc.getCurrentCluster()?.caData).toBeUndefined();
  });
});
