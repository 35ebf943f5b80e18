// `make demo`: the whole Leasehold loop on this one machine, with no network.
//
// A local control plane (etcd + kube-apiserver on loopback), the CRDs, the
// real controller process, a Lease that waits Pending until a command Offer
// appears whose machines are real sshd processes on 127.0.0.1
// (e2e/providers/sshd-machine.sh). The Lease goes Launching and Ready, a real
// `ssh` with the pinned host key and a device key runs `uname -a` on it, and
// with nothing running it goes Idle and is Released after the idle timeout.
//
// SIGINT or SIGTERM at any point stops everything: the machine is released
// (through the Lease while the API answers, else by the provider's own
// release), then the controller, kube-apiserver and etcd are stopped and the
// demo directory is removed.
//
//   node --import tsx e2e/demo/main.ts [--idle-timeout 30s] [--check-interval 5s]
//   DEMO_IDLE_TIMEOUT=10s make demo
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { stringify } from 'yaml';
import { ControlPlane } from '../cluster/controlplane.js';
import { parseDuration } from '../../src/api/duration.js';
import { block, say, seconds, started } from './output.js';
import { alive, DemoSession, stopChild, type Attempt } from './session.js';
import { LeaseWatch } from './watch.js';
import { localShape, releaseLeftoverMachines } from './machines.js';

const execFileP = promisify(execFile);
const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const provider = join(repo, 'e2e/providers/sshd-machine.sh');
const NAMESPACE = 'demo';
const LEASE = 'demo';
const OFFER = 'local-sshd';

const { values: flags } = parseArgs({
  options: {
    'idle-timeout': { type: 'string', default: process.env.DEMO_IDLE_TIMEOUT || '30s' },
    'check-interval': { type: 'string', default: process.env.DEMO_CHECK_INTERVAL || '5s' },
    // For digging into a failure: the controller's log level, and keeping the demo directory (logs) afterwards.
    'log-level': { type: 'string', default: process.env.DEMO_LOG_LEVEL || 'info' },
    'keep-dir': { type: 'boolean', default: process.env.DEMO_KEEP_DIR === '1' },
  },
  strict: true,
});

// ---- what has to be undone --------------------------------------------------

const demo = new DemoSession({ keepDir: flags['keep-dir']!, keptFiles: 'controller.log, cp/*.log, machines/*/sshd.log' });
let machinesDir: string | undefined;
let planeStarting: Promise<ControlPlane> | undefined;
let plane: ControlPlane | undefined;
let watch: LeaseWatch | undefined;
let leaseApplied = false;

const checkStopping = () => demo.check();
const kubectl = (args: string[], input?: string, forTeardown = false) => {
  if (!plane) throw new Error('no control plane');
  return demo.kubectl(plane.info, args, input, forTeardown);
};
const mustKubectl = (args: string[], input?: string) => {
  if (!plane) throw new Error('no control plane');
  return demo.mustKubectl(plane.info, args, input);
};

/**
 * Deletes the Lease and waits while the controller releases its machine (the
 * finalizer goes once the provider confirms). Gives up early when the API or
 * the controller goes away, as both do when a terminal's Ctrl-C reaches the
 * whole process group; the provider's release then does the job.
 */
async function deleteLease(): Promise<void> {
  say(`deleting Lease ${NAMESPACE}/${LEASE}; the controller releases its machine before it goes`);
  const del = await kubectl(['-n', NAMESPACE, 'delete', 'leases.leasehold.dev', LEASE, '--ignore-not-found', '--wait=false', '--request-timeout=3s'], undefined, true);
  if (del.code !== 0) {
    say(`could not delete the Lease through the API: ${(del.stderr || del.stdout).trim().split('\n')[0]}`);
    return;
  }
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const r = await kubectl(['-n', NAMESPACE, 'get', 'leases.leasehold.dev', LEASE, '--ignore-not-found', '-o', 'name', '--request-timeout=3s'], undefined, true);
    if (r.code === 0 && r.stdout.trim() === '') {
      say('Lease deleted: its machine is released');
      return;
    }
    if (r.code !== 0) {
      say(`the API stopped answering while the Lease was being deleted: ${r.stderr.trim().split('\n')[0]}`);
      return;
    }
    if (!alive(demo.controller)) {
      say('the controller stopped before the Lease was released');
      return;
    }
    await new Promise((res) => setTimeout(res, 500));
  }
  say('the Lease was not released within 90s');
}

