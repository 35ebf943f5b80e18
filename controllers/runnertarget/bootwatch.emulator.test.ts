// The boot watch against the Compute Engine and GitHub emulators and real
// sshd hosts: with the launch's follow-up check a minute away, the runner
// config lands within a couple of seconds of the VM running, and between
// the check that launched it and that delivery the controller asks GitHub
// for nothing but the config, Compute Engine only about that one VM, and
// writes no status. The next check settles the Launch receipt and gives the
// host no second config.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import type { RunnerTarget } from '../../src/api/index.js';
import { generateControllerKey } from '../../src/machine/keys.js';
import { parseServiceAccountKey } from '../../src/providers/gce/auth.js';
import { GceClient } from '../../src/providers/gce/client.js';
import { GitHubClient } from '../../src/providers/github/client.js';
import { startRunnerHosts, type RunnerHosts } from '../../e2e/support/runnerhosts-bench.js';
import { RunnerTargetReconciler } from './reconciler.js';
import { spec } from './testing/pool.js';

const KEY = 'ci/pool';
const FOLLOW_UP_MS = 60_000;
const REPO = 'oxidex';

async function until<T>(what: string, probe: () => T | undefined, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const got = probe();
    if (got !== undefined && got !== false) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the boot watch', () => {
  let root: string;
  let hosts: RunnerHosts;
  let target: RunnerTarget;
  let reconciler: RunnerTargetReconciler;
  const writes: { at: number; status: RunnerTarget['status'] }[] = [];
  const events: string[] = [];
  let leases = 0;
  let timer: NodeJS.Timeout | undefined;
  let chain = Promise.resolve();
  let stopped = false;

  /** The work queue, as far as one target needs it: a pass when its requeueAfter is up, one at a time. */
  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (stopped) return;
    timer = setTimeout(() => {
      chain = chain.then(async () => {
        const r = await reconciler.reconcile(KEY).catch((err: unknown) => (events.push(`reconcile threw: ${String(err)}`), { requeueAfter: 1000 }));
        schedule(r?.requeueAfter ?? FOLLOW_UP_MS);
      });
    }, ms);
  };

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'bootwatch-'));
    hosts = await startRunnerHosts(root, { bootMs: 2000 });
    const { gce, gh } = hosts;
    gh.addRepository(REPO);
    const clients = {
      gce: new GceClient({ key: parseServiceAccountKey(JSON.stringify(gce.serviceAccountKey)), endpoint: gce.url, tokenUrl: gce.tokenUrl }),
      github: new GitHubClient({ org: gh.org, credentials: { token: gh.token }, api: gh.url }),
    };
    const key = generateControllerKey('leasehold-runnertarget');
    target = {
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'RunnerTarget',
      metadata: { namespace: 'ci', name: 'pool', uid: 'u-watch', generation: 1, resourceVersion: '1' },
      spec: {
        ...spec,
        github: { ...spec.github, org: gh.org, repositories: [`${gh.org}/${REPO}`], apiURL: gh.url },
        gce: { ...spec.gce, project: gce.project, zones: [gce.zones[0]!], machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }], endpoint: gce.url },
        floor: 0,
        maxHosts: 2,
        checkInterval: '5m',
      },
    };
    reconciler = new RunnerTargetReconciler({
      targets: { get: () => target, list: () => [target] } as never,
      read: async () => structuredClone(target),
      status: {
        write: async (_ref, _obj, status) => {
          target = { ...target, status: structuredClone(status) as RunnerTarget['status'], metadata: { ...target.metadata, resourceVersion: String(Number(target.metadata!.resourceVersion) + 1) } };
          writes.push({ at: Date.now(), status: target.status });
          return structuredClone(target) as never;
        },
      },
      events: { record: async (_o, _type, reason) => void events.push(reason) },
      providers: { clients: async () => clients, forget: () => {} },
      leases: { acquire: async () => (leases++, { held: true, lease: { signal: new AbortController().signal, release: async () => {} } }) },
      identity: 'me',
      installationID: 'inst1',
      hostAccess: async () => ({ ...key, user: userInfo().username, port: hosts.sshPort }),
      followUpMs: FOLLOW_UP_MS,
    });
  }, 60_000);

  afterAll(async () => {
    stopped = true;
    clearTimeout(timer);
    await chain;
    await hosts?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('delivers the runner config within seconds of the VM running, with the follow-up check a minute away', async () => {
    const { gce, gh } = hosts;
    gh.queueRun(REPO, [{ labels: ['self-hosted'] }]);
    schedule(0);
    const name = await until('a VM launched for the queued job', () => gce.instances()[0]?.name, 30_000);
    const launch = await until('the Launch receipt', () => target.status?.receipts?.find((r) => r.action === 'Launch' && r.hosts[0] === name), 30_000);
    const ran = await until('the VM running, its sshd listening', () => hosts.running.get(name), 30_000);
    const landed = await until('the runner config on the host and its runner registered', () => hosts.registered.get(name), 20_000);
    console.log(`boot watch: VM running -> runner config on the host and its runner registered in ${landed - ran} ms (follow-up ${FOLLOW_UP_MS} ms)`);
    expect(landed - ran).toBeLessThan(4_000);
    expect(events).toContain('RunnerConfigDelivered');

    // Between the VM running and the delivery: GitHub is asked for the config only; Compute Engine about that VM only; status is not written.
    const between = <R extends { time: number }>(log: readonly R[]) => log.filter((r) => r.time >= ran && r.time <= landed);
    expect(between(gh.requests).map((r) => r.op)).toEqual(['generate-jitconfig']);
    const gceCalls = between(gce.requests).filter((r) => r.op !== 'token');
    expect(gceCalls.filter((r) => !(r.op === 'get' || r.op === 'guest-attributes') || !r.path.includes(`/instances/${name}`))).toEqual([]);
    expect(writes.filter((w) => w.at >= ran && w.at <= landed)).toEqual([]);
    expect(target.status?.receipts?.find((r) => r.id === launch.id)?.phase).toBe('Intended');

    // The next check sees the runner online and settles the launch; the host gets no second config.
    reconciler.requestCheck(KEY);
    schedule(0);
    await until('the Launch receipt settled', () => target.status?.receipts?.find((r) => r.id === launch.id && r.phase === 'Done'), 30_000);
    expect(gh.requests.filter((r) => r.op === 'generate-jitconfig')).toHaveLength(1);
    expect(gh.runners().filter((r) => r.name === name)).toHaveLength(1);
    expect(events).not.toContain('RunnerLeft');
  }, 90_000);
});
