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
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { stringify } from 'yaml';
import { ControlPlane, freePort } from '../cluster/controlplane.js';
import { CONTROLLER_ENTRY } from '../support/controller.js';
import { parseDuration } from '../../src/api/duration.js';
import { block, say, seconds, started, Stopping } from './output.js';
import { processesMentioning } from './procs.js';
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

let root: string | undefined;
let machinesDir: string | undefined;
let planeStarting: Promise<ControlPlane> | undefined;
let plane: ControlPlane | undefined;
let controller: ChildProcess | undefined;
let controllerLog: string | undefined;
let watch: LeaseWatch | undefined;
let leaseApplied = false;
let stopping: Promise<void> | undefined;
/** Set when the demo failed: the controller log is worth showing before it is removed. */
let failed = false;

function checkStopping(): void {
  if (stopping) throw new Stopping('stopping');
}

const alive = (c: ChildProcess | undefined): boolean => !!c && c.exitCode === null && c.signalCode === null;

async function stopChild(child: ChildProcess | undefined, graceMs: number): Promise<void> {
  if (!child || !alive(child)) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** kubectl processes the demo's steps started: teardown ends any still running. */
const running = new Set<ChildProcess>();

/** kubectl against the demo's control plane. Once stopping, only teardown may run it. */
async function kubectl(args: string[], input?: string, forTeardown = false): Promise<{ stdout: string; stderr: string; code: number }> {
  if (stopping && !forTeardown) throw new Stopping('stopping');
  if (!plane) throw new Error('no control plane');
  const { binDir, kubeconfig } = plane.info;
  // Not ControlPlane.kubectl: a Ctrl-C in a terminal reaches kubectl too, and
  // a kubectl that dies before reading its stdin must not crash the demo with EPIPE.
  return new Promise((resolve, reject) => {
    const child = spawn(join(binDir, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    if (!forTeardown) {
      running.add(child);
      child.once('exit', () => running.delete(child));
    }
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.on('error', () => undefined);
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ stdout, stderr: stderr || (signal ? `kubectl killed by ${signal}` : ''), code: code ?? -1 }));
    child.stdin.end(input ?? '');
  });
}

async function mustKubectl(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

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
    if (!alive(controller)) {
      say('the controller stopped before the Lease was released');
      return;
    }
    await new Promise((res) => setTimeout(res, 500));
  }
  say('the Lease was not released within 90s');
}

