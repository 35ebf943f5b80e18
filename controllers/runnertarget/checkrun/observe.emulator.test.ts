// What one check reads from Compute Engine: one instances.aggregatedList for
// every zone (the floor of a steady check is one call), with the filter in the
// form the API takes, the target's VMs only, and a zone the list could not
// reach reported rather than failing the check.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { RunnerTarget } from '../../../src/api/index.js';
import { parseServiceAccountKey } from '../../../src/providers/gce/auth.js';
import { GceClient } from '../../../src/providers/gce/client.js';
import { GitHubClient } from '../../../src/providers/github/client.js';
import { startGceEmulator, type GceEmulator } from '../../../e2e/fakes/gce/server.js';
import { startGitHubEmulator, type GitHubEmulator } from '../../../e2e/fakes/github/server.js';
import { observePool, vmLabels } from './providers.js';
import { spec } from '../testing/pool.js';

const ZONES = ['us-central1-a', 'us-central1-b', 'us-central1-c'];

describe('observePool against the Compute Engine emulator', () => {
  let g: GceEmulator;
  let gh: GitHubEmulator;
  let clients: { gce: GceClient; github: GitHubClient };
  const target: RunnerTarget = {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'RunnerTarget',
    metadata: { namespace: 'ci', name: 'pool', uid: 'u-1' },
    spec: { ...spec, gce: { ...spec.gce, project: 'leasehold-test', zones: ZONES } },
  };
  const insert = (zone: string, name: string, labels: Record<string, string>) =>
    clients.gce.insert({ zone, name, machineType: 'e2-standard-4', spot: true, image: 'img', serviceAccountEmail: 'h@leasehold-test.iam.gserviceaccount.com', sshUser: 'u', sshPublicKey: 'ssh-ed25519 AAAA', labels, requestId: randomUUID() });

  beforeAll(async () => {
    g = await startGceEmulator({ zones: ZONES });
    gh = await startGitHubEmulator({ org: 'swack-tools' });
    gh.queueRun('oxidex', [{ labels: ['self-hosted'] }]);
    clients = { gce: new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl }), github: new GitHubClient({ org: gh.org, credentials: { token: gh.token }, api: gh.url }) };
    const mine = vmLabels(target, 'inst1');
    await insert('us-central1-a', 'pool-a', mine);
    await insert('us-central1-c', 'pool-c', mine);
    await insert('us-central1-b', 'pool-other-install', vmLabels(target, 'inst2'));
  });
  afterAll(async () => {
    await g.stop();
    await gh.stop();
  });

  it('a check makes one Compute Engine call for all zones, and sees only its own VMs', async () => {
    const before = g.requests.length;
    const seen = await observePool(target, clients, 'inst1');
    const calls = g.requests.slice(before).filter((r) => r.op !== 'token');
    expect(calls.map((r) => `${r.op} ${r.status}`)).toEqual(['aggregated-list 200']);
    expect(seen.vms.map((v) => `${v.zone}/${v.name}`).sort()).toEqual(['us-central1-a/pool-a', 'us-central1-c/pool-c']);
    expect(seen.unreachableZones).toBeUndefined();
  });

  it('a zone the list cannot reach is reported, and the other zones are still seen', async () => {
    g.unreachableZones.add('us-central1-c');
    try {
      const seen = await observePool(target, clients, 'inst1');
      expect(seen.vms.map((v) => v.name)).toEqual(['pool-a']);
      expect(seen.unreachableZones).toEqual(['us-central1-c']);
    } finally {
      g.unreachableZones.clear();
    }
  });
});
