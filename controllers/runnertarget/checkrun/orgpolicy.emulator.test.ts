// A launch an organisation policy refuses, against the Compute Engine
// emulator: the launch tries no other zone, settles its receipt Failed,
// leaves no VM (looking for one when the refusal came in the DONE Operation,
// deleting one left behind a receipt of its own) and asks to end the check.
// With spec.gce.externalIP false the insert asks for no external address and
// goes through.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Receipt, RunnerTarget } from '../../../src/api/index.js';
import { parseServiceAccountKey } from '../../../src/providers/gce/auth.js';
import { GceClient } from '../../../src/providers/gce/client.js';
import { PolicyRefused } from '../../../src/providers/gce/errors.js';
import type { ComputeInstances } from '../../../src/providers/gce/types.js';
import { startGceEmulator, type GceEmulator } from '../../../e2e/fakes/gce/server.js';
import type { ChangeContext, ChangeOutcome } from './changecontext.js';
import { runChange } from './changes.js';
import { DurabilityGuard } from './durability.js';
import type { Placement } from '../policy/placement.js';
import { receiptFor } from '../policy/receipts.js';
import { NOW, spec } from '../testing/pool.js';

const EXTERNAL_IP = 'constraints/compute.vmExternalIpAccess';

describe('a launch an organisation policy refuses, against the Compute Engine emulator', () => {
  const ZONES = ['us-central1-a', 'us-central1-b'];
  let g: GceEmulator;
  let gce: GceClient;
  const settled: string[] = [];
  const recorded: Receipt[] = [];
  const target = (over: Partial<RunnerTarget['spec']['gce']> = {}): RunnerTarget => ({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'RunnerTarget',
    metadata: { namespace: 'ci', name: 'pool', uid: 'u-1' },
    spec: { ...spec, gce: { ...spec.gce, project: 'leasehold-test', zones: ZONES, machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }], ...over } },
  });
  const placements: Placement[] = ZONES.map((zone) => ({ zone, machineType: 'e2-standard-4', tier: 0, provisioningModel: 'SPOT', pricePerHour: 0.05 }));
  const ctx = (t: RunnerTarget, clients: ComputeInstances = gce): ChangeContext => ({
    target: t,
    clients: { gce: clients, github: {} as never },
    observation: { at: NOW, jobs: [], runners: [], vms: [], probes: new Map() },
    installationID: 'inst1',
    host: { privateKey: '', publicKey: 'ssh-ed25519 AAAA leasehold', user: 'leasehold', port: 22 },
    guard: new DurabilityGuard(),
    now: () => Date.now(),
    affordable: () => true,
    record: async (r) => (recorded.push(r), true),
    settle: async (id, phase, message) => (settled.push(`${id} ${phase} ${message}`), true),
  });
  const launch = (name: string, t = target(), clients?: ComputeInstances): [Receipt, Promise<ChangeOutcome>] => {
    const receipt = receiptFor({ action: 'Launch', hosts: [name], zone: ZONES[0], machineType: 'e2-standard-4', provisioningModel: 'SPOT' }, Date.now(), 'u-1');
    return [receipt, runChange({ kind: 'launch', intent: { action: 'Launch', hosts: [name] }, placements }, receipt, ctx(t, clients))];
  };

  beforeAll(async () => {
    g = await startGceEmulator({ zones: ZONES });
    gce = new GceClient({ key: parseServiceAccountKey(JSON.stringify(g.serviceAccountKey)), endpoint: g.url, tokenUrl: g.tokenUrl });
  });
  afterAll(() => g.stop());
  afterEach(() => {
    Object.assign(g.orgPolicy, { forbidExternalIp: false, requireOsLogin: false, deniedServiceAccounts: [], refuseAs: 'http' });
    settled.length = 0;
    recorded.length = 0;
  });

  it.each(['http', 'operation'] as const)('vmExternalIpAccess refusing the insert (%s): one insert, no other zone, receipt Failed, no VM, the check ends naming the constraint and spec.gce.externalIP', async (refuseAs) => {
    Object.assign(g.orgPolicy, { forbidExternalIp: true, refuseAs });
    const name = `pool-nat-${refuseAs}`;
    const [receipt, outcome] = launch(name);
    const got = await outcome;
    expect(got).toMatchObject({ ok: false, receiptID: receipt.id, event: { type: 'Warning', reason: 'LaunchRefused' }, endsCheck: { reason: 'OrgPolicyRefused' } });
    expect(got.phase).toBeUndefined();
    expect(got.endsCheck!.message).toContain(EXTERNAL_IP);
    expect(got.endsCheck!.message).toContain('spec.gce.externalIP');
    expect(settled).toEqual([expect.stringMatching(new RegExp(`^${receipt.id} Failed us-central1-a e2-standard-4: OrgPolicyRefused: `))]);
    expect(g.inserts().filter((i) => i.name === name).map((i) => `${i.zone} ${i.refused}`)).toEqual(['us-central1-a CONDITION_NOT_MET']);
    expect(g.instances().filter((i) => i.name === name)).toEqual([]);
    expect(recorded).toEqual([]);
    // Only a refusal in the Operation makes the launch look for a VM left behind.
    expect(g.requests.filter((r) => r.op === 'get' && r.path.includes(name)).map((r) => r.status)).toEqual(refuseAs === 'operation' ? [404] : []);
  });

  it('a host service account the target may not act as: ServiceAccountNotAllowed naming spec.gce.serviceAccount', async () => {
    const t = target();
    g.orgPolicy.deniedServiceAccounts.push(t.spec.gce.serviceAccount);
    const [, outcome] = launch('pool-sa', t);
    const got = await outcome;
    expect(got.endsCheck).toMatchObject({ reason: 'ServiceAccountNotAllowed', message: expect.stringContaining('spec.gce.serviceAccount') });
    expect(g.inserts().filter((i) => i.name === 'pool-sa')).toHaveLength(1);
  });

  it('with spec.gce.externalIP false the insert asks for no access config and the VM is launched under the policy', async () => {
    g.orgPolicy.forbidExternalIp = true;
    const [, outcome] = launch('pool-internal', target({ externalIP: false }));
    expect(await outcome).toMatchObject({ ok: true, event: { reason: 'Launched' } });
    expect(g.instance(ZONES[0]!, 'pool-internal')!.body.networkInterfaces).toEqual([{ network: 'global/networks/default' }]);
  });

  it('a VM a refusing Operation left behind is deleted behind a Delete receipt of its own', async () => {
    // Compute Engine removes the instance of a failed insert; should it not, the launch must not leave it.
    const left: ComputeInstances = Object.create(gce) as ComputeInstances;
    const t = target();
    left.waitOperation = async () => {
      throw new PolicyRefused(`Compute Engine insert: CONDITION_NOT_MET: Constraint ${EXTERNAL_IP} violated`, 412, 'CONDITION_NOT_MET', { kind: 'constraint', constraint: EXTERNAL_IP }, true);
    };
    const [receipt, outcome] = launch('pool-left', t, left);
    const got = await outcome;
    expect(got.endsCheck).toMatchObject({ reason: 'OrgPolicyRefused', message: expect.stringContaining('left by the refused insert, is being deleted') });
    expect(recorded).toEqual([expect.objectContaining({ action: 'Delete', hosts: ['pool-left'], zone: ZONES[0], phase: 'Intended' })]);
    expect(settled).toEqual([expect.stringMatching(new RegExp(`^${receipt.id} Failed `)), expect.stringMatching(new RegExp(`^${recorded[0]!.id} Done `))]);
    await g.waitForStatus(ZONES[0]!, 'pool-left', 'GONE');
  });
});
