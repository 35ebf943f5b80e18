// `make demo-installed`: the story of `make demo`, with Leasehold installed as
// users install it. The controller image is built from the repository's
// Dockerfile, a real node (containerd + kubelet, in a network namespace of its
// own) joins a local control plane, `helm install` of charts/leasehold runs the
// controller pods there, and a Lease rents a machine through a provider script
// from the chart's providerScripts ConfigMap. The Lease goes Ready, `ssh` with
// the pinned host key runs on the machine, and it is released when idle.
//
// Needs root (containerd, the kubelet and network namespaces) and installs the
// Debian packages it lacks (e2e/node/setup.sh). SIGINT or SIGTERM at any point
// releases the machine, uninstalls the chart and stops everything.
//
//   node --import tsx e2e/demo/installed.ts [--idle-timeout 30s]
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { stringify } from 'yaml';
import { ControlPlane } from '../cluster/controlplane.js';
import { DEFAULT_CONTROLLERS } from '../cluster/components.js';
import { ensureNodeImages, NETNS, RealNode } from '../cluster/node.js';
import { chartDir } from '../support/helm.js';
import { nodeInstallArgs, nodeOffer, startMachineService } from '../support/installed.js';
import { parseDuration } from '../../src/api/duration.js';
import { releaseLeftoverMachines } from './machines.js';
import { block, say, seconds } from './output.js';
import { DemoSession, stopChild, type Attempt } from './session.js';
import { LeaseWatch } from './watch.js';

const execFileP = promisify(execFile);
const RELEASE = 'leasehold';
const SYSTEM = 'leasehold-system';
const NAMESPACE = 'demo';
const LEASE = 'demo';
const OFFER = 'node-machines';

const { values: flags } = parseArgs({
  options: {
    'idle-timeout': { type: 'string', default: process.env.DEMO_IDLE_TIMEOUT || '30s' },
    'keep-dir': { type: 'boolean', default: process.env.DEMO_KEEP_DIR === '1' },
  },
  strict: true,
});

const demo = new DemoSession({ keepDir: flags['keep-dir']!, keptFiles: 'cp/*.log, cp/node/*.log, machines/*/sshd.log' });
let machinesDir: string | undefined;
let plane: ControlPlane | undefined;
let node: RealNode | undefined;
let watch: LeaseWatch | undefined;
let installed = false;
let leaseApplied = false;

