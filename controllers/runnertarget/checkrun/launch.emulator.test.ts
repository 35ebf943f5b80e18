// A launch against the Compute Engine emulator: every insert carries the
// lifetime bound, and an insert answered 409 alreadyExists (a requestId
// Compute Engine forgot after a long outage) is the VM existing, looked up
// by name, not a failed launch; a VM of that name that is not the target's is.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Receipt, RunnerTarget } from '../../../src/api/index.js';
import { parseServiceAccountKey } from '../../../src/providers/gce/auth.js';
import { GceClient } from '../../../src/providers/gce/client.js';
import { errorForOperation } from '../../../src/providers/gce/errors.js';
import { RateLimitedError } from '../../../src/providers/ratelimit.js';
import { startGceEmulator, type GceEmulator } from '../../../e2e/fakes/gce/server.js';
import type { ChangeContext } from './changecontext.js';
import { runChange } from './changes.js';
import { DurabilityGuard } from './durability.js';
import { vmLabels } from './providers.js';
import type { Placement } from '../policy/placement.js';
import { receiptFor } from '../policy/receipts.js';
import { NOW, spec } from '../testing/pool.js';

const ZONE = 'us-central1-a';

describe('launch against the Compute Engine emulator', () => {
  let g: GceEmulator;
  let gce: GceClient;
  const settled: string[] = [];
  const recorded: string[] = [];
  const target: RunnerTarget = {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'RunnerTarget',
    metadata: { namespace: 'ci', name: 'pool', uid: 'u-1' },
    spec: { ...spec, gce: { ...spec.gce, project: 'leasehold-test', zones: [ZONE], machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }], maxRunDuration: '12h' } },
  };
  const placement: Placement = { zone: ZONE, machineType: 'e2-standard-4', tier: 0, provisioningModel: 'SPOT', pricePerHour: 0.05 };
  const ctx = (): ChangeContext => ({
    target,
    clients: { gce, github: {} as never },
    observation: { at: NOW, jobs: [], runners: [], vms: [], probes: new Map() },
    installationID: 'inst1',
    host: { privateKey: '', publicKey: 'ssh-ed25519 AAAA leasehold', user: 'leasehold', port: 22 },
    guard: new DurabilityGuard(),
    now: () => Date.now(),
    affordable: () => true,
    record: async (r) => (recorded.push(r.id), true),
    settle: async (id, phase, message) => (settled.push(`${id} ${phase} ${message}`), true),
    throttleBackoffMs: 20,
  });
  const launch = (name: string): [Receipt, Promise<Awaited<ReturnType<typeof runChange>>>] => {
    const receipt = receiptFor({ action: 'Launch', hosts: [name], zone: ZONE, machineType: 'e2-standard-4', provisioningModel: 'SPOT' }, Date.now(), 'u-1');
    return [receipt, runChange({ kind: 'launch', intent: { action: 'Launch', hosts: [name] }, placements: [placement] }, receipt, ctx())];
  };

  beforeAll(async () => {
    g = await startGceEmulator({ zones: [ZONE] });
    gce = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl });
  });
  afterAll(() => g.stop());

  it('inserts with scheduling.maxRunDuration from spec.gce.maxRunDuration and instanceTerminationAction DELETE', async () => {
    const [, outcome] = launch('pool-ttl');
    expect(await outcome).toMatchObject({ ok: true, event: { reason: 'Launched' } });
    expect(g.instance(ZONE, 'pool-ttl')!.scheduling).toMatchObject({ provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', maxRunDuration: { seconds: String(12 * 3600) } });
  });

  it('an insert repeated after Compute Engine forgot its requestId (409 alreadyExists) finds its own VM: launched, receipt left open', async () => {
    const [receipt, first] = launch('pool-again');
    await first;
    g.forgetRequestIds();
    settled.length = 0;
    const again = await runChange({ kind: 'resume', receipt }, receipt, ctx());
    expect(again).toMatchObject({ ok: true, receiptID: receipt.id, event: { reason: 'Launched', message: expect.stringContaining('already existed') } });
    expect(again.phase).toBeUndefined();
    expect(settled).toEqual([]);
    expect(g.requests.filter((r) => r.op === 'insert').map((r) => r.status).slice(-1)).toEqual([409]);
    expect(g.requests.at(-1)).toMatchObject({ op: 'get', status: 200 });
    expect(g.instances(ZONE).filter((i) => i.name === 'pool-again')).toHaveLength(1);
  });

  it('an insert whose DONE Operation says RESOURCE_OPERATION_RATE_EXCEEDED is tried again after a backoff, each try with a receipt of its own', async () => {
    g.refuse({ zone: ZONE, code: 'RESOURCE_OPERATION_RATE_EXCEEDED', as: 'operation', times: 2 });
    settled.length = 0;
    recorded.length = 0;
    const [receipt, outcome] = launch('pool-throttled');
    const got = await outcome;
    expect(got).toMatchObject({ ok: true, event: { reason: 'Launched' } });
    expect(settled).toEqual([expect.stringMatching(new RegExp(`^${receipt.id} Failed ${ZONE} e2-standard-4: throttled \\(1 of 4\\)`)), expect.stringMatching(/ Failed .*throttled \(2 of 4\)/)]);
    expect(recorded).toHaveLength(2);
    expect(got.receiptID).toBe(recorded[1]);
    expect(g.inserts().filter((i) => i.name === 'pool-throttled').map((i) => i.refused ?? 'made')).toEqual(['RESOURCE_OPERATION_RATE_EXCEEDED', 'RESOURCE_OPERATION_RATE_EXCEEDED', 'made']);
  });

  it('a launch throttled past its retries is left to the next check, not failed over to another placement', async () => {
    g.refuse({ code: 'RESOURCE_OPERATION_RATE_EXCEEDED', as: 'operation' });
    try {
      const [, outcome] = launch('pool-throttled-2');
      expect(await outcome).toMatchObject({ ok: false, event: { reason: 'LaunchThrottled' } });
      expect(g.inserts().filter((i) => i.name === 'pool-throttled-2')).toHaveLength(4);
    } finally {
      g.clearRefusals();
    }
  });

  it('a throttling code mixed with others in one Operation is throttling', () => {
    const e = errorForOperation('insert us-central1-a/x', { error: { errors: [{ code: 'RESOURCE_OPERATION_RATE_EXCEEDED', message: 'rate' }, { code: 'INTERNAL_ERROR', message: 'x' }] }, httpErrorStatusCode: 403 });
    expect(e).toBeInstanceOf(RateLimitedError);
  });

  it("a VM of that name that is not the target's fails the launch, naming spec.gce.namePrefix", async () => {
    const other = { ...vmLabels(target, 'inst1'), 'leasehold-installation': 'someone-else' };
    await gce.insert({ zone: ZONE, name: 'pool-taken', machineType: 'e2-standard-4', spot: true, image: 'img', serviceAccountEmail: 'h@leasehold-test.iam.gserviceaccount.com', sshUser: 'u', sshPublicKey: 'ssh-ed25519 AAAA', labels: other, requestId: crypto.randomUUID() });
    const [, outcome] = launch('pool-taken');
    expect(await outcome).toMatchObject({ ok: false, phase: 'Failed', event: { type: 'Warning', reason: 'LaunchFailed', message: expect.stringContaining('spec.gce.namePrefix') } });
  });
});
