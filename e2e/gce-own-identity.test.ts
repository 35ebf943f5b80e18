// A namespace user who may write RunnerTargets (a Role on leasehold.dev "*"
// in their namespace) cannot make the controller call Compute Engine as its
// own identity: with --runner-gce-own-identity off (the default), a
// RunnerTarget without spec.gce.credentialsSecretRef stops with Ready=False,
// reason OwnIdentityDisabled, naming the field and the fix, and the
// controller asks the metadata server for nothing and calls no API, even
// though a metadata server with a usable identity is right there
// (GCE_METADATA_HOST points at the emulator's).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startGceEmulator, type GceEmulator } from './fakes/gce/server.js';
import { startGitHubEmulator, type GitHubEmulator } from './fakes/github/server.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { emulatorEndpointArgs } from './support/runnertarget.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';
import { runnerTargetManifest } from './support/builders.js';

const kubectl = testKubectl();
let gce: GceEmulator;
let gh: GitHubEmulator;
let controller: ControllerProcess;
let ns: string;

const tenant = (args: string[], input?: string) => kubectl(['--as=trudy', '--as-group=runner-tenants', '-n', ns, ...args], input);

beforeAll(async () => {
  gce = await startGceEmulator();
  gh = await startGitHubEmulator();
  ns = await freshNamespace(kubectl, 'gce-identity');
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'runner-owner', namespace: ns },
    rules: [{ apiGroups: ['leasehold.dev'], resources: ['*'], verbs: ['*'] }, { apiGroups: [''], resources: ['secrets', 'events'], verbs: ['get', 'list', 'create'] }],
  }));
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'runner-owner', namespace: ns },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'runner-tenants' }],
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runner-owner' },
  }));
  controller = await startController(process.env.E2E_KUBECONFIG!, ['--no-leader-elect', '--namespace', ns, '--watch-namespace', ns, ...emulatorEndpointArgs(gce, gh)], { GCE_METADATA_HOST: gce.metadataHost });
});

afterAll(async () => {
  await controller?.stop();
  await gce?.stop();
  await gh?.stop();
  if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
});

describe("a tenant's RunnerTarget without Compute Engine credentials", () => {
  it('stops with OwnIdentityDisabled, naming the field and the fix, and the controller never uses its own identity', async () => {
    const secret = await tenant(['create', 'secret', 'generic', 'gh-token', `--from-literal=token=${gh.token}`]);
    expect(secret.code).toBe(0);
    const spec = {
      github: { org: gh.org, repositories: [`${gh.org}/app`], tokenSecretRef: { name: 'gh-token' }, apiURL: gh.url },
      gce: {
        project: gce.project,
        zones: ['us-central1-a'],
        machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }],
        serviceAccount: 'runner-host@leasehold-test.iam.gserviceaccount.com',
        endpoint: gce.url,
      },
      maxHosts: 2,
      dailyBudgetUSD: 10,
      checkInterval: '1h',
    };
    const created = await tenant(['apply', '-f', '-'], JSON.stringify(runnerTargetManifest('borrowed', ns, spec)));
    expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: '' });

    const ready = await waitFor('Ready=False on the RunnerTarget', async () => {
      const t = await getJSON(kubectl, ['runnertarget', 'borrowed', '-n', ns]);
      return (t?.status?.conditions ?? []).find((c: any) => c.type === 'Ready' && c.status === 'False');
    }, 90_000);
    expect(ready).toMatchObject({ reason: 'OwnIdentityDisabled', message: expect.stringContaining('spec.gce.credentialsSecretRef is not set') });
    expect(ready.message).toContain('--runner-gce-own-identity');
    // The tenant reads the same in the events of their own object.
    const seen = await tenant(['get', 'events', '--field-selector', 'involvedObject.name=borrowed', '-o', 'json']);
    expect(seen.code).toBe(0);
    expect(JSON.parse(seen.stdout).items).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'Warning', reason: 'OwnIdentityDisabled' })]));
    // Nothing reached the metadata server or Compute Engine.
    expect(gce.requests).toEqual([]);
  });
});
