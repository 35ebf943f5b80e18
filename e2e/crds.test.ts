// The generated CRDs against the real API server: they install, kubectl
// explains them, and admission refuses malformed objects naming the field.
import { describe, it, expect, beforeAll } from '@jest/globals';
import { freshNamespace, testKubectl } from './support/kube.js';

const kubectl = testKubectl();
let ns: string;

beforeAll(async () => {
  ns = await freshNamespace(kubectl, 'crds');
});

const lease = (spec: string) => `apiVersion: leasehold.dev/v1alpha1
kind: Lease
metadata: {name: bad, namespace: NS}
spec: ${spec}
`;

async function refused(manifest: string): Promise<string> {
  const r = await kubectl(['apply', '-f', '-'], manifest.replace('NS', ns));
  expect(r.code).not.toBe(0);
  return r.stderr;
}

describe('CRDs', () => {
  it('are served with the category, short names and printer columns', async () => {
    const r = await kubectl(['api-resources', '--api-group', 'leasehold.dev', '-o', 'wide']);
    expect(r.code).toBe(0);
    for (const kind of ['Lease', 'Offer', 'PeerFleet', 'RunnerTarget']) expect(r.stdout).toContain(kind);
    expect(r.stdout).toContain('leasehold');
    const good = await kubectl(['apply', '-f', '-'], lease('{where: "gpu=h100,gpus>=2"}').replace('bad', 'good').replace('NS', ns));
    expect(good.stderr).toBe('');
    const get = await kubectl(['-n', ns, 'get', 'leases.leasehold.dev']);
    expect(get.stdout.split('\n')[0]).toMatch(/NAME\s+PHASE\s+WHERE\s+OFFER\s+PRICE\/H\s+HOST\s+BUSY\s+ENDED\s+AGE/);
    const wide = await kubectl(['-n', ns, 'get', 'leases.leasehold.dev', '-o', 'wide']);
    expect(wide.stdout.split('\n')[0]).toMatch(/INSTANCE-TYPE\s+REGION\s+EXPIRES/);
    const category = await kubectl(['-n', ns, 'get', 'leasehold']);
    expect(category.stdout).toMatch(/lease\.leasehold\.dev\/good/);
  });

  it('kubectl explain shows field descriptions', async () => {
    const r = await kubectl(['explain', 'leases.leasehold.dev.spec.where']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/DESCRIPTION:/);
    expect(r.stdout).toMatch(/gpu/);
  });

  it('refuses a malformed where, naming the field', async () => {
    expect(await refused(lease('{where: "gpu==h100;rm -rf /"}'))).toMatch(/spec\.where/);
  });

  it('refuses "*" for a Lease', async () => {
    expect(await refused(lease('{where: "*"}'))).toMatch(/spec\.where/);
  });

  it('refuses more than 16 sshKeys', async () => {
    const keys = Array.from({ length: 17 }, (_, i) => `"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE${String(i).padStart(2, '0')}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx dev${i}"`);
    expect(await refused(lease(`{where: "gpu", sshKeys: [${keys.join(',')}]}`))).toMatch(/spec\.sshKeys/);
  });

  it('refuses negative durations and unknown enum values on an Offer', async () => {
    const offer = (extra: string, shape = '{os: linux, arch: amd64, cpus: 4}') => `apiVersion: leasehold.dev/v1alpha1
kind: Offer
metadata: {name: bad-offer}
spec:
  command: {acquire: ["/bin/true"], release: ["/bin/true"], shape: ${shape}}
  ${extra}
`;
    expect(await refused(offer('idleTimeout: "-5m"'))).toMatch(/spec\.idleTimeout/);
    expect(await refused(offer('maxLifetime: "forever"'))).toMatch(/spec\.maxLifetime/);
    expect(await refused(offer('pricePerHour: 1', '{os: plan9, arch: amd64, cpus: 4}'))).toMatch(/spec\.command\.shape\.os/);
    expect(await refused(offer('pricePerHour: -1'))).toMatch(/spec\.pricePerHour/);
  });

  it('refuses a price on a Lambda Offer, whose instance types are priced by the listing', async () => {
    const lambda = `apiVersion: leasehold.dev/v1alpha1
kind: Offer
metadata: {name: bad-lambda-offer}
spec:
  lambda: {apiKeySecretRef: {name: k, namespace: default}}
  pricePerHour: 0.5
`;
    expect(await refused(lambda)).toMatch(/spec\.pricePerHour.*remove spec\.pricePerHour/);
  });

  it('plain "kubectl get leases" resolves to coordination.k8s.io, as the README says', async () => {
    const plain = await kubectl(['get', 'leases', '-A']);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/HOLDER/);
    expect(plain.stdout).not.toMatch(/PHASE/);
    const ours = await kubectl(['get', 'leases.leasehold.dev', '-A']);
    expect(ours.stdout).toMatch(/PHASE/);
  });

  const runnerTarget = (name: string, gce: string) => `apiVersion: leasehold.dev/v1alpha1
kind: RunnerTarget
metadata: {name: ${name}, namespace: NS}
spec:
  github: {org: swack-tools, repositories: [swack-tools/oxidex], tokenSecretRef: {name: gh}}
  gce:
    project: my-project
    zones: [us-central1-a]
    serviceAccount: spot-runner-host@my-project.iam.gserviceaccount.com
    ${gce}
  maxHosts: 5
  dailyBudgetUSD: 10
`;

  it('serves RunnerTarget columns and refuses fallbackToStandard without standard prices, naming the field', async () => {
    const good = await kubectl(['apply', '-f', '-'], runnerTarget('pool', 'machineTypeTiers: [{machineType: n2d-standard-16, pricePerHour: 0.14}]').replace('NS', ns));
    expect(good.stderr).toBe('');
    const get = await kubectl(['-n', ns, 'get', 'runnertargets.leasehold.dev']);
    expect(get.stdout.split('\n')[0]).toMatch(/NAME\s+ORG\s+HOSTS\s+BUSY\s+QUEUED\s+SPEND\s+BUDGET\s+LAST-CHECK\s+AGE/);
    const noStandard = runnerTarget('bad-pool', 'fallbackToStandard: true\n    machineTypeTiers: [{machineType: n2d-standard-16, pricePerHour: 0.14}]');
    expect(await refused(noStandard)).toMatch(/spec\.gce\.fallbackToStandard.*standardPricePerHour/);
    expect(await refused(runnerTarget('bad-pool', 'machineTypeTiers: [{machineType: n2d-standard-16}]'))).toMatch(/pricePerHour/);
  });
});
