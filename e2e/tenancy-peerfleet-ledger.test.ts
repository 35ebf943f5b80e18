// Tenancy, the peer's records: accounting reads the peer's Job records, and
// whoever runs the peer may edit or delete them after our node ran the Job.
// Our PeerFleet keeps its own ledger from the mirror Jobs (what our cluster
// saw run), shows it beside the peer's numbers, and flags a peer Job whose
// record is gone or differs. A mirror that completes while the controller is
// down is recorded once it is back, and only once; the ledger lives in the
// PeerFleet's status, which the chart's admission policy keeps the namespace
// user from writing. Chart RBAC and admission policy in force.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ControlPlane } from './cluster/controlplane.js';
import type { ControllerProcess } from './support/controller.js';
import { apply, json, type Kubectl, must, waitFor } from './support/kube.js';
import { fleetManifest, optedIn, peerJob, QUEUE, tenantLending, type TenantLending } from './support/lending.js';

const NS = 'team-a';
const POOL = { 'leasehold.dev/pool': 'gpu' };
let ours: ControlPlane;
let peer: ControlPlane;
let tenant: Kubectl;
let controller: ControllerProcess;
let setup: TenantLending;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const fleetStatus = async (): Promise<any> => (await json(ours, ['-n', NS, 'get', 'peerfleet.leasehold.dev', 'fleet'])).status ?? {};
const uidOf = async (name: string): Promise<string> => (await json(peer, ['-n', QUEUE, 'get', 'job', name])).metadata.uid;
const mirrorsOf = async (uid: string) => (await json(ours, ['-n', NS, 'get', 'jobs', '-l', `leasehold.dev/peer-job-uid=${uid}`])).items;

beforeAll(async () => {
  setup = await tenantLending('pfledger', NS, [{ name: 'gpu-1', gpus: 8, ...optedIn(NS, POOL) }]);
  ({ ours, peer, tenant, controller } = setup);
  const created = await tenant(['apply', '-f', '-'], JSON.stringify(fleetManifest(peer, 'fleet', NS, { lendableNodes: { matchLabels: POOL }, idleWindow: '1s', pollInterval: '5s' })));
  expect(created.code).toBe(0);
}, 240_000);

afterAll(async () => {
  await controller?.stop();
  await Promise.all([ours?.stop(), peer?.stop()]);
});

