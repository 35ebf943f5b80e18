// Finding 6 of the tenancy review: a namespace user with leasehold.dev "*"
// in their own namespace copies another team's gce.namePrefix into their own
// RunnerTarget on the same GitHub org. The victim's runner is then named like
// one of the tenant's pool, with no VM there: a ghost to clean up, were runners
// told apart by name. Runners carry their target's UID and installation as
// labels, and every cleanup path starts from the runners carrying both, so
// the tenant's checks leave the victim's runner alone. The controller runs
// cluster-wide with the chart's own RBAC and admission policy.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JIT_CONFIG_PATH } from '../controllers/runnertarget/checkrun/deliver.js';
import { sshKeysOf, startGceEmulator, type GceEmulator } from './fakes/gce/server.js';
import { startGitHubEmulator, type GitHubEmulator } from './fakes/github/server.js';
import { freePort, SshdMachine } from './fakes/lambda/machine.js';
import type { ControllerProcess } from './support/controller.js';
import { apply, getJSON, testKubectl, waitFor } from './support/kube.js';
import { condition, startEmulatedRunnerController, targetSecrets, targetSpec } from './support/runnertarget.js';
import { removeTwoTeams, twoTeams, type ChartInstall, type Tenant } from './support/tenancy.js';
import { runnerTargetManifest } from './support/builders.js';

const kubectl = testKubectl();
let gce: GceEmulator;
let gh: GitHubEmulator;
let tenant: Tenant;
let victimNS: string;
let install: ChartInstall;
let controller: ControllerProcess;
let root: string;
const machines: SshdMachine[] = [];

const PREFIX = 'shared';
const spec = (repo: string, over: Record<string, unknown>) => {
  const base = targetSpec(gce, gh, repo, over) as any;
  return { ...base, gce: { ...base.gce, namePrefix: PREFIX } };
};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rt-runners-'));
  const sshPort = await freePort();
  gce = await startGceEmulator({
    onInstanceRunning: async (i) => {
      const m = await SshdMachine.create({ dir: join(root, i.name), address: i.address, port: sshPort, authorizedKeys: sshKeysOf(i), hostKeys: [], comment: `gce-${i.name}` });
      await m.start();
      machines.push(m);
      return { hostKeys: m.hostKeys, sshPort };
    },
  });
  gh = await startGitHubEmulator();
  // The victim's repository has a job waiting; the tenant's has one its runners could never take.
  gh.queueRun('victim-app', [{ labels: ['self-hosted', 'linux'] }]);
  gh.queueRun('tenant-app', [{ labels: ['self-hosted', 'no-such-label'] }]);
  ({ victimNS, tenant, install } = await twoTeams(kubectl, 'rt-runners', 'team-runners', (ns) => targetSecrets(kubectl, ns, gce, gh)));
  controller = await startEmulatedRunnerController(install.kubeconfig, install.ns, sshPort, gce, gh);
}, 120_000);

afterAll(async () => {
  await controller?.stop();
  await removeTwoTeams(kubectl, install && { victimNS, tenant, install }, 'runnertargets');
  await Promise.all(machines.map((m) => m.stop()));
  await gce?.stop();
  await gh?.stop();
});

describe("a tenant's RunnerTarget with the victim's gce.namePrefix", () => {
  it("cannot claim the owner labels: kubectl apply refuses a label starting with leasehold-", async () => {
    const r = await tenant.kubectl(['apply', '-f', '-'], JSON.stringify(runnerTargetManifest('claimer', undefined, spec('tenant-app', { github: { ...(targetSpec(gce, gh, 'tenant-app') as any).github, labels: ['leasehold-target-0000'] } }))));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('labels must not start with leasehold-');
  });

  it("never removes the victim's runner", async () => {
    await apply(kubectl, runnerTargetManifest('victim', victimNS, spec('victim-app', { floor: 1, maxHosts: 1 })));
    // The victim's host runs its runner from the config the controller delivered, as the image would.
    const config = await waitFor("the victim's runner config", async () => {
      const file = machines[0] && join(machines[0].home, JIT_CONFIG_PATH);
      return file && existsSync(file) && readFileSync(file, 'utf8');
    }, 90_000);
    const runner = gh.startRunner(config);
    expect(runner.name.startsWith(`${PREFIX}-`)).toBe(true);
    await waitFor("the victim's runner online", async () => gh.runners().some((r) => r.name === runner.name && r.status === 'online'), 30_000);
    // Quiet the victim's pool so only the tenant's checks run from here on.
    await kubectl(['patch', 'runnertarget', 'victim', '-n', victimNS, '--type=merge', '-p', '{"spec":{"checkInterval":"1h"}}']);

    const r = await tenant.kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'RunnerTarget', metadata: { name: 'copycat' }, spec: spec('tenant-app', { floor: 0, maxHosts: 1, checkInterval: '30s' }) }));
    expect(r.code).toBe(0);
    // Several of the tenant's checks complete (one every 3 s here).
    const first = await waitFor("the tenant's first check", async () => {
      const t = await getJSON(kubectl, ['runnertarget', 'copycat', '-n', tenant.ns]);
      return condition(t, 'Ready')?.reason === 'CheckCompleted' && t.status.lastCheckAt;
    }, 90_000);
    await waitFor("three more of the tenant's checks", async () => {
      const t = await getJSON(kubectl, ['runnertarget', 'copycat', '-n', tenant.ns]);
      return Date.parse(t.status.lastCheckAt) >= Date.parse(first) + 6_000 && condition(t, 'Ready')?.reason === 'CheckCompleted';
    }, 90_000);
    expect(gh.runners().map((x) => x.name)).toContain(runner.name);
    const events = (await getJSON(kubectl, ['events', '-n', tenant.ns, '--field-selector', 'involvedObject.name=copycat']))?.items ?? [];
    expect(events.filter((e: any) => /remov|ghost|orphan/i.test(`${e.reason} ${e.message}`))).toEqual([]);
  });
});
