// Leasehold as users install it: the image built from the repository's Dockerfile,
// `helm install` of charts/leasehold into a namespace that enforces the restricted
// Pod Security profile, and the controller pods really running on a real node
// (containerd + kubelet, e2e/cluster/node.ts). Catches what a host-process test
// cannot: a broken ENTRYPOINT, files missing from the image, probes on the wrong
// port, a securityContext the runtime refuses, leader hand-over between pods.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from './cluster/controlplane.js';
import { DEFAULT_CONTROLLERS } from './cluster/components.js';
import { NODE_IP, NODE_NAME, RealNode, ensureNodeImages, type NodeImages } from './cluster/node.js';
import { createPeerCredential } from './cluster/peer.js';
import { startController, type ControllerProcess } from './support/controller.js';
import { chartDir, chartIdentity } from './support/helm.js';
import { nodeInstallArgs, nodeOffer, startMachineService } from './support/installed.js';
import { apply, getJSON, json, type Kubectl, must, testKubectl, waitFor } from './support/kube.js';
import { fleetManifest, lendingNamespace, optIn, peerJob, QUEUE } from './support/lending.js';

const release = 'lh';
const ns = 'leasehold-system';
const selector = `app.kubernetes.io/instance=${release}`;
// Generous: a machine several times slower than a developer's still makes these.
const slow = 180_000;
const work = mkdtempSync(join(tmpdir(), 'leasehold-installed-'));
const machines = join(work, 'machines');

let cp: ControlPlane;
let peer: ControlPlane;
let images: NodeImages;
/** The controller as a host process, for lending the node once the chart's pods are gone. */
let lender: ControllerProcess | undefined;
const LEND = 'lend';
const POOL = { 'leasehold.dev/pool': 'real' };
let node: RealNode | undefined;
let kubectl: Kubectl;
let helm: (args: string[]) => Promise<{ stdout: string; stderr: string; code: number }>;

async function controllerPods(): Promise<any[]> {
  const list = await getJSON(kubectl, ['-n', ns, 'pods', '-l', selector]);
  return (list?.items ?? []).filter((p: any) => !p.metadata.deletionTimestamp);
}

const ready = (pod: any) => pod.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');

async function leaderIdentity(): Promise<string | undefined> {
  const lease = await getJSON(kubectl, ['-n', ns, 'leases.coordination.k8s.io', 'leasehold-controller']);
  return lease?.spec?.holderIdentity;
}

/** The one pod the webhook Service sends to is the leader's: its name, once its endpoints are exactly that pod. */
async function webhookReachesOnly(leader: string): Promise<string | undefined> {
  const pod = (await controllerPods()).find((p) => leader.startsWith(`${p.metadata.name}_`));
  const list = await getJSON(kubectl, ['-n', ns, 'endpointslices', '-l', `kubernetes.io/service-name=${release}-leasehold-github-webhook`]);
  const ready = (list?.items ?? []).flatMap((s: any) => (s.endpoints ?? []).filter((e: any) => e.conditions?.ready).map((e: any) => e.addresses[0]));
  return pod?.status?.podIP && ready.length === 1 && ready[0] === pod.status.podIP ? pod.metadata.name : undefined;
}

/** What the controller pods printed, read from the node's log files (the API server cannot reach the kubelet here). */
async function podLogs(): Promise<string> {
  const { stdout } = await node!.exec('bash', ['-c', `tail -n 40 /var/log/pods/${ns}_*/*/*.log 2>/dev/null || true`]);
  return stdout;
}