describe('our ledger of lent peer Jobs', () => {
  let paid = '';

  it('records a peer Job our node ran to completion, with the times our mirror ran, beside the peer accounting', async () => {
    await apply(peer, peerJob('paid', { gpus: 2, runFor: '3s' }));
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=90s', 'job/paid']);
    paid = await uidOf('paid');
    const record = (await json(peer, ['-n', QUEUE, 'get', 'job', 'paid'])).status;
    const status = await waitFor('paid in our ledger and the peer accounting', async () => {
      const s = await fleetStatus();
      return s.accounting?.jobs === 1 && s.ledger?.entries?.some((e: { uid: string }) => e.uid === paid) ? s : undefined;
    }, 60_000, 500);
    const entry = status.ledger.entries.find((e: { uid: string }) => e.uid === paid);
    expect(entry).toEqual({ uid: paid, job: 'paid', node: 'gpu-1', gpus: 2, startedAt: record.startTime, completedAt: record.completionTime });
    const gpuSeconds = 2 * ((Date.parse(record.completionTime) - Date.parse(record.startTime)) / 1000);
    expect(status.accounting).toMatchObject({ gpuSeconds, ledger: { gpuSeconds, jobs: 1 } });
    expect(status.accounting.mismatched).toBeUndefined();
  });

  it('a mirror that completes while the controller is down is recorded once it is back, and only once', async () => {
    await apply(peer, peerJob('offline', { runFor: '4s' }));
    const uid = await waitFor('offline claimed', async () => {
      const j = await json(peer, ['-n', QUEUE, 'get', 'job', 'offline']);
      return j.metadata.annotations?.['leasehold.dev/claimed-by'] ? j.metadata.uid as string : undefined;
    }, 60_000, 500);
    const [mirror] = await waitFor('offline mirrored', async () => ((await mirrorsOf(uid)).length === 1 ? mirrorsOf(uid) : undefined), 60_000, 500);
    await controller.stop();
    await must(ours, ['-n', NS, 'wait', '--for=condition=complete', '--timeout=60s', `job/${mirror.metadata.name}`]);
    controller = await setup.restartController();
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=90s', 'job/offline']);
    // The mirror goes once the peer has its record; by then the ledger has it.
    await waitFor('the offline mirror deleted', async () => (await mirrorsOf(uid)).length === 0, 60_000, 500);
    const status = await waitFor('both Jobs accounted', async () => {
      const s = await fleetStatus();
      return s.accounting?.jobs === 2 && s.accounting?.ledger?.jobs === 2 ? s : undefined;
    }, 60_000, 500);
    expect(status.ledger.entries.map((e: { uid: string }) => e.uid).sort()).toEqual([paid, uid].sort());
    expect(status.accounting.ledger.gpuSeconds).toBe(status.accounting.gpuSeconds);
  });

  it('the peer deletes the record of a Job our node ran: our ledger keeps it, accounting shows both, and the difference is flagged', async () => {
    const before = await fleetStatus();
    const entry = before.ledger.entries.find((e: { uid: string }) => e.uid === paid);
    const paidSeconds = 2 * ((Date.parse(entry.completedAt) - Date.parse(entry.startedAt)) / 1000);
    await must(peer, ['-n', QUEUE, 'delete', 'job', 'paid', '--wait=true']);

    const status = await waitFor('the difference in accounting', async () => {
      const s = await fleetStatus();
      return s.accounting?.mismatched === 1 ? s : undefined;
    }, 60_000, 500);
    expect(status.accounting.mismatchedJobs).toEqual([{ job: 'paid', uid: paid, node: 'gpu-1', ledgerGPUSeconds: paidSeconds, reason: 'the peer Job is gone from the peer namespace' }]);
    // The peer's side no longer counts it; ours does.
    expect(status.accounting.jobs).toBe(1);
    expect(status.accounting.ledger).toMatchObject({ jobs: 2, gpuSeconds: before.accounting.ledger.gpuSeconds });
    expect(status.accounting.ledger.gpuSeconds - status.accounting.gpuSeconds).toBe(paidSeconds);
    expect(status.ledger.entries.find((e: { uid: string }) => e.uid === paid)).toEqual(entry);
    const host = status.hosts.find((h: { node: string }) => h.node === 'gpu-1');
    expect(host.lent).toMatchObject({ mismatched: 1, ledger: { jobs: 2 } });

    const warned = await waitFor('one LedgerMismatch Warning', async () => {
      const items = (await json(ours, ['-n', NS, 'get', 'events', '--field-selector', 'reason=LedgerMismatch'])).items;
      return items.length > 0 ? items : undefined;
    }, 60_000, 500);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ type: 'Warning', count: 1 });
    expect(warned[0].message).toMatch(new RegExp(`peer Job paid \\(uid ${paid}\\) ran on node gpu-1 .* but the peer Job is gone from the peer namespace`));
    await waitFor('the difference counted', async () => (await controller.metric('leasehold_peerfleet_ledger_mismatched_jobs', { peerfleet: 'fleet' })) === 1, 30_000, 500);
    expect(await controller.metric('leasehold_peerfleet_ledger_gpu_seconds', { peerfleet: 'fleet' })).toBe(status.accounting.ledger.gpuSeconds);
  });

  it('the namespace user cannot rewrite the ledger: PeerFleet status is the controller\'s alone', async () => {
    const r = await tenant(['-n', NS, 'patch', 'peerfleet.leasehold.dev', 'fleet', '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { ledger: { entries: [] } } })]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/peerfleets\/status of leasehold.dev may be written only by the Leasehold controller/);
    expect((await fleetStatus()).ledger.entries.map((e: { uid: string }) => e.uid)).toContain(paid);
  });
});