/** Undoes what this act did, in order: the machine is released before the controller and the API go. */
async function teardown(attempt: Attempt): Promise<void> {
  await attempt('stopping the watches', async () => {
    for (const w of watch?.processes ?? []) await stopChild(w, 2_000);
    await demo.stopRunning();
  });
  plane ??= await planeStarting?.catch(() => undefined);
  if (leaseApplied && plane && alive(demo.controller)) await attempt('deleting the Lease', deleteLease);
  if (alive(demo.controller)) say('stopping the controller');
  // With the API gone (a terminal's Ctrl-C stops it too) the controller waits
  // out its own 30s shutdown limit; whatever it leaves is released below anyway.
  await attempt('stopping the controller', () => stopChild(demo.controller, 10_000));
  // Whatever the controller did not release (it was stopped mid-acquire, or
  // the API was already gone) is released here, by lease ID.
  await attempt('releasing machines', async () => {
    if (!(await releaseLeftoverMachines(provider, machinesDir))) throw new Error('a machine could not be released');
  });
  if (plane) {
    say('stopping kube-apiserver and etcd');
    await attempt('stopping the control plane', () => plane!.stop(true));
  }
}

// ---- the demo ----------------------------------------------------------------

async function main(): Promise<void> {
  const idleTimeout = flags['idle-timeout']!;
  const checkInterval = flags['check-interval']!;
  const idleMs = parseDuration(idleTimeout);
  parseDuration(checkInterval);
  if (idleMs < 1000) throw new Error(`--idle-timeout ${idleTimeout}: give the demo at least 1s`);
  const shape = localShape();

  const root = await demo.makeRoot('leasehold-demo-');
  machinesDir = join(root, 'machines');
  const deviceDir = join(root, 'device');
  await mkdir(machinesDir);
  await mkdir(deviceDir, { mode: 0o700 });

  // 1. Control plane.
  say('starting etcd and kube-apiserver on loopback');
  checkStopping();
  planeStarting = ControlPlane.start({ dir: join(root, 'cp') });
  plane = await planeStarting;
  checkStopping();
  const { kubeconfig, binDir, server } = plane.info;
  say(`control plane ready at ${server}; to look around from another terminal:`);
  block(`export KUBECONFIG=${kubeconfig}\nexport PATH=${binDir}:$PATH\nkubectl get leasehold -A`);

  // 2. CRDs.
  await demo.installCRDs(plane.info);
  await mustKubectl(['create', 'namespace', NAMESPACE]);

  // 3. Controller.
  await demo.startController(kubeconfig, ['--no-leader-elect', '--check-interval', checkInterval, '--acquire-timeout', '3m', '--log-level', flags['log-level']!], { LEASEHOLD_MACHINES_DIR: machinesDir });

  // 4. A device key, as a user's laptop would have.
  const deviceKey = join(deviceDir, 'id_ed25519');
  await execFileP('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'demo-device', '-f', deviceKey]);
  const devicePub = (await readFile(`${deviceKey}.pub`, 'utf8')).trim();

  // 5. The Lease: with no Offer yet, it waits Pending.
  const lease = {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Lease',
    metadata: { name: LEASE, namespace: NAMESPACE },
    spec: { where: `os=linux,arch=${shape.arch},cpus>=1`, offer: OFFER, sshKeys: [devicePub] },
  };
  say('applying a Lease (no Offer exists yet, so it waits Pending):');
  block(stringify(lease, { lineWidth: 0 }));
  checkStopping();
  await mustKubectl(['apply', '-f', '-'], JSON.stringify(lease));
  leaseApplied = true;
  const tLease = Date.now();
  // Started after the Lease exists, so its first row is already there.
  say(`watching: kubectl -n ${NAMESPACE} get leases.leasehold.dev -w`);
  checkStopping();
  watch = new LeaseWatch({ kubeconfig, binDir, namespace: NAMESPACE, lease: LEASE, stopping: () => demo.isStopping() });
  watch.start();
  watch.followMessages();
  await watch.phaseSeen('Pending', 60_000);

  // 6. The Offer: its machines are sshd processes on loopback.
  const offer = {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Offer',
    metadata: { name: OFFER },
    spec: {
      command: { acquire: [provider, 'acquire'], release: [provider, 'release'], shape },
      pricePerHour: 0,
      idleTimeout,
      maxLifetime: '1h',
    },
  };
  say(`applying an Offer whose machines are real sshd processes on 127.0.0.1 (shape measured here: ${shape.os}/${shape.arch}, ${shape.cpus} CPUs):`);
  block(stringify(offer, { lineWidth: 0 }));
  checkStopping();
  await mustKubectl(['apply', '-f', '-'], JSON.stringify(offer));
  const tOffer = Date.now();
  await watch.phaseSeen('Launching', 60_000);
  const tReady = await watch.phaseSeen('Ready', 180_000);
  say(`Lease Ready ${seconds(tReady - tOffer)} after the Offer was applied`);

  // 7. Use it: a real ssh with the pinned host key and the device key.
  const st = JSON.parse(await mustKubectl(['-n', NAMESPACE, 'get', 'leases.leasehold.dev', LEASE, '-o', 'json'])).status;
  const ssh = st.machine.ssh as { host: string; port: number; user: string; hostKey: string };
  const knownHosts = join(deviceDir, 'known_hosts');
  await writeFile(knownHosts, `[${ssh.host}]:${ssh.port} ${ssh.hostKey}\n`);
  const sshArgs = ['-i', deviceKey, '-o', 'IdentitiesOnly=yes', '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes', '-p', String(ssh.port), `${ssh.user}@${ssh.host}`];
  say(`measured facts: ${JSON.stringify(st.facts)}`);
  say('known_hosts written from status.machine.ssh.hostKey; log in from another terminal with:');
  block(`ssh ${sshArgs.join(' ')}`);
  say('running it once: ... uname -a');
  checkStopping();
  const out = await execFileP('ssh', ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10', ...sshArgs, 'uname -a'], { timeout: 30_000 });
  block(out.stdout, '    ssh> ');
  say('ssh worked: the host key was the pinned one and the device key was let in');

  // 8. Nothing runs on it, so it goes Idle and is released after idleTimeout.
  say(`nothing is running on the machine: Idle, then Released ${idleTimeout} after it became Ready`);
  await watch.phaseSeen('Idle', idleMs + 60_000);
  const tReleased = await watch.phaseSeen('Released', idleMs + 120_000);
  const leftMachines = (await readdir(machinesDir)).filter((n) => !n.startsWith('.'));
  if (leftMachines.length) throw new Error(`Released, but machine directories remain: ${leftMachines.join(', ')}`);
  say('the sshd machine is gone: the provider released it');

  const phases = watch.seen.map((s) => s.phase).join(' -> ');
  say('summary:');
  block(
    [
      `phases seen:                 ${phases}`,
      `Offer applied -> Ready:      ${seconds(tReady - tOffer)}`,
      `Lease applied -> Ready:      ${seconds(tReady - tLease)} (includes the wait for the Offer)`,
      `Ready -> Released:           ${seconds(tReleased - tReady)} (idleTimeout ${idleTimeout}, checked every ${checkInterval})`,
      `ssh ${ssh.user}@${ssh.host}:${ssh.port}:    ran uname -a`,
      `whole demo:                  ${seconds(Date.now() - started)}`,
    ].join('\n'),
  );
}

demo.run(main, teardown);
