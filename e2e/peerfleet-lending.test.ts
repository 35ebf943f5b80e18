// PeerFleet lending between two real clusters: ours (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, KWOK playing the kubelet of fake
// GPU nodes) and a peer (etcd, kube-apiserver, kube-controller-manager)
// whose queue is managedBy Jobs, reached with a token that may only read and
// patch them. The controller runs as a process against our cluster, with
// exactly the chart's RBAC (rendered by helm, a TokenRequest token).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ControlPlane } from './cluster/controlplane.js';
import { createFakeNodes } from './cluster/kwok.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { chartIdentity } from './support/helm.js';
import { SERIES_WRITE_MS } from '../src/kube/events.js';
import { apply, json, must, waitFor } from './support/kube.js';
import { fleetManifest, lendingNamespace, optedIn, ourJob as ourJobIn, peerJob, QUEUE, startLendingClusters, type JobOptions, type LendingClusters } from './support/lending.js';

let clusters: LendingClusters;
let ours: ControlPlane;
let peer: ControlPlane;
let controller: ControllerProcess;
/** Every controller process this file ran, for the final check of their logs. */
const runs: ControllerProcess[] = [];
const NS = 'lend';
const POOL = { 'leasehold.dev/pool': 'lendable' };
const CONTROLLER_ARGS = ['--namespace', NS, '--watch-namespace', NS, '--leader-election-namespace', NS];

/**
 * A controller as the chart installs it in `namespace`, watching that
 * namespace: its ServiceAccount and RBAC from helm template, a token for it.
 */
async function lenderAs(namespace: string, args: string[]): Promise<ControllerProcess> {
  const kubeconfig = await chartIdentity({
    kubectl: ours.kubectl.bind(ours),
    release: `lender-${namespace}`,
    namespace,
    set: [`watchNamespace=${namespace}`, `secretNamespaces={${namespace}}`],
    file: join(ours.info.dir, `chart-identity-${namespace}.kubeconfig`),
  });
  const c = await startController(kubeconfig, [...args, '--allowed-peer-origins', peer.info.server]);
  runs.push(c);
  return c;
}

const ourJob = (name: string, namespace: string, runFor: string, gpus = 1, annotations: Record<string, string> = {}) =>
  ourJobIn(name, namespace, POOL, { runFor, gpus, annotations });
const fleet = (name: string, spec: Record<string, unknown> = {}, namespace = NS) =>
  fleetManifest(peer, name, namespace, { lendableNodes: { matchLabels: POOL }, idleWindow: '3s', pollInterval: '5s', ...spec });

const getFleet = (name: string) => json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', name]);
const getPeerJob = (name: string) => json(peer, ['-n', QUEUE, 'get', 'job', name]);

async function events(reason: string): Promise<string[]> {
  const list = await json(ours, ['-n', NS, 'get', 'events', '--field-selector', `reason=${reason}`]);
  return list.items.map((e: { message: string }) => e.message);
}

