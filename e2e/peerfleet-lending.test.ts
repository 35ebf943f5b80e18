// PeerFleet lending between two real clusters: ours (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, KWOK playing the kubelet of fake
// GPU nodes) and a peer (etcd, kube-apiserver, kube-controller-manager)
// whose queue is managedBy Jobs, reached with a token that may only read and
// patch them. The controller runs as a process against our cluster.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ControlPlane } from './cluster/controlplane.js';
import { createFakeNodes, KWOK_RUN_FOR_ENV } from './cluster/kwok.js';
import { createPeerCredential, type PeerCredential } from './cluster/peer.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { waitFor } from './support/kube.js';

let ours: ControlPlane;
let peer: ControlPlane;
let lender: PeerCredential;
let controller: ControllerProcess;
const NS = 'lend';
const QUEUE = 'queue';
const POOL = { 'leasehold.dev/pool': 'lendable' };

async function must(cp: ControlPlane, args: string[], input?: string): Promise<string> {
  const res = await cp.kubectl(args, input);
  if (res.code !== 0) throw new Error(`kubectl ${args.join(' ')} on ${cp.info.clusterName}: ${res.stderr}${res.stdout}`);
  return res.stdout;
}
const json = async (cp: ControlPlane, args: string[]) => JSON.parse(await must(cp, [...args, '-o', 'json']));
const apply = (cp: ControlPlane, obj: unknown) => must(cp, ['apply', '-f', '-'], JSON.stringify(obj));

interface PeerJobOptions {
  gpus?: number;
  runFor?: string;
  /** Extra pod spec fields (to make a template unsafe). */
  pod?: Record<string, unknown>;
  container?: Record<string, unknown>;
}

/** A lendable Job in the peer queue, left to us by spec.managedBy. */
function peerJob(name: string, opts: PeerJobOptions = {}) {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: QUEUE, labels: { 'leasehold.dev/lendable': 'true' } },
    spec: {
      managedBy: 'leasehold.dev/peer-lending',
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{
            name: 'train',
            image: 'registry.invalid/train:1',
            env: [{ name: KWOK_RUN_FOR_ENV, value: opts.runFor ?? '4s' }],
            resources: { limits: { 'nvidia.com/gpu': String(opts.gpus ?? 1) } },
            ...opts.container,
          }],
          ...opts.pod,
        },
      },
    },
  };
}

/** Our own GPU work: a Job in our cluster that the scheduler may put on a lendable node. */
function ourJob(name: string, namespace: string, runFor: string, gpus = 1, annotations: Record<string, string> = {}) {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { annotations },
        spec: {
          restartPolicy: 'Never',
          nodeSelector: POOL,
          containers: [{ name: 'ours', image: 'registry.invalid/ours:1', env: [{ name: KWOK_RUN_FOR_ENV, value: runFor }], resources: { limits: { 'nvidia.com/gpu': String(gpus) } } }],
        },
      },
    },
  };
}

function fleet(name: string, spec: Record<string, unknown> = {}) {
  return {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'PeerFleet',
    metadata: { name, namespace: NS },
    spec: {
      origin: peer.info.server,
      namespace: QUEUE,
      credentialSecretRef: { name: 'peer-token' },
      caSecretRef: { name: 'peer-ca' },
      lendableNodes: { matchLabels: POOL },
      pricePerGPUHour: 2,
      idleWindow: '3s',
      pollInterval: '2s',
      ...spec,
    },
  };
}

const getFleet = (name: string) => json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', name]);
const getPeerJob = (name: string) => json(peer, ['-n', QUEUE, 'get', 'job', name]);

async function events(reason: string): Promise<string[]> {
  const list = await json(ours, ['-n', NS, 'get', 'events', '--field-selector', `reason=${reason}`]);
  return list.items.map((e: { message: string }) => e.message);
}

beforeAll(async () => {
  [ours, peer] = await Promise.all([
    ControlPlane.start({ name: 'lender', controllers: true, scheduler: true, kwok: true }),
    // A peer that allows privileged pods: what it may ask for, our side must refuse.
    ControlPlane.start({ name: 'peer', controllers: true, apiServerArgs: ['--allow-privileged=true'] }),
  ]);
  await must(ours, ['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
  await must(ours, ['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  lender = await createPeerCredential(peer, { namespace: QUEUE });
  await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } });
  await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'work' } });
  await apply(ours, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-token', namespace: NS }, stringData: { token: lender.token } });
  await apply(ours, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'peer-ca', namespace: NS }, stringData: { 'ca.crt': await readFile(join(peer.info.dir, 'pki', 'ca.crt'), 'utf8') } });
  await createFakeNodes(ours.kubectl.bind(ours), [
    { name: 'gpu-a', gpus: 2, labels: POOL },
    { name: 'gpu-b', gpus: 2, labels: POOL },
    { name: 'cpu-only', labels: { 'leasehold.dev/pool': 'other' } },
  ]);
  controller = await startController(ours.info.kubeconfig, ['--namespace', 'default', '--leader-election-namespace', 'default']);
}, 400_000);