/** The host PID of a pod's container, from the runtime's own task list. */
async function containerPID(pod: any): Promise<number> {
  const id = String(pod.status.containerStatuses[0].containerID).replace(/^containerd:\/\//, '');
  const tasks = await node!.ctr(['tasks', 'list']);
  const line = tasks.split('\n').find((l) => l.startsWith(id));
  if (!line) throw new Error(`no task for container ${id}`);
  return Number(line.split(/\s+/)[1]);
}

/**
 * The status of a Lease whose machine was handed over: Ready, or Idle (a
 * machine nobody uses goes Idle at its first check, one check interval, here
 * 2 s, after Ready; both hold condition Ready True). Otherwise it throws, so
 * that a timeout says where the Lease stood.
 */
function handedOver(s: any): any {
  if (s?.phase === 'Ready' || s?.phase === 'Idle') return s;
  throw new Error(`the Lease is ${s?.phase ?? 'missing'}: ${s?.reason ?? ''}: ${s?.message ?? ''}`);
}

/** The machine service's journal: each provider run's start and end. */
function journal(): { at: number; what: string; id: string; code?: string }[] {
  const file = join(machines, '.journal');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((line) => {
    const [at, what, id, code] = line.split(' ');
    return { at: Number(at), what: what!, id: id!, code };
  });
}

beforeAll(async () => {
  images = await ensureNodeImages();
  [cp, peer] = await Promise.all([
    ControlPlane.start({
      name: 'installed',
      // EndpointSlices for the metrics Service, the disruption controller for the PDB.
      controllers: [...DEFAULT_CONTROLLERS, 'endpointslice-controller', 'disruption-controller'],
      scheduler: true,
    }),
    // A peer that allows privileged pods: what it may ask for, our side must refuse.
    ControlPlane.start({ name: 'installed-peer', controllers: true, apiServerArgs: ['--allow-privileged=true'] }),
  ]);
  kubectl = testKubectl(cp.info.kubeconfig, cp.info.binDir);
  helm = (args) => cp.helm(args);
  node = await RealNode.start(cp, images);
  // The "cloud" of the command Offer: sshd machines on the node's address.
  await startMachineService(node, machines);
  // The real node is lendable: opted in by the admin for the lending namespace, with one (advertised) GPU.
  await optIn(cp, NODE_NAME, LEND, POOL);
  await must(cp, ['patch', 'node', NODE_NAME, '--subresource=status', '--type=json', '-p',
    JSON.stringify([{ op: 'add', path: '/status/capacity/nvidia.com~1gpu', value: '1' }])]);
  const lender = await createPeerCredential(peer, { namespace: QUEUE });
  await lendingNamespace({ ours: cp, peer, lender }, LEND);
  const created = await kubectl(['create', 'namespace', ns]);
  expect(created.stderr).toBe('');
  const labelled = await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted',
    'pod-security.kubernetes.io/enforce-version=latest']);
  expect(labelled.code).toBe(0);
  const installed = await helm(['install', release, chartDir, '-n', ns, ...nodeInstallArgs(images, '2s'),
    '--set', 'githubWebhook.enabled=true', '--wait', '--timeout=4m']);
  if (installed.code !== 0) {
    const pods = await kubectl(['-n', ns, 'get', 'pods', '-o', 'wide']);
    const events = await kubectl(['-n', ns, 'get', 'events', '--sort-by=.lastTimestamp']);
    throw new Error(`helm install failed: ${installed.stderr}\n${pods.stdout}\n${events.stdout}`);
  }
}, 900_000);

afterAll(async () => {
  await lender?.stop();
  await node?.stop();
  await Promise.all([cp?.stop(process.env.E2E_KEEP_DIRS === '1'), peer?.stop()]);
  // sshd machines the test left (on a failure) run as this user: the service's stop does not end them.
  try {
    execFileSync('pkill', ['-f', '--', `${machines}/`]);
  } catch {
    // none left
  }
}, 300_000);