const mustKubectl = (args: string[], input?: string) => demo.mustKubectl(plane!.info, args, input);
async function helm(args: string[]): Promise<string> {
  const r = await plane!.helm(args);
  if (r.code !== 0) throw new Error(`helm ${args[0]}: ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

/** Undoes what the demo did, in order: the machine goes while the controller pods still run. */
async function teardown(attempt: Attempt): Promise<void> {
  await attempt('stopping the watches', async () => {
    for (const w of watch?.processes ?? []) await stopChild(w, 2_000);
    await demo.stopRunning();
  });
  if (leaseApplied) {
    await attempt('deleting the Lease', async () => {
      say(`deleting Lease ${NAMESPACE}/${LEASE}; the controller releases its machine before it goes`);
      const r = await demo.kubectl(plane!.info, ['-n', NAMESPACE, 'delete', 'leases.leasehold.dev', LEASE, '--ignore-not-found', '--timeout=90s'], undefined, true);
      if (r.code !== 0) throw new Error(r.stderr.trim());
    });
  }
  if (installed) {
    say('helm uninstall');
    await attempt('uninstalling the chart', async () => {
      const r = await plane!.helm(['uninstall', RELEASE, '-n', SYSTEM, '--wait', '--timeout=2m']);
      if (r.code !== 0) throw new Error(r.stderr.trim());
    });
  }
  // Whatever the controller did not release (it was stopped mid-acquire) goes by its lease ID.
  await attempt('releasing machines', async () => {
    if (!(await releaseLeftoverMachines(join(process.cwd(), 'e2e/providers/sshd-machine.sh'), machinesDir))) {
      throw new Error('a machine could not be released');
    }
  });
  if (node) {
    say('stopping the node: its pods, the kubelet, containerd and its network namespace');
    await attempt('stopping the node', () => node!.stop());
  }
  if (plane) {
    say('stopping the control plane');
    await attempt('stopping the control plane', () => plane!.stop(true));
  }
}

async function main(): Promise<void> {
  const idleTimeout = flags['idle-timeout']!;
  const idleMs = parseDuration(idleTimeout);
  if (idleMs < 1000) throw new Error(`--idle-timeout ${idleTimeout}: give the demo at least 1s`);
  if (process.getuid?.() !== 0) throw new Error('the real node runs containerd and the kubelet and makes a network namespace: run this as root (or use `make demo`, which needs none of that)');
  const tStart = Date.now();

  const root = await demo.makeRoot('leasehold-demo-installed-');
  machinesDir = join(root, 'machines');
  await mkdir(machinesDir);
  const deviceDir = join(root, 'device');
  await mkdir(deviceDir, { mode: 0o700 });

  say('building (or finding cached) the controller image from the Dockerfile, and the node\'s pause image');
  const images = await ensureNodeImages();
  say(`controller image ${images.controller.ref}`);
  demo.check();

  say('starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback');
  plane = await ControlPlane.start({
    dir: join(root, 'cp'),
    controllers: [...DEFAULT_CONTROLLERS, 'endpointslice-controller', 'disruption-controller'],
    scheduler: true,
  });
  demo.check();
  const { kubeconfig, binDir } = plane.info;
  say(`control plane ready; to look around from another terminal:`);
  block(`export KUBECONFIG=${kubeconfig}\nexport PATH=${binDir}:$PATH\nkubectl get pods -A; kubectl get leasehold -A`);

  say(`starting a real node (containerd + kubelet) in network namespace ${NETNS}`);
  node = await RealNode.start(plane, images);
  await startMachineService(node, machinesDir);
  demo.check();

  say(`helm install ${RELEASE} charts/leasehold -n ${SYSTEM} (restricted Pod Security)`);
  await mustKubectl(['create', 'namespace', SYSTEM]);
  await mustKubectl(['label', 'namespace', SYSTEM, 'pod-security.kubernetes.io/enforce=restricted']);
  installed = true;
  const tInstall = Date.now();
  await helm(['install', RELEASE, chartDir, '-n', SYSTEM, ...nodeInstallArgs(images, '5s'), '--wait', '--timeout=4m']);
  say(`installed: both controller pods Ready ${seconds(Date.now() - tInstall)} after helm install`);
  block(await mustKubectl(['-n', SYSTEM, 'get', 'pods', '-o', 'wide']));

  const deviceKey = join(deviceDir, 'id_ed25519');
  await execFileP('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'demo-device', '-f', deviceKey]);
  const offer = nodeOffer(OFFER, idleTimeout);
  const lease = {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: { name: LEASE, namespace: NAMESPACE },
    spec: { where: 'os=linux,cpus>=1', offer: OFFER, sshKeys: [(await readFile(`${deviceKey}.pub`, 'utf8')).trim()] },
  };
  say('applying an Offer whose provider script comes from the chart\'s providerScripts ConfigMap, and a Lease:');
  block(stringify([offer, lease], { lineWidth: 0 }));
  await mustKubectl(['create', 'namespace', NAMESPACE]);
  await mustKubectl(['apply', '-f', '-'], JSON.stringify(offer));
  demo.check();
  await mustKubectl(['apply', '-f', '-'], JSON.stringify(lease));
  leaseApplied = true;
  const tLease = Date.now();
  watch = new LeaseWatch({ kubeconfig, binDir, namespace: NAMESPACE, lease: LEASE, stopping: () => demo.isStopping() });
  watch.start();
  watch.followMessages();
  const tReady = await watch.phaseSeen('Ready', 180_000);
  say(`Lease Ready ${seconds(tReady - tLease)} after it was applied`);

  const st = JSON.parse(await mustKubectl(['-n', NAMESPACE, 'get', 'leases.leasehold.dev', LEASE, '-o', 'json'])).status;
  const ssh = st.machine.ssh as { host: string; port: number; user: string; hostKey: string };
  const knownHosts = join(deviceDir, 'known_hosts');
  await writeFile(knownHosts, `[${ssh.host}]:${ssh.port} ${ssh.hostKey}\n`);
  const sshArgs = ['-i', deviceKey, '-o', 'IdentitiesOnly=yes', '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes',
    '-p', String(ssh.port), `${ssh.user}@${ssh.host}`];
  say(`the machine's address exists only inside the node's network namespace; log in from another terminal with:`);
  block(`nsenter --net=/run/netns/${NETNS} ssh ${sshArgs.join(' ')}`);
  demo.check();
  const out = await node.exec('ssh', ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10', ...sshArgs, 'uname -a']);
  block(out.stdout, '    ssh> ');
  say('ssh worked with the pinned host key');

  say(`nothing runs on the machine: Idle, then Released ${idleTimeout} after it became Ready`);
  const tReleased = await watch.phaseSeen('Released', idleMs + 120_000);
  say('summary:');
  block([
    `phases seen:               ${watch.seen.map((s) => s.phase).join(' -> ')}`,
    `helm install -> Ready pods: ${seconds(tLease - tInstall)}`,
    `Lease applied -> Ready:    ${seconds(tReady - tLease)}`,
    `Ready -> Released:         ${seconds(tReleased - tReady)} (idleTimeout ${idleTimeout})`,
    `whole demo:                ${seconds(Date.now() - tStart)}`,
  ].join('\n'));
}

demo.run(main, teardown);
