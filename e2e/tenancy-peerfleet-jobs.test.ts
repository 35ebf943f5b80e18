// Tenancy, what a peer Job may ask of our node: the team that writes the
// PeerFleet (leasehold.dev "*" in its namespace) also runs the peer, and
// queues Jobs that pick our GPUs by environment, pull from any registry,
// never end, or ask for an identity. Each is refused on the peer Job (the
// Refused marker, never a cut) and gets no mirror; the PeerFleet itself
// cannot poll in a loop, and lends nothing while its namespace lets
// mirrors reach out freely. Chart RBAC and admission policy in force.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ControlPlane } from './cluster/controlplane.js';
import type { ControllerProcess } from './support/controller.js';
import { apply, json, type Kubectl, must, waitFor } from './support/kube.js';
import { defaultDenyEgress, fleetManifest, optedIn, peerJob, QUEUE, type JobOptions, tenantLending } from './support/lending.js';

const NS = 'team-a';
const POOL = { 'leasehold.dev/pool': 'gpu' };
const ALLOWED_REGISTRY = 'registry.invalid';
let ours: ControlPlane;
let peer: ControlPlane;
let tenant: Kubectl;
let controller: ControllerProcess;

const fleet = (spec: Record<string, unknown> = {}) =>
  JSON.stringify(fleetManifest(peer, 'fleet', NS, { lendableNodes: { matchLabels: POOL }, idleWindow: '1s', pollInterval: '5s', maxJobDuration: '1h', ...spec }));
const verdict = (code: string) => waitFor(`PeerFleet verdict ${code}`, async () => {
  const f = await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'fleet']);
  return f.status?.verdict?.code === code ? f : undefined;
}, 90_000, 500);

beforeAll(async () => {
  ({ ours, peer, tenant, controller } = await tenantLending('pfjobs', NS, [{ name: 'gpu-1', gpus: 8, ...optedIn(NS, POOL) }], ['--peer-allowed-registries', ALLOWED_REGISTRY]));
}, 240_000);

afterAll(async () => {
  await controller?.stop();
  await Promise.all([ours?.stop(), peer?.stop()]);
});

describe('a PeerFleet written by a namespace user', () => {
  it('pollInterval 0s is refused at apply, naming the field and the minimum', async () => {
    const r = await tenant(['apply', '-f', '-'], fleet({ pollInterval: '0s' }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/spec.pollInterval: .*pollInterval must be a duration of at least 5s/);
  });

  it('lends nothing while the namespace has no NetworkPolicy denying egress by default, and lends once it has', async () => {
    await must(ours, ['-n', NS, 'delete', 'networkpolicy', 'default-deny-egress']);
    expect((await tenant(['apply', '-f', '-'], fleet())).code).toBe(0);
    const f = await verdict('EgressNotDenied');
    expect(f.status.conditions.find((c: { type: string }) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'EgressNotDenied' });
    expect(f.status.verdict.reasons.join('')).toMatch(/namespace team-a has no NetworkPolicy that denies the egress of mirror Jobs by default/);
    await apply(ours, defaultDenyEgress(NS));
    await verdict('Ready');
  });
});

describe('peer Jobs that ask too much', () => {
  const image = `${ALLOWED_REGISTRY}/c:1`;
  const cases: Array<[string, string, JobOptions, RegExp]> = [
    ['nvidia-all', 'NVIDIA_VISIBLE_DEVICES=all', { container: { image, env: [{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' }] } }, /env\[0\] sets NVIDIA_VISIBLE_DEVICES/],
    ['cuda-pick', 'CUDA_VISIBLE_DEVICES', { container: { image, env: [{ name: 'CUDA_VISIBLE_DEVICES', value: '0,1,2,3' }] } }, /sets CUDA_VISIBLE_DEVICES/],
    ['driver-caps', 'NVIDIA_DRIVER_CAPABILITIES', { container: { image, env: [{ name: 'NVIDIA_DRIVER_CAPABILITIES', value: 'all' }] } }, /sets NVIDIA_DRIVER_CAPABILITIES/],
    ['other-registry', 'an image from an unlisted registry', { container: { image: 'docker.io/attacker/miner:1' } }, /image docker.io\/attacker\/miner:1 is not from a registry the lender allows \(registry.invalid\)/],
    ['no-deadline', 'no activeDeadlineSeconds', { jobSpec: { activeDeadlineSeconds: undefined } }, /spec.activeDeadlineSeconds is unset: a lent Job must end on its own; set it to at most 3600/],
    ['long-deadline', 'a deadline past maxJobDuration', { jobSpec: { activeDeadlineSeconds: 7200 } }, /activeDeadlineSeconds is 7200, above the lender's maxJobDuration of 3600s/],
    ['identity', 'a ServiceAccount', { pod: { serviceAccountName: 'default' } }, /serviceAccountName is default: a lent Job runs with no identity of ours/],
    ['token', 'a mounted token', { pod: { automountServiceAccountToken: true } }, /automountServiceAccountToken is true/],
  ];

  it.each(cases)('%s (%s) is refused on the peer Job, never claimed, never mirrored', async (name, _what, opts, why) => {
    await apply(peer, peerJob(name, { container: { image }, ...opts }));
    const job = await waitFor(`peer Job ${name} refused`, async () => {
      const got = await json(peer, ['-n', QUEUE, 'get', 'job', name]);
      return got.metadata.annotations?.['leasehold.dev/refused'] ? got : undefined;
    }, 90_000, 500);
    expect(job.metadata.annotations['leasehold.dev/refused']).toMatch(why);
    expect(job.metadata.annotations['leasehold.dev/claimed-by']).toBeUndefined();
    // Refused as it was asked: the peer's Job is not rewritten.
    expect(job.spec.template.spec.containers[0].image).toBe(opts.container?.image ?? image);
    const mirrors = (await json(ours, ['-n', NS, 'get', 'jobs'])).items;
    expect(mirrors.filter((m: any) => m.metadata.labels['leasehold.dev/peer-job-uid'] === job.metadata.uid)).toEqual([]);
  });

  it('a Job within every bound still runs (the bounds refuse only what they name)', async () => {
    await apply(peer, peerJob('fine', { container: { image }, runFor: '3s' }));
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=120s', 'job/fine']);
  });
});