/** Undoes everything, in order; safe to run at any point. Resolves true when nothing is left. */
async function teardown(): Promise<boolean> {
  let ok = true;
  // Every step runs even if one before it failed.
  const attempt = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (err) {
      ok = false;
      say(`${what}: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  await attempt('stopping the watches', async () => {
    for (const w of watch?.processes ?? []) await stopChild(w, 2_000);
    // A step's kubectl started just as the signal came never got it.
    for (const c of [...running]) await stopChild(c, 2_000);
  });
  plane ??= await planeStarting?.catch(() => undefined);
  if (leaseApplied && plane && alive(controller)) await attempt('deleting the Lease', deleteLease);
  if (alive(controller)) say('stopping the controller');
  // With the API gone (a terminal's Ctrl-C stops it too) the controller waits
  // out its own 30s shutdown limit; whatever it leaves is released below anyway.
  await attempt('stopping the controller', () => stopChild(controller, 10_000));
  // Whatever the controller did not release (it was stopped mid-acquire, or
  // the API was already gone) is released here, by lease ID.
  await attempt('releasing machines', async () => {
    if (!(await releaseLeftoverMachines(provider, machinesDir))) throw new Error('a machine could not be released');
  });
  if (plane) {
    say('stopping kube-apiserver and etcd');
    await attempt('stopping the control plane', () => plane!.stop(true));
  }
  if (!root) return ok;
  for (const p of processesMentioning(root)) {
    ok = false;
    say(`process ${p.pid} was still running; killing it: ${p.cmdline.slice(0, 160)}`);
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  if ((failed || !ok) && controllerLog) {
    try {
      const lines = readFileSync(controllerLog, 'utf8').trimEnd().split('\n').slice(-15);
      say('last lines of the controller log:');
      block(lines.map((l) => (l.length > 400 ? `${l.slice(0, 400)}...` : l)).join('\n'));
    } catch {
      // no log
    }
  }
  if (flags['keep-dir']) {
    say(`kept ${root} (logs: controller.log, cp/*.log, machines/*/sshd.log); remove it yourself`);
    return ok;
  }
  await attempt('removing the demo directory', () => rm(root!, { recursive: true, force: true }));
  say(`removed ${root}`);
  return ok;
}

function stop(code: number): Promise<void> {
  stopping ??= teardown().then(
    (ok) => process.exit(ok ? code : 1),
    (err) => {
      process.stderr.write(`teardown failed: ${String(err)}\n`);
      process.exit(1);
    },
  );
  return stopping;
}

let signals = 0;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    signals++;
    if (stopping) {
      if (signals >= 3) {
        say(`${sig} again: exiting without finishing the cleanup`);
        process.exit(1);
      }
      say(`${sig}: already stopping (send it twice more to exit at once)`);
      return;
    }
    say(`${sig}: stopping everything`);
    // The user asked for it and everything is cleaned up: that is a clean exit.
    void stop(0);
  });
}

// ---- the demo ----------------------------------------------------------------

async function main(): Promise<void> {
  const idleTimeout = flags['idle-timeout']!;
  const checkInterval = flags['check-interval']!;
  const idleMs = parseDuration(idleTimeout);
  parseDuration(checkInterval);
  if (idleMs < 1000) throw new Error(`--idle-timeout ${idleTimeout}: give the demo at least 1s`);
  const shape = localShape();

  root = await mkdtemp(join(tmpdir(), 'leasehold-demo-'));
  machinesDir = join(root, 'machines');
  const deviceDir = join(root, 'device');
  await mkdir(machinesDir);
  await mkdir(deviceDir, { mode: 0o700 });
  say(`demo directory ${root} (removed when the demo ends)`);

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
  say('installing the CRDs from crds/');
  await mustKubectl(['apply', '--server-side', '-f', join(repo, 'crds')]);
  // kubectl wait errors out, rather than waits, on a CRD whose status has no conditions yet.
  for (let i = 0; ; i++) {
    const r = await kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '-l', 'app.kubernetes.io/part-of=leasehold']);
    if (r.code === 0) break;
    if (i >= 20) throw new Error(`the CRDs were not Established: ${r.stderr.trim()}`);
    checkStopping();
    await new Promise((res) => setTimeout(res, 250));
  }
  await mustKubectl(['create', 'namespace', NAMESPACE]);

  // 3. Controller.
  checkStopping();
  const metricsPort = await freePort();
  controllerLog = join(root, 'controller.log');
  const logFd = openSync(controllerLog, 'a');
  checkStopping();
  const args = ['--kubeconfig', kubeconfig, '--no-leader-elect', '--check-interval', checkInterval, '--metrics-addr', `127.0.0.1:${metricsPort}`, '--acquire-timeout', '3m', '--log-level', flags['log-level']!];
  controller = spawn(process.execPath, ['--import', 'tsx', join(repo, `${CONTROLLER_ENTRY}.ts`), ...args], {
    cwd: repo,
    stdio: ['ignore', logFd, logFd],
    env: { ...process.env, NODE_OPTIONS: '', LEASEHOLD_MACHINES_DIR: machinesDir },
  });
  closeSync(logFd);
  say(`started the controller (pid ${controller.pid}): ${CONTROLLER_ENTRY} ${args.join(' ')}`);
  const healthDeadline = Date.now() + 90_000;
  for (;;) {
    checkStopping();
    if (!alive(controller)) throw new Error(`the controller exited (${controller.exitCode ?? controller.signalCode}); its log follows`);
    try {
      if ((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > healthDeadline) throw new Error('the controller did not serve /healthz within 90s');
    await new Promise((r) => setTimeout(r, 200));
  }
  say(`controller healthy; metrics at http://127.0.0.1:${metricsPort}/metrics`);

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
  watch = new LeaseWatch({ kubeconfig, binDir, namespace: NAMESPACE, lease: LEASE, stopping: () => stopping !== undefined });
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

main().then(
  () => stop(0),
  (err) => {
    if (stopping) return; // a signal is already tearing everything down
    say(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
    failed = true;
    void stop(1);
  },
);
