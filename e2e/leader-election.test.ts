// Two controller replicas against one API server: exactly one leads; when
// the leader is killed with SIGKILL the other takes over and reconciles
// within 20 s.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { freePort } from './cluster/controlplane.js';
import { leaseManifest } from './support/builders.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor } from './support/kube.js';

const kubectl = testKubectl();
let ns: string;
let replicas: ControllerProcess[] = [];

const leaderFlags = (p: ControllerProcess) => p.metric('leasehold_leader');

beforeAll(async () => {
  ns = await freshNamespace(kubectl, 'leader');
  const flags = ['--watch-namespace', ns, '--leader-election-namespace', ns];
  replicas = await Promise.all([startController(process.env.E2E_KUBECONFIG!, flags), startController(process.env.E2E_KUBECONFIG!, flags)]);
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
});

describe('leader election', () => {
  it('elects exactly one leader and fails over within 20 s of a SIGKILL', async () => {
    await waitFor('one leader', async () => (await leaderFlags(replicas[0]!)) + (await leaderFlags(replicas[1]!)) === 1);
    // Hold the state a few retry periods: still exactly one.
    await new Promise((r) => setTimeout(r, 5000));
    const flags = [await leaderFlags(replicas[0]!), await leaderFlags(replicas[1]!)];
    expect(flags.sort()).toEqual([0, 1]);

    const leaderIndex = (await leaderFlags(replicas[0]!)) === 1 ? 0 : 1;
    const leader = replicas[leaderIndex]!;
    const follower = replicas[1 - leaderIndex]!;
    const lease = await getJSON(kubectl, ['-n', ns, 'leases.coordination.k8s.io', 'leasehold-controller']);
    expect(lease.spec.holderIdentity).toBeTruthy();

    // The follower only watches; it must not reconcile while it follows.
    await apply(kubectl, leaseManifest('before-failover', ns, { where: 'gpu=a100' }));
    await waitFor('leader reconciles', async () => (await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', 'before-failover']))?.status?.phase);
    expect(await follower.metric('leasehold_reconcile_total')).toBe(0);

    const killedAt = Date.now();
    await leader.stop('SIGKILL');
    await apply(kubectl, leaseManifest('after-failover', ns, { where: 'gpu=a100' }));
    await waitFor('new leader reconciles', async () => (await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', 'after-failover']))?.status?.phase === 'Pending', 25_000, 100);
    const tookMs = Date.now() - killedAt;
    process.stdout.write(`failover: leader killed, new leader reconciled after ${tookMs} ms\n`);
    expect(tookMs).toBeLessThan(20_000);
    expect(await follower.metric('leasehold_leader')).toBe(1);
    const after = await getJSON(kubectl, ['-n', ns, 'leases.coordination.k8s.io', 'leasehold-controller']);
    expect(after.spec.holderIdentity).not.toBe(lease.spec.holderIdentity);
  }, 90_000);

  it('hands the lease over at once on SIGTERM', async () => {
    const current = replicas.find((r) => r.child.exitCode === null && r.child.signalCode === null)!;
    const standby = await startController(process.env.E2E_KUBECONFIG!, ['--watch-namespace', ns, '--leader-election-namespace', ns]);
    replicas.push(standby);
    await new Promise((r) => setTimeout(r, 3000));
    expect(await standby.metric('leasehold_leader')).toBe(0);
    const stoppedAt = Date.now();
    await current.stop('SIGTERM');
    await waitFor('standby leads', async () => (await standby.metric('leasehold_leader')) === 1, 10_000, 100);
    const tookMs = Date.now() - stoppedAt;
    process.stdout.write(`graceful handover took ${tookMs} ms\n`);
    // Far below the 15 s lease duration: the old leader released the lease.
    expect(tookMs).toBeLessThan(6000);
  }, 60_000);

  it("labels the leader's own pod, and moves the label on hand-over", async () => {
    // Pod objects only (nothing needs to run): the controllers are told they are these pods.
    const own = await freshNamespace(kubectl, 'leader-pod');
    for (const name of ['replica-a', 'replica-b']) {
      await apply(kubectl, { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: own }, spec: { containers: [{ name: 'c', image: 'leasehold:unused' }] } });
    }
    const start = async (pod: string) => startController(process.env.E2E_KUBECONFIG!,
      ['--watch-namespace', own, '--leader-election-namespace', own, '--github-webhook-port', String(await freePort())],
      { POD_NAME: pod, POD_NAMESPACE: own });
    const pair = [await start('replica-a'), await start('replica-b')];
    replicas.push(...pair);
    const labelled = async () => {
      const pods = await getJSON(kubectl, ['-n', own, 'pods']);
      return (pods?.items ?? []).filter((p: any) => p.metadata.labels?.['leasehold.dev/leader'] === 'true').map((p: any) => p.metadata.name as string);
    };
    const leaderPod = async () => ((await pair[0]!.metric('leasehold_leader')) === 1 ? 'replica-a' : (await pair[1]!.metric('leasehold_leader')) === 1 ? 'replica-b' : undefined);
    await waitFor("the leader's pod labelled", async () => {
      const leader = await leaderPod();
      const marked = await labelled();
      return leader !== undefined && marked.length === 1 && marked[0] === leader;
    }, 30_000, 200);

    const leading = (await leaderPod())!;
    const other = leading === 'replica-a' ? 'replica-b' : 'replica-a';
    await pair[leading === 'replica-a' ? 0 : 1]!.stop('SIGTERM');
    await waitFor('the label moved to the new leader', async () => {
      const marked = await labelled();
      return marked.length === 1 && marked[0] === other;
    }, 30_000, 200);
  }, 90_000);
});