beforeAll(async () => {
  // A peer that allows privileged pods: what it may ask for, our side must refuse.
  clusters = await startLendingClusters('lender', ['--allow-privileged=true']);
  ({ ours, peer } = clusters);
  await apply(ours, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'work' } });
  await lendingNamespace(clusters, NS);
  await createFakeNodes(ours.kubectl.bind(ours), [
    { name: 'gpu-a', gpus: 2, ...optedIn(NS, POOL) },
    { name: 'gpu-b', gpus: 2, ...optedIn(NS, POOL) },
    { name: 'cpu-only', labels: { 'leasehold.dev/pool': 'other' } },
  ]);
  controller = await lenderAs(NS, CONTROLLER_ARGS);
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

  it('keeps the holder Lease after a session while no other PeerFleet selects the node, and gives it up once one does', async () => {
    const node = String((await getPeerJob('train-1')).metadata.annotations['leasehold.dev/host']).split('/')[1];
    const leaseName = `leasehold-peer-${node}`;
    const holder = async () => {
      const list = await json(ours, ['-n', NS, 'get', 'leases.coordination.k8s.io', '-l', 'leasehold.dev/peer-holder']);
      return list.items.find((l: { metadata: { name: string } }) => l.metadata.name === leaseName)?.spec?.holderIdentity as string | undefined;
    };
    await waitFor(`no session on ${node}`, async () => (await getFleet('gpu')).status?.hosts?.find((h: { node: string }) => h.node === node)?.session === undefined, 60_000);
    // The next session on the node renews this Lease instead of creating one.
    expect(await holder()).toBe(`${NS}/gpu`);
    const start = Date.now();
    await apply(ours, fleet('neighbour'));
    try {
      // Deleted by its holder, not left to expire (an expired Lease stays, 120 s after its last renewal).
      await waitFor(`the Lease on ${node} given up`, async () => (await holder()) !== `${NS}/gpu`, 90_000);
      console.log(`peerfleet lending: a kept holder Lease given up ${Date.now() - start} ms after another PeerFleet selected the node`);
    } finally {
      await must(ours, ['-n', NS, 'delete', 'peerfleet.leasehold.dev', 'neighbour', '--wait=true', '--timeout=120s']);
    }
  });

  it.each<[string, JobOptions, RegExp]>([
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

  it('prices our queued work against the peer: worth more drains, a tie keeps lending, an unreadable value drains and says which annotation to set', async () => {
    await apply(peer, peerJob('fill-a', { gpus: 2, runFor: '20s' }));
    await apply(peer, peerJob('fill-b', { gpus: 2, runFor: '20s' }));
    await waitFor('both nodes lending', async () => (await getFleet('gpu')).status?.hosts?.filter((h: { state: string }) => h.state === 'Lending').length === 2, 120_000);
    const hosts = async () => (await getFleet('gpu')).status.hosts as { node: string; state: string; session?: { drainReason?: string } }[];
    // A tie: our pod waits (the nodes are full), lending goes on.
    await apply(ours, ourJob('tie', 'work', '2s', 1, { 'leasehold.dev/value-per-gpu-hour': '2' }));
    await waitFor('our tie pod pending', async () => (await json(ours, ['-n', 'work', 'get', 'pods', '-l', 'job-name=tie'])).items[0]?.status?.phase === 'Pending', 60_000);
    const drainsBefore = await controller.metric('leasehold_peerfleet_drains_total', { peerfleet: 'gpu' });
    await apply(peer, peerJob('tie-check', { gpus: 1, runFor: '1s' }));
    expect((await hosts()).every((h) => h.state === 'Lending')).toBe(true);
    expect(await controller.metric('leasehold_peerfleet_drains_total', { peerfleet: 'gpu' })).toBe(drainsBefore);
    await must(ours, ['-n', 'work', 'delete', 'job', 'tie', '--wait=true']);
    // Unreadable: drains, and the event names the annotation.
    await apply(ours, ourJob('garbled', 'work', '2s', 1, { 'leasehold.dev/value-per-gpu-hour': 'a lot' }));
    await waitFor('drained for an unreadable value', async () => (await hosts()).some((h) => h.session?.drainReason === 'ValueUnreadable'), 60_000);
    expect((await events('Drain')).join('\n')).toMatch(/leasehold.dev\/value-per-gpu-hour.*"a lot"/);
    await must(ours, ['-n', 'work', 'delete', 'job', 'garbled', '--wait=true']);
    // Worth more: drains; the peer Jobs still finish, then ours runs.
    await apply(ours, ourJob('worth', 'work', '2s', 2, { 'leasehold.dev/value-per-gpu-hour': '3.50' }));
    await waitFor('drained for our work worth more', async () => (await hosts()).some((h) => h.session?.drainReason === 'OurWorkWorthMore'), 60_000);
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/fill-a', 'job/fill-b']);
    await must(ours, ['wait', '-n', 'work', '--for=condition=complete', '--timeout=180s', 'job/worth']);
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/tie-check']);
  });

  it('unlisting the PeerFleet or the node, and maxSessionDuration, drain without cutting the running Job off', async () => {
    const hostOf = async (job: string) => {
      const j = await waitFor(`peer Job ${job} started`, async () => {
        const got = await getPeerJob(job);
        return got.status?.startTime && got.metadata.annotations?.['leasehold.dev/host'] ? got : undefined;
      }, 120_000);
      return String(j.metadata.annotations['leasehold.dev/host']).split('/').pop()!;
    };
    const drainOf = async (node: string, reason: string) => waitFor(`${node} draining for ${reason}`, async () => {
      const h = (await getFleet('gpu')).status.hosts.find((x: { node: string }) => x.node === node);
      return h?.state === 'Draining' && h.session?.drainReason === reason;
    }, 60_000);
    // The whole PeerFleet unlisted.
    await apply(peer, peerJob('unlist-1', { runFor: '10s' }));
    const first = await hostOf('unlist-1');
    await must(ours, ['-n', NS, 'patch', 'peerfleet.leasehold.dev', 'gpu', '--type=merge', '-p', '{"spec":{"listed":false}}']);
    await drainOf(first, 'Unlisted');
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/unlist-1']);
    await waitFor('both nodes Unlisted', async () => (await getFleet('gpu')).status.hosts.every((h: { state: string }) => h.state === 'Unlisted'), 60_000);
    await must(ours, ['-n', NS, 'patch', 'peerfleet.leasehold.dev', 'gpu', '--type=merge', '-p', '{"spec":{"listed":true,"maxSessionDuration":"4s"}}']);
    // One node unlisted by its annotation.
    await apply(peer, peerJob('unlist-2', { runFor: '10s' }));
    const second = await hostOf('unlist-2');
    await must(ours, ['annotate', 'node', second, 'leasehold.dev/lending=off']);
    await drainOf(second, 'NodeUnlisted');
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/unlist-2']);
    await must(ours, ['annotate', 'node', second, 'leasehold.dev/lending-']);
    // A session past maxSessionDuration drains, and its Job runs to the end.
    await apply(peer, peerJob('session-1', { runFor: '12s' }));
    const third = await hostOf('session-1');
    await drainOf(third, 'MaxSessionDuration');
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/session-1']);
    const done = await getPeerJob('session-1');
    expect((Date.parse(done.status.completionTime) - Date.parse(done.status.startTime)) / 1000).toBeGreaterThanOrEqual(12);
    await must(ours, ['-n', NS, 'patch', 'peerfleet.leasehold.dev', 'gpu', '--type=merge', '-p', '{"spec":{"maxSessionDuration":"0s"}}']);
  });

  it('the controller SIGKILLed mid-claim and mid-run: every peer Job runs once and none is lost', async () => {
    const names = Array.from({ length: 6 }, (_, i) => `crash-${i}`);
    for (const n of names) await apply(peer, peerJob(n, { runFor: '6s' }));
    await waitFor('a first claim', async () => {
      for (const n of names) if ((await getPeerJob(n)).metadata.annotations?.['leasehold.dev/claimed-by']) return true;
      return false;
    }, 120_000, 100);
    await controller.stop('SIGKILL');
    controller = await lenderAs(NS, CONTROLLER_ARGS);
    await waitFor('a crash Job running', async () => {
      for (const n of names) if ((await getPeerJob(n)).status?.active) return true;
      return false;
    }, 120_000);
    await controller.stop('SIGKILL');
    controller = await lenderAs(NS, CONTROLLER_ARGS);
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=240s', ...names.map((n) => `job/${n}`)]);
    for (const n of names) {
      const j = await getPeerJob(n);
      expect({ name: n, succeeded: j.status.succeeded, failed: j.status.failed ?? 0 }).toEqual({ name: n, succeeded: 1, failed: 0 });
    }
  });

  it('two lenders race for one peer queue: every Job is claimed and run exactly once', async () => {
    // A second installation (its own namespace, installation ID and nodes) lends to the same queue.
    const NS2 = 'lend2';
    const POOL2 = { 'leasehold.dev/pool': 'lendable2' };
    await lendingNamespace(clusters, NS2);
    await createFakeNodes(ours.kubectl.bind(ours), [{ name: 'gpu-c', gpus: 2, ...optedIn(NS2, POOL2) }, { name: 'gpu-d', gpus: 2, ...optedIn(NS2, POOL2) }]);
    const second = await lenderAs(NS2, ['--namespace', NS2, '--watch-namespace', NS2, '--leader-election-namespace', NS2]);
    try {
      await apply(ours, fleet('rival', { lendableNodes: { matchLabels: POOL2 } }, NS2));
      const allAvailable = async (ns: string, name: string) => {
        const f = await json(ours, ['-n', ns, 'get', 'peerfleet.leasehold.dev', name]);
        return f.status?.hosts?.length === 2 && f.status.hosts.every((h: { state: string }) => h.state === 'Available');
      };
      await waitFor('both lenders Available', async () => (await allAvailable(NS, 'gpu')) && (await allAvailable(NS2, 'rival')), 120_000);
      const claimed = async () => (await controller.metric('leasehold_peerfleet_claims_total', { outcome: 'claimed' })) + (await second.metric('leasehold_peerfleet_claims_total', { outcome: 'claimed' }));
      const before = await claimed();
      const names = Array.from({ length: 8 }, (_, i) => `race-${i}`);
      await must(peer, ['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: names.map((n) => peerJob(n, { runFor: '3s' })) }));
      await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=240s', ...names.map((n) => `job/${n}`)]);
      const lenders = new Set<string>();
      for (const n of names) {
        const j = await getPeerJob(n);
        expect({ name: n, succeeded: j.status.succeeded, failed: j.status.failed ?? 0 }).toEqual({ name: n, succeeded: 1, failed: 0 });
        lenders.add(String(j.metadata.annotations['leasehold.dev/claimed-by']).split('/').slice(0, 2).join('/'));
      }
      expect(await waitFor('every claim counted', async () => (await claimed()) - before === names.length, 30_000)).toBe(true);
      expect([...lenders].every((l) => /\/lend2?\.(gpu|rival)$/.test(l))).toBe(true);
      await must(ours, ['-n', NS2, 'delete', 'peerfleet.leasehold.dev', 'rival', '--wait=true', '--timeout=120s']);
    } finally {
      await second.stop();
    }
  });

  it('the peer gone mid-session: the running mirror finishes, nothing is claimed, and the peer hears of it once back', async () => {
    await apply(peer, peerJob('away', { runFor: '12s' }));
    const running = await waitFor('peer Job away running', async () => {
      const j = await getPeerJob('away');
      return j.status?.startTime && j.metadata.annotations?.['leasehold.dev/host'] ? j : undefined;
    }, 120_000);
    const claims = await controller.metric('leasehold_peerfleet_claims_total', { peerfleet: 'gpu' });
    await peer.stopAPIServer();
    try {
      await waitFor('verdict PeerUnreachable', async () => (await getFleet('gpu')).status?.verdict?.code === 'PeerUnreachable', 120_000);
      await must(ours, ['wait', '-n', NS, '--for=condition=complete', '--timeout=120s', `job/lh-peer-${running.metadata.uid}`]);
      // The finished mirror stays until the peer has its record: it is the record's only source.
      expect((await json(ours, ['-n', NS, 'get', 'job', `lh-peer-${running.metadata.uid}`])).status.succeeded).toBe(1);
    } finally {
      await peer.startAPIServer();
    }
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/away']);
    const done = await getPeerJob('away');
    expect((Date.parse(done.status.completionTime) - Date.parse(done.status.startTime)) / 1000).toBeGreaterThanOrEqual(12);
    expect(await controller.metric('leasehold_peerfleet_claims_total', { peerfleet: 'gpu' })).toBe(claims);
  });

  it('a quiet fleet costs no writes on either side', async () => {
    await waitFor('no mirror left', async () => (await json(ours, ['-n', NS, 'get', 'jobs'])).items.length === 0, 120_000);
    await waitFor('every node Available', async () => (await getFleet('gpu')).status.hosts.every((h: { state: string }) => h.state === 'Available'), 60_000);
    const peerWrites = async () => {
      let sum = 0;
      for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE']) sum += await controller.metric('leasehold_kube_requests_total', { client: 'peer', verb });
      return sum;
    };
    const gets = () => controller.metric('leasehold_kube_requests_total', { client: 'peer', verb: 'GET' });
    const polls = async (n: number) => {
      const from = await gets();
      await waitFor(`${n} more polls of the peer`, async () => (await gets()) >= from + n, 90_000);
    };
    // The last session's end (status, events, the holder Lease) may still be
    // landing, and an event series writes its last count up to
    // SERIES_WRITE_MS after it: start from a fleet settled for longer than that.
    await waitFor('a settled fleet', async () => {
      const before = (await controller.writes()) + (await peerWrites());
      const until = Date.now() + SERIES_WRITE_MS + 5_000;
      await polls(2);
      while (Date.now() < until) await polls(1);
      return (await controller.writes()) + (await peerWrites()) === before;
    }, 150_000);
    const [ourBefore, peerBefore] = [await controller.writes(), await peerWrites()];
    await polls(10);
    expect(await controller.writes()).toBe(ourBefore);
    expect(await peerWrites()).toBe(peerBefore);
  }, 300_000);

  it('deleting the PeerFleet waits for its running mirrors, then goes', async () => {
    await apply(peer, peerJob('last', { runFor: '8s' }));
    await waitFor('peer Job last running', async () => (await getPeerJob('last')).status?.startTime, 120_000);
    // Foreground: were the mirrors owned by the PeerFleet, the garbage collector would delete them now.
    await must(ours, ['-n', NS, 'delete', 'peerfleet.leasehold.dev', 'gpu', '--wait=false', '--cascade=foreground']);
    const f = await getFleet('gpu');
    expect(f.metadata.finalizers).toContain('leasehold.dev/peer-lending');
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=180s', 'job/last']);
    await must(ours, ['-n', NS, 'wait', '--for=delete', '--timeout=120s', 'peerfleet.leasehold.dev/gpu']);
    // The holder Leases it kept between sessions went with it.
    const held = (await json(ours, ['-n', NS, 'get', 'leases.coordination.k8s.io', '-l', 'leasehold.dev/peer-holder'])).items
      .filter((l: { spec?: { holderIdentity?: string } }) => l.spec?.holderIdentity === `${NS}/gpu`);
    expect(held).toEqual([]);
  });

  it("needed no right beyond the chart's RBAC, in any of the controllers this file ran", async () => {
    expect(runs.length).toBeGreaterThanOrEqual(4);
    for (const run of runs) {
      const log = await readFile(run.logFile, 'utf8');
      // A refusal reads "HTTP 403: ... is forbidden" (a bare 403 could be a retry delay in ms).
      // Only our API server's answers judge the chart: the peer's (it is
      // restarted above, and its authorizer briefly refuses while its RBAC
      // cache refills) say nothing of our RBAC.
      const refused = log.split('\n').filter((l) => /forbidden|HTTP 403/i.test(l) && !l.includes('"cluster":"peer:'));
      expect({ log: run.logFile, refused }).toEqual({ log: run.logFile, refused: [] });
    }
  });
});
