// Finding 3 of the tenancy review: a namespace user with leasehold.dev "*"
// in their own namespace points their RunnerTarget's host at another team's
// runner host. Their Compute Engine project answers for their VM with the
// victim host's address and host key, so the pinned connection lands on the
// victim's host. Each target has its own SSH key, and a target's VMs admit
// only that key: the victim's sshd refuses the tenant target's key, so the
// tenant's runner config never gets there. The controller runs cluster-wide
// with the chart's own RBAC and admission policy; the key Secret of a
// deleted target goes with it.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JIT_CONFIG_PATH } from '../controllers/runnertarget/checkrun/deliver.js';
import { targetKeySecretName } from '../controllers/runnertarget/targetkey.js';
import { sshKeysOf, startGceEmulator, type EmulatedInstance, type GceEmulator } from './fakes/gce/server.js';
import { startGitHubEmulator, type GitHubEmulator } from './fakes/github/server.js';
import { freePort, SshdMachine } from './fakes/lambda/machine.js';
import type { ControllerProcess } from './support/controller.js';
import { apply, getJSON, testKubectl, waitFor } from './support/kube.js';
import { startEmulatedRunnerController, targetSecrets, targetSpec } from './support/runnertarget.js';
import { removeTwoTeams, twoTeams, type ChartInstall, type Tenant } from './support/tenancy.js';
import { runnerTargetManifest } from './support/builders.js';

const kubectl = testKubectl();
let gce: GceEmulator;
let gh: GitHubEmulator;
let tenant: Tenant;
let victimNS: string;
let install: ChartInstall;
let controller: ControllerProcess;
let sshPort: number;
let root: string;
/** The victim's host: the only real machine. */
let victimHost: SshdMachine | undefined;
let victimVM: EmulatedInstance | undefined;

const TARGET_LABEL = 'leasehold-runnertarget';
const spec = () => targetSpec(gce, gh, 'app', { maxHosts: 1, floor: 1 });
const vmOf = (target: string) => gce.instances().find((i) => i.labels[TARGET_LABEL] === target && i.status === 'RUNNING');
const uidOf = async (ns: string, name: string) => (await getJSON(kubectl, ['runnertarget', name, '-n', ns]))?.metadata?.uid as string;
const keySecret = (uid: string) => getJSON(kubectl, ['secret', targetKeySecretName(uid), '-n', install.ns]);

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rt-keys-'));
  sshPort = await freePort();
  gce = await startGceEmulator({
    onInstanceRunning: async (i) => {
      if (i.labels[TARGET_LABEL] === 'victim') {
        victimHost = await SshdMachine.create({ dir: join(root, i.name), address: i.address, port: sshPort, authorizedKeys: sshKeysOf(i), hostKeys: [], comment: `gce-${i.name}` });
        await victimHost.start();
        victimVM = i;
        return { hostKeys: victimHost.hostKeys, sshPort };
      }
      // The tenant's project answers with the victim host's address and host key.
      const victim = await waitFor('the victim host', async () => victimHost, 60_000);
      return { hostKeys: victim.hostKeys, address: victimVM!.address, sshPort };
    },
  });
  gh = await startGitHubEmulator();
  // The repository both pools follow, with a job waiting.
  gh.queueRun('app', [{ labels: ['self-hosted', 'linux'] }]);
  ({ victimNS, tenant, install } = await twoTeams(kubectl, 'rt-keys', 'team-keys', (ns) => targetSecrets(kubectl, ns, gce, gh)));
  controller = await startEmulatedRunnerController(install.kubeconfig, install.ns, sshPort, gce, gh);
}, 120_000);

afterAll(async () => {
  await controller?.stop();
  await removeTwoTeams(kubectl, install && { victimNS, tenant, install }, 'runnertargets');
  await victimHost?.stop();
  await gce?.stop();
  await gh?.stop();
});

describe("a tenant's RunnerTarget pointed at another team's runner host", () => {
  it("gets its own key, which the victim's host refuses: its runner config never lands there", async () => {
    await apply(kubectl, runnerTargetManifest('victim', victimNS, spec()));
    const victimConfig = join(await waitFor('the victim host', async () => victimHost?.home, 90_000), JIT_CONFIG_PATH);
    const delivered = await waitFor("the victim's runner config on its host", async () => existsSync(victimConfig) && readFileSync(victimConfig, 'utf8'), 90_000);

    const r = await tenant.kubectl(['apply', '-f', '-'], JSON.stringify(runnerTargetManifest('tenant', undefined, spec())));
    expect(r.code).toBe(0);
    const refused = await waitFor('the tenant host refused over SSH', async () => {
      const events = (await getJSON(kubectl, ['events', '-n', tenant.ns, '--field-selector', 'involvedObject.name=tenant']))?.items ?? [];
      return events.find((e: any) => e.reason === 'HostUnreachable');
    }, 90_000);
    expect(refused.message).toMatch(/could not be reached over SSH/);

    // Each VM admits its own target's key and nothing else; the keys differ and are kept by target UID.
    const [victimUID, tenantUID] = [await uidOf(victimNS, 'victim'), await uidOf(tenant.ns, 'tenant')];
    const victimKeys = sshKeysOf(vmOf('victim')!);
    const tenantKeys = sshKeysOf(vmOf('tenant')!);
    expect(victimKeys).toHaveLength(1);
    expect(tenantKeys).toHaveLength(1);
    expect(victimKeys[0]).toContain(`leasehold-runnertarget-${victimUID}`);
    expect(tenantKeys[0]).toContain(`leasehold-runnertarget-${tenantUID}`);
    expect(tenantKeys[0]!.split(' ')[1]).not.toBe(victimKeys[0]!.split(' ')[1]);
    for (const uid of [victimUID, tenantUID]) expect(await keySecret(uid)).toBeDefined();
    // The victim's host still has the victim's config, and no tenant runner registered.
    expect(readFileSync(victimConfig, 'utf8')).toBe(delivered);
    expect(gh.runners().filter((x) => x.name.startsWith('tenant-'))).toHaveLength(0);
  });

  it("deletes a target's key Secret with the target", async () => {
    const tenantUID = await uidOf(tenant.ns, 'tenant');
    expect((await tenant.kubectl(['delete', 'runnertarget', 'tenant', '--wait=false'])).code).toBe(0);
    await waitFor('the tenant target gone', async () => (await getJSON(kubectl, ['runnertarget', 'tenant', '-n', tenant.ns])) === undefined, 90_000);
    expect(await keySecret(tenantUID)).toBeUndefined();
    expect(await keySecret(await uidOf(victimNS, 'victim'))).toBeDefined();
  });
});