afterAll(async () => {
  await controller?.stop();
  await Promise.all([ours?.stop(), peer?.stop()]);
});

describe('PeerFleet lending', () => {
  it('a dry run plans claims for idle nodes and claims nothing', async () => {
    await apply(peer, peerJob('dry-1'));
    await apply(ours, fleet('dry', { dryRun: true }));
    const f = await waitFor('a dry-run plan with a Claim', async () => {
      const got = await getFleet('dry');
      return got.status?.plan?.some((p: { action: string }) => p.action === 'Claim') ? got : undefined;
    }, 120_000);
    expect(f.status.plan.map((p: { node: string }) => p.node).sort()).toEqual(['gpu-a', 'gpu-b']);
    expect(f.status.plan.find((p: { action: string }) => p.action === 'Claim')).toMatchObject({ job: 'dry-1' });
    expect((await getPeerJob('dry-1')).metadata.annotations?.['leasehold.dev/claimed-by']).toBeUndefined();
    expect((await json(ours, ['-n', NS, 'get', 'jobs'])).items).toHaveLength(0);
    await must(ours, ['-n', NS, 'delete', 'peerfleet.leasehold.dev', 'dry', '--wait=true', '--timeout=60s']);
    await must(peer, ['-n', QUEUE, 'delete', 'job', 'dry-1']);
  });

  it('runs a peer Job on an idle node; the peer sees it Complete with the host, exit code and an accounting to the second', async () => {
    await apply(ours, fleet('gpu'));
    await must(ours, ['wait', '-n', NS, '--for=condition=Ready', '--timeout=120s', 'peerfleet.leasehold.dev/gpu']);
    await apply(peer, peerJob('train-1', { runFor: '5s' }));
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/train-1']);
    const job = await getPeerJob('train-1');
    const annotations = job.metadata.annotations;
    expect(annotations['leasehold.dev/claimed-by']).toMatch(/^[a-z0-9]+\/lend\.gpu\/gpu-[ab]$/);
    expect(annotations['leasehold.dev/host']).toMatch(/^[a-z0-9]+\/gpu-[ab]$/);
    await waitFor('the exit code on the peer Job', async () => (await getPeerJob('train-1')).metadata.annotations['leasehold.dev/exit-code'] === '0', 60_000);
    expect(job.status.succeeded).toBe(1);
    const seconds = (Date.parse(job.status.completionTime) - Date.parse(job.status.startTime)) / 1000;
    expect(seconds).toBeGreaterThanOrEqual(5);
    const f = await waitFor('accounting of train-1', async () => {
      const got = await getFleet('gpu');
      return got.status?.accounting?.jobs === 1 ? got : undefined;
    }, 60_000);
    expect(f.status.accounting.gpuSeconds).toBe(seconds);
    expect(f.status.accounting.amountUSD).toBeCloseTo((seconds * 2) / 3600, 6);
    // The mirror goes once the peer has its whole record.
    await waitFor('the finished mirror deleted', async () => (await json(ours, ['-n', NS, 'get', 'jobs'])).items.length === 0, 60_000);
    expect((await events('Claimed')).join('\n')).toMatch(/claims peer Job train-1/);
    expect(await controller.metric('leasehold_peerfleet_claims_total', { peerfleet: 'gpu', outcome: 'claimed' })).toBeGreaterThanOrEqual(1);
  });

  it.each<[string, PeerJobOptions, RegExp]>([
    ['a hostPath volume', { pod: { volumes: [{ name: 'root', hostPath: { path: '/' } }] } }, /hostPath volume/],
    ['env from one of our Secrets', { container: { env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 'peer-token', key: 'token' } } }] } }, /secret/i],
    ['a privileged container', { container: { securityContext: { privileged: true } } }, /privileged/],
    ['the host network', { pod: { hostNetwork: true } }, /hostNetwork/],
    ['an added capability', { container: { securityContext: { capabilities: { add: ['NET_ADMIN'] } } } }, /capabilities.add is NET_ADMIN/],
  ])('refuses a peer Job with %s, on the peer Job and in an event, and never claims it', async (_what, opts, why) => {
    const name = `unsafe-${Math.random().toString(36).slice(2, 8)}`;
    await apply(peer, peerJob(name, opts));
    const job = await waitFor(`peer Job ${name} refused`, async () => {
      const got = await getPeerJob(name);
      return got.metadata.annotations?.['leasehold.dev/refused'] ? got : undefined;
    }, 120_000);
    expect(job.metadata.annotations['leasehold.dev/refused']).toMatch(why);
    expect(job.metadata.annotations['leasehold.dev/claimed-by']).toBeUndefined();
    expect((await events('Refused')).join('\n')).toContain(name);
  });

  it('our Job arriving during a peer Job drains the node: no new claim there, the peer Job completes, then ours runs', async () => {
    // Both nodes lend a long peer Job; a third Job waits in the peer queue for room.
    await apply(peer, peerJob('long-a', { gpus: 2, runFor: '25s' }));
    await apply(peer, peerJob('long-b', { gpus: 2, runFor: '25s' }));
    await waitFor('both nodes lending', async () => {
      const f = await getFleet('gpu');
      return f.status?.hosts?.filter((h: { state: string }) => h.state === 'Lending').length === 2;
    }, 120_000);
    await apply(peer, peerJob('after', { gpus: 1, runFor: '2s' }));
    await apply(ours, ourJob('ours', 'work', '3s', 2));
    const f = await waitFor('a node draining for our work', async () => {
      const got = await getFleet('gpu');
      return got.status?.hosts?.some((h: { state: string }) => h.state === 'Draining') ? got : undefined;
    }, 120_000);
    const draining = f.status.hosts.find((h: { state: string }) => h.state === 'Draining');
    expect(draining.session.drainReason).toMatch(/OurWork/);
    // The peer Jobs that ran when our work came were never cut off.
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/long-a', 'job/long-b']);
    await must(ours, ['wait', '-n', 'work', '--for=condition=complete', '--timeout=180s', 'job/ours']);
    // Our Job ran on a node after its peer Job ended there.
    const ourPod = (await json(ours, ['-n', 'work', 'get', 'pods', '-l', 'job-name=ours'])).items[0];
    const peerOnNode = [await getPeerJob('long-a'), await getPeerJob('long-b')].find((j) => j.metadata.annotations['leasehold.dev/host'].endsWith(`/${ourPod.spec.nodeName}`));
    expect(Date.parse(ourPod.status.startTime)).toBeGreaterThanOrEqual(Date.parse(peerOnNode.status.completionTime) - 1000);
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/after']);
    expect((await events('Drain')).join('\n')).toMatch(/our (pending )?pod/);
    expect(await controller.metric('leasehold_peerfleet_drains_total', { peerfleet: 'gpu' })).toBeGreaterThanOrEqual(1);
  });

  it('every peer Job ran once, and the accounting equals the sum of the peer records', async () => {
    const jobs = (await json(peer, ['-n', QUEUE, 'get', 'jobs'])).items.filter((j: any) => j.metadata.annotations?.['leasehold.dev/claimed-by']?.includes('/lend.gpu/'));
    let sum = 0;
    for (const j of jobs) {
      expect(j.status.succeeded).toBe(1);
      expect(j.status.failed ?? 0).toBe(0);
      sum += ((Date.parse(j.status.completionTime) - Date.parse(j.status.startTime)) / 1000) * Number(j.spec.template.spec.containers[0].resources.limits['nvidia.com/gpu']);
    }
    const f = await waitFor('accounting of every Job', async () => {
      const got = await getFleet('gpu');
      return got.status?.accounting?.jobs === jobs.length ? got : undefined;
    }, 60_000);
    expect(f.status.accounting.gpuSeconds).toBe(sum);
  });

  it('deleting the PeerFleet waits for its running mirrors, then goes', async () => {
    await apply(peer, peerJob('last', { runFor: '8s' }));
    await waitFor('peer Job last running', async () => (await getPeerJob('last')).status?.startTime, 120_000);
    await must(ours, ['-n', NS, 'delete', 'peerfleet.leasehold.dev', 'gpu', '--wait=false']);
    const f = await getFleet('gpu');
    expect(f.metadata.finalizers).toContain('leasehold.dev/peer-lending');
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/last']);
    await must(ours, ['-n', NS, 'wait', '--for=delete', '--timeout=120s', 'peerfleet.leasehold.dev/gpu']);
  });
});