describe('the chart, installed on a real node', () => {
  it('runs both replicas Ready on the node, one of them the leader', async () => {
    const pods = await waitFor('two Ready controller pods', async () => {
      const list = await controllerPods();
      return list.length === 2 && list.every(ready) ? list : undefined;
    }, slow);
    expect(pods.map((p) => p.spec.nodeName)).toEqual([NODE_NAME, NODE_NAME]);
    const leader = await waitFor('a leader', leaderIdentity, slow);
    // The identity is `<hostname>_<uuid>`, and a pod's hostname is its name.
    expect(pods.filter((p) => leader.startsWith(`${p.metadata.name}_`))).toHaveLength(1);
    // GitHub does not redeliver what a follower refused: its webhook Service reaches the leader alone.
    await waitFor('the webhook Service reaches only the leader', () => webhookReachesOnly(leader), slow);
  }, slow);

  it('serves /metrics at the addresses the metrics Service lists', async () => {
    const slices = await waitFor('the metrics Service endpoints', async () => {
      const list = await getJSON(kubectl, ['-n', ns, 'endpointslices', '-l', `kubernetes.io/service-name=${release}-leasehold-metrics`]);
      const ready = (list?.items ?? []).flatMap((s: any) => (s.endpoints ?? []).filter((e: any) => e.conditions?.ready)
        .map((e: any) => `${e.addresses[0]}:${s.ports[0].port}`));
      return ready.length === 2 ? ready as string[] : undefined;
    }, slow);
    for (const at of slices) {
      // Pod addresses exist only inside the node's network namespace.
      const { stdout } = await node!.exec(process.execPath, ['-e',
        `fetch('http://${at}/metrics').then(async (r) => console.log(r.status, await r.text()))`]);
      expect(stdout.startsWith('200 ')).toBe(true);
      expect(stdout).toContain('leasehold_workqueue_depth');
    }
  }, slow);

  it('runs the controller as non-root, read-only, with RuntimeDefault seccomp and no capabilities', async () => {
    const nsObj = await getJSON(kubectl, ['namespace', ns]);
    expect(nsObj.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
    for (const pod of await controllerPods()) {
      const pid = await containerPID(pod);
      // What the kernel applies to the running process, not what the spec asked for.
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      const field = (name: string) => status.match(new RegExp(`^${name}:\\s*(.*)$`, 'm'))?.[1]?.trim();
      expect(field('Uid')!.split(/\s+/)).toEqual(['1000', '1000', '1000', '1000']);
      expect(field('CapEff')).toBe('0000000000000000');
      expect(field('CapPrm')).toBe('0000000000000000');
      expect(field('NoNewPrivs')).toBe('1');
      expect(field('Seccomp')).toBe('2');
      const mountinfo = await readFile(`/proc/${pid}/mountinfo`, 'utf8');
      const root = mountinfo.split('\n').map((l) => l.split(' ')).find((f) => f[4] === '/');
      expect(root?.[5]?.split(',')).toContain('ro');
      // The process is the image's ENTRYPOINT: tini, with node under it.
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
      expect(cmdline.slice(0, 2)).toEqual(['tini', '--']);
    }
  }, slow);

  it('rents a machine through a provider script from the chart ConfigMap: Ready, ssh with the pinned key, released when idle', async () => {
    await apply(kubectl, JSON.stringify(nodeOffer('node-box', '15s')));
    const key = join(work, 'id_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]);
    const created = await kubectl(['create', 'namespace', 'team-a']);
    expect(created.code).toBe(0);
    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Lease',
      metadata: { name: 'box', namespace: 'team-a' },
      spec: { where: 'cpus>=1', offer: 'node-box', sshKeys: [readFileSync(`${key}.pub`, 'utf8').trim()] },
    }));
    const st = await waitFor('Lease Ready', async () => handedOver((await getJSON(kubectl, ['-n', 'team-a', 'leases.leasehold.dev', 'box']))?.status), slow, 250);
    const ssh = st.machine.ssh;
    expect(ssh.host).toBe(NODE_IP);
    // As a user would: the host key the Lease pinned, and the user's own key.
    const knownHosts = join(work, 'known_hosts');
    writeFileSync(knownHosts, `[${ssh.host}]:${ssh.port} ${ssh.hostKey}\n`);
    const { stdout } = await node!.exec('ssh', ['-i', key, '-p', String(ssh.port), '-o', `UserKnownHostsFile=${knownHosts}`,
      '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes', `${ssh.user}@${ssh.host}`, 'echo on-the-machine']);
    expect(stdout.trim()).toBe('on-the-machine');
    // Idle for the Offer's 15 s: released by the controller, the machine gone.
    const released = await waitFor('Lease Released when idle', async () => {
      const s = (await getJSON(kubectl, ['-n', 'team-a', 'leases.leasehold.dev', 'box']))?.status;
      return s?.phase === 'Released' ? s : undefined;
    }, slow, 500);
    const events = await getJSON(kubectl, ['-n', 'team-a', 'events', '--field-selector', 'involvedObject.name=box']);
    expect(events.items.map((e: any) => e.reason)).toEqual(expect.arrayContaining(['IdleTimeout', 'Released']));
    expect(existsSync(join(machines, st.leaseID))).toBe(false);
  }, slow * 2);

  it('carries a launch through helm upgrade: the old leader finishes its acquire, the Lease ends Ready, nothing is acquired twice', async () => {
    // Slow enough that the rollout reaches the leader while the acquire runs
    // (on a loaded machine it took over 15 s), and short enough to end well
    // inside the chart's 25 s shutdown grace once the leader is told to stop.
    await apply(kubectl, JSON.stringify(nodeOffer('slow-box', '10m', 20)));
    await apply(kubectl, JSON.stringify({
      apiVersion: 'leasehold.dev/v1alpha1',
      kind: 'Lease',
      metadata: { name: 'through-upgrade', namespace: 'team-a' },
      spec: { where: 'cpus>=1', offer: 'slow-box' },
    }));
    const leaseStatus = async () => (await getJSON(kubectl, ['-n', 'team-a', 'leases.leasehold.dev', 'through-upgrade']))?.status;
    const leaseID: string = await waitFor('the acquire running', async () => {
      const id = (await leaseStatus())?.leaseID;
      return id && journal().some((e) => e.what === 'acquire-start' && e.id === id) ? id : undefined;
    }, slow, 100);
    const leader = await waitFor('a leader', leaderIdentity, slow);
    const leaderPod = (await controllerPods()).find((p) => leader.startsWith(`${p.metadata.name}_`));
    expect(leaderPod).toBeTruthy();

    const upgrade = helm(['upgrade', release, chartDir, '-n', ns, '--reuse-values', '--set', 'logLevel=debug', '--wait', '--timeout=4m']);
    // When the rollout told the leader to stop (its pod marked for deletion).
    const stopping = await waitFor('the leader pod told to stop', async () => {
      const pod = await getJSON(kubectl, ['-n', ns, 'pod', leaderPod.metadata.name]);
      return !pod || pod.metadata.deletionTimestamp ? Date.now() : undefined;
    }, slow, 100);
    const upgraded = await upgrade;
    if (upgraded.code !== 0) throw new Error(`helm upgrade failed: ${upgraded.stderr}`);

    // The next leader may take the Lease to Ready while the rollout still
    // runs, and with nothing running on it the first check (2 s later) makes
    // it Idle, all before helm returns: Idle is handed over too.
    const st = await waitFor('Lease Ready after the upgrade', async () => handedOver(await leaseStatus()), slow, 250);
    expect(st.reason ?? '').not.toBe('LaunchInterrupted');
    const runs = journal().filter((e) => e.id === leaseID);
    expect(runs.filter((e) => e.what === 'acquire-start')).toHaveLength(1);
    expect(runs.filter((e) => e.what.startsWith('release'))).toEqual([]);
    // The case this covers: the leader was stopping while its acquire still ran.
    const ended = runs.find((e) => e.what === 'acquire-end')!;
    expect(ended.code).toBe('0');
    expect(stopping).toBeLessThan(ended.at);
    // Every pod runs the upgraded value, and one of the new pods leads.
    const pods = await waitFor('two Ready upgraded pods', async () => {
      const list = await controllerPods();
      return list.length === 2 && list.every(ready) ? list : undefined;
    }, slow);
    for (const pod of pods) expect(pod.spec.containers[0].args).toContain('--log-level=debug');
    const now = await waitFor('a leader', leaderIdentity, slow);
    expect(pods.filter((p) => now.startsWith(`${p.metadata.name}_`))).toHaveLength(1);

    const deleted = await kubectl(['-n', 'team-a', 'delete', 'leases.leasehold.dev', 'through-upgrade', '--timeout=150s']);
    expect(deleted.code).toBe(0);
    expect(existsSync(join(machines, leaseID))).toBe(false);
  }, slow * 2);

  it('lets a drain evict one controller pod at a time (the PodDisruptionBudget)', async () => {
    const pdb = await waitFor('the budget counting two healthy pods', async () => {
      const b = await getJSON(kubectl, ['-n', ns, 'poddisruptionbudgets', '-l', selector]);
      const item = b?.items?.[0];
      return item?.status?.currentHealthy === 2 && item.status.disruptionsAllowed === 1 ? item : undefined;
    }, slow);
    expect(pdb.spec.maxUnavailable).toBe(1);
    const [first, second] = await controllerPods();
    const evict = (pod: any) => kubectl(['create', '--raw', `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/eviction`, '-f', '-'],
      JSON.stringify({ apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod.metadata.name, namespace: ns } }));
    const one = await evict(first);
    expect(one.stderr).toBe('');
    expect(one.code).toBe(0);
    // The other one stays until the first one's replacement is Ready.
    const two = await evict(second);
    expect(two.code).not.toBe(0);
    expect(two.stderr).toMatch(/disruption budget/);
    await waitFor('two Ready pods again', async () => {
      const list = await controllerPods();
      return list.length === 2 && list.every(ready);
    }, slow);
    expect((await controllerPods()).map((p) => p.metadata.name)).toContain(second.metadata.name);
  }, slow);

  it('hands leadership to another pod within the lease duration when the leader pod is deleted', async () => {
    const before = await waitFor('a leader', leaderIdentity, slow);
    const pods = await controllerPods();
    const leaderPod = pods.find((p) => before.startsWith(`${p.metadata.name}_`));
    const other = pods.find((p) => p !== leaderPod);
    expect(leaderPod && other).toBeTruthy();
    const began = Date.now();
    const deleted = await kubectl(['-n', ns, 'delete', 'pod', leaderPod.metadata.name, '--wait=false']);
    expect(deleted.code).toBe(0);
    // The other pod, or the deleted one's replacement if it starts in time:
    // either may win the free lease; only the deleted pod may not hold it.
    const after = await waitFor('another pod to lead', async () => {
      const now = await leaderIdentity();
      return now && !now.startsWith(`${leaderPod.metadata.name}_`) ? now : undefined;
    }, 60_000, 100).catch(async (err) => {
      throw new Error(`${err}\nleader: ${await leaderIdentity()}\n${await podLogs()}`);
    });
    const tookMs = Date.now() - began;
    console.log(`leader hand-over after deleting the leader pod: ${tookMs} ms`);
    expect(after).not.toBe(before);
    // The chart's lease duration is 15 s; a leader that steps down on SIGTERM
    // hands over well within it.
    expect(tookMs).toBeLessThan(15_000);
    // The Deployment replaces the deleted pod; only one of the two leads.
    await waitFor('two Ready pods again', async () => {
      const list = await controllerPods();
      return list.length === 2 && list.every(ready);
    }, slow);
    expect(await leaderIdentity()).toBe(after);
    await waitFor('the webhook Service follows the new leader', () => webhookReachesOnly(after), slow);
  }, slow);

  it('leaves no controller object behind on helm uninstall, and keeps the CRDs', async () => {
    const removed = await helm(['uninstall', release, '-n', ns, '--wait', '--timeout=3m']);
    expect(removed.code).toBe(0);
    await waitFor('the controller pods gone', async () => (await controllerPods()).length === 0, slow);
    for (const kind of ['deployments', 'services', 'serviceaccounts', 'roles', 'rolebindings', 'configmaps', 'poddisruptionbudgets']) {
      const left = await getJSON(kubectl, ['-n', ns, kind, '-l', selector]);
      expect({ kind, left: left?.items?.length }).toEqual({ kind, left: 0 });
    }
    for (const kind of ['clusterroles', 'clusterrolebindings']) {
      const left = await getJSON(kubectl, [kind, '-l', selector]);
      expect({ kind, left: left?.items?.length }).toEqual({ kind, left: 0 });
    }
    const crds = await getJSON(kubectl, ['crd', '-l', 'app.kubernetes.io/part-of=leasehold']);
    expect(crds.items.length).toBeGreaterThanOrEqual(4);
  }, slow);
  // The node is lent only while none of our work runs there, and the controller's
  // own pods are our work: from here on the controller runs as a process on the host
  // with the chart's identity, and the mirror Jobs are the node's only pods.
  it('runs a peer Job as a real container under the restricted profile; the peer sees Complete with its exit code', async () => {
    const identity = await chartIdentity({ kubectl, release: 'lender', namespace: LEND,
      set: [`watchNamespace=${LEND}`, `secretNamespaces={${LEND}}`], file: join(work, 'lender.kubeconfig') });
    lender = await startController(identity, ['--namespace', LEND, '--watch-namespace', LEND, '--leader-election-namespace', LEND,
      '--allowed-peer-origins', peer.info.server]);
    await apply(kubectl, JSON.stringify(fleetManifest(peer, 'real', LEND, {
      lendableNodes: { matchLabels: POOL }, idleWindow: '2s', pollInterval: '5s',
    })));
    await must(cp, ['wait', '-n', LEND, '--for=condition=Ready', '--timeout=180s', 'peerfleet.leasehold.dev/real']);
    const peerWork = (name: string, exitCode: string) =>
      peerJob(name, { container: { image: images.workload.ref, env: [{ name: 'EXIT_CODE', value: exitCode }] } });
    await must(peer, ['apply', '-f', '-'], JSON.stringify(peerWork('real-ok', '0')));
    await must(peer, ['wait', '-n', QUEUE, '--for=condition=complete', '--timeout=150s', 'job/real-ok']).catch(async (err) => {
      const fleet = await json(cp, ['-n', LEND, 'get', 'peerfleet.leasehold.dev', 'real']);
      const jobs = await cp.kubectl(['-n', LEND, 'get', 'jobs,pods,events', '-o', 'wide']);
      throw new Error(`${err}\nPeerFleet status: ${JSON.stringify(fleet.status)}\n${jobs.stdout}\n${lender ? readFileSync(lender.logFile, "utf8").slice(-4000) : ""}`);
    });
    const done = await waitFor('the exit code on the peer Job', async () => {
      const j = await json(peer, ['-n', QUEUE, 'get', 'job', 'real-ok']);
      return j.metadata.annotations?.['leasehold.dev/exit-code'] === '0' ? j : undefined;
    }, slow);
    expect(done.status.succeeded).toBe(1);
    expect(done.metadata.annotations['leasehold.dev/host']).toMatch(new RegExp(`/${NODE_NAME}$`));
    // A failing run's own exit code travels back too.
    await must(peer, ['apply', '-f', '-'], JSON.stringify(peerWork('real-fails', '3')));
    const failed = await waitFor('the failed peer Job with its exit code', async () => {
      const j = await json(peer, ['-n', QUEUE, 'get', 'job', 'real-fails']);
      return j.metadata.annotations?.['leasehold.dev/exit-code'] === '3' ? j : undefined;
    }, slow);
    expect(failed.status.failed).toBe(1);
  }, slow * 2);

  it('refuses a peer Job that asks for what the restricted profile forbids, and never starts it', async () => {
    const unsafe = peerJob('real-root', { container: { image: images.workload.ref, securityContext: { privileged: true } } });
    await must(peer, ['apply', '-f', '-'], JSON.stringify(unsafe));
    const refused = await waitFor('peer Job real-root refused', async () => {
      const j = await json(peer, ['-n', QUEUE, 'get', 'job', 'real-root']);
      return j.metadata.annotations?.['leasehold.dev/refused'] ? j : undefined;
    }, 120_000);
    expect(refused.metadata.annotations['leasehold.dev/refused']).toMatch(/privileged/);
    expect(refused.metadata.annotations['leasehold.dev/claimed-by']).toBeUndefined();
    // Nothing of it reached the node: no mirror Job, and no pod of one ever ran there.
    const mirror = `lh-peer-${refused.metadata.uid}`;
    expect(await getJSON(kubectl, ['-n', LEND, 'job', mirror])).toBeUndefined();
    const pods = await json(cp, ['-n', LEND, 'get', 'pods']);
    expect(pods.items.map((p: any) => p.metadata.name).filter((n: string) => n.startsWith(mirror))).toEqual([]);
    const events = await json(cp, ['-n', LEND, 'get', 'events', '--field-selector', 'reason=Refused']);
    expect(events.items.map((e: any) => e.message).join('\n')).toContain('real-root');
  }, slow);

});
