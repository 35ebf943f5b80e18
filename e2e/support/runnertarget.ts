// A RunnerTarget pool for end-to-end tests: the Compute Engine and GitHub
// emulators in the test process, the controller process against the shared
// control plane, one namespace. Every VM boots a real sshd that admits the
// keys of its ssh-keys metadata (as the guest agent does) and publishes its
// host keys; a host whose runner config arrives over SSH starts a fake
// runner with it, as the image's runner service would (again for a new
// config). A job a runner takes runs as a Runner.Worker process on its host,
// which is what the controller's SSH look finds. A gated pool sends every
// SSH session through a forced command that can stall one chosen command,
// and a runner start can be held, so that a test can stop the controller
// between two steps of a change.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { JIT_CONFIG_PATH } from '../../controllers/runnertarget/checkrun/deliver.js';
import { sshKeysOf, startGceEmulator, type EmulatedInstance, type GceEmulator } from '../fakes/gce/server.js';
import { startGitHubEmulator, type FakeRunner, type GitHubEmulator } from '../fakes/github/server.js';
import { freePort, SshdMachine } from '../fakes/lambda/machine.js';
import { startController, type ControllerProcess } from './controller.js';
import { apply, freshNamespace, getJSON, testKubectl, type Kubectl } from './kube.js';

export const HOST_ACCOUNT = 'runner-host@leasehold-test.iam.gserviceaccount.com';
const TARGET_LABEL = 'leasehold-runnertarget';
const targetOfHost = (host: string) => host.slice(0, host.lastIndexOf('-'));

/** A host's forced command: a command containing the text in `hold` stalls until `held` goes, then fails without running. */
const commandGate = (dir: string) => `#!/bin/bash
if [ -e "${dir}/hold" ] && [[ "$SSH_ORIGINAL_COMMAND" == *"$(cat "${dir}/hold")"* ]] && mv "${dir}/hold" "${dir}/held" 2>/dev/null; then
  while [ -e "${dir}/held" ]; do sleep 0.1; done
  exit 1
fi
exec /bin/bash -c "$SSH_ORIGINAL_COMMAND"
`;

/**
 * The policy times the test controller runs with, shorter than production's
 * so that tests wait seconds, not minutes; tests assert against these.
 */
export const TEST_TIMES = {
  /** --runner-busy-flag-lag: how long a host is seen idle before it may drain. */
  busyLagMs: 5_000,
  /** --runner-follow-up: how soon a check follows an open launch. */
  followUpMs: 2_000,
  /** --runner-check-lease: how long a dead replica's check lease keeps others out. */
  checkLeaseMs: 5_000,
  /** --runner-offline-grace: how long a runner that was online may be offline before its host drains; longer than the emulator's default JIT removal lag (3 s). */
  offlineGraceMs: 4_000,
};

export interface PoolOptions {
  /** Targets whose VMs publish host keys that are not those of the machine answering. */
  impostors?: string[];
  /** Hosts show the /proc/pressure files setPressure writes instead of this machine's kernel's. */
  pressureFiles?: boolean;
  /** --runner-sample-window-scale (default 0.01: samples count 3 to 4.5 s apart). */
  sampleWindowScale?: number;
  /** Every SSH session on the hosts goes through a gate (a forced command), so that holdCommand can stall one. */
  gated?: boolean;
}

/** The "some" stall percentages a host's /proc/pressure/{cpu,memory,io} show (avg10, avg60 and avg300 alike). */
export interface HostPressure {
  cpu: number;
  memory: number;
  io: number;
}

export interface JobOnHost {
  host: string;
  jobId: number;
  startedAt: number;
  endedAt?: number;
}

export interface RunnerTargetPool {
  gce: GceEmulator;
  gh: GitHubEmulator;
  kubectl: Kubectl;
  ns: string;
  controller: ControllerProcess;
  controllerArgs: string[];
  machines: Map<string, SshdMachine>;
  /** The fake runner each host started, by host name (the latest, after a new config). */
  runners: Map<string, FakeRunner>;
  /** Called for every runner a host starts; set by a test to have runners take jobs. */
  onRunner: ((host: string, runner: FakeRunner) => void) | undefined;
  /** Jobs that ran or run on hosts, in the order they started. */
  jobs: JobOnHost[];
  /** Starts the controller (stopping the one running, if any) with the pool's flags and `extra`. */
  startController(extra?: string[]): Promise<ControllerProcess>;
  /** Creates or updates RunnerTarget `name` following `repo` (checked once, checkInterval 1h, unless `over` says otherwise). */
  target(name: string, repo: string, over?: Record<string, unknown>): Promise<void>;
  get(name: string): Promise<any>;
  events(name: string): Promise<any[]>;
  must(args: string[], input?: string): Promise<string>;
  vmsOf(name: string): EmulatedInstance[];
  runnersOf(name: string): ReturnType<GitHubEmulator['runners']>;
  /** The most VMs target `name` had at once, as sampled every 50 ms and at every boot. */
  peakVMs(name: string): number;
  /** A process that looks like the runner's job process (Runner.Worker under the login user's home) on host `name`. */
  spawnWorker(name: string): ChildProcess;
  /** Host `name`'s runner takes the oldest job it fits, which runs as a Runner.Worker process there. */
  takeJob(name: string): JobOnHost | undefined;
  /** The job on host `name` ends: its process exits, then the runner reports it (and GitHub removes the ephemeral runner). */
  finishJob(name: string): Promise<void>;
  /** What host `name`'s /proc/pressure files show from now on (a pool started with pressureFiles). */
  setPressure(name: string, pressure: HostPressure): void;
  /** Stalls the next SSH command containing `text` on a host of target `name` (a pool started with gated); `held()` once one is stalled; release() makes it fail without running. */
  holdCommand(name: string, text: string): { held(): boolean; release(): void };
  /** Keeps the hosts of target `name` from starting a runner from a new config until released. */
  holdRunners(name: string): { release(): void };
  /** The runner config on host `vm`, if there. */
  configOn(vm: string): string | undefined;
  /** Sets every RunnerTarget's checkInterval to 1h: a finished test's pool then costs the tests after it no checks. */
  quiet(): Promise<void>;
  stop(): Promise<void>;
}

/** A RunnerTarget spec on the emulators, following one repository, with one check when created (checkInterval 1h) unless over says otherwise. */
export function targetSpec(gce: GceEmulator, gh: GitHubEmulator, repo: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    github: { org: gh.org, repositories: [`${gh.org}/${repo}`], tokenSecretRef: { name: 'gh-token' }, apiURL: gh.url },
    gce: {
      project: gce.project,
      zones: ['us-central1-a', 'us-central1-b'],
      machineTypeTiers: [{ machineType: 'e2-standard-4', pricePerHour: 0.05 }],
      serviceAccount: HOST_ACCOUNT,
      credentialsSecretRef: { name: 'gce-key' },
      endpoint: gce.url,
    },
    floor: 0,
    maxHosts: 1,
    dailyBudgetUSD: 10,
    checkInterval: '1h',
    ...over,
  };
}

/**
 * The controller flags that let targets send credentials to the emulators:
 * loopback http allowed for tests, and the emulators' URLs in the allow-lists
 * (the controller's defaults list only the public endpoints).
 */
export function emulatorEndpointArgs(gce: { url: string; tokenUrl: string }, gh: { url: string }): string[] {
  return ['--allow-loopback-endpoints', '--allowed-github-endpoints', gh.url, '--allowed-gce-endpoints', gce.url, '--allowed-gce-token-endpoints', gce.tokenUrl];
}

/**
 * A controller with the rights `kubeconfig` gives, reaching hosts as this
 * machine's user on `sshPort`, sending credentials to the emulators only,
 * checking every few seconds.
 */
export function startEmulatedRunnerController(kubeconfig: string, namespace: string, sshPort: number, gce: GceEmulator, gh: GitHubEmulator): Promise<ControllerProcess> {
  return startController(kubeconfig, ['--no-leader-elect', '--namespace', namespace,
    '--runner-ssh-user', userInfo().username, '--runner-ssh-port', String(sshPort), '--runner-sample-window-scale', '0.01', '--runner-follow-up', '2s',
    ...emulatorEndpointArgs(gce, gh), ...TEST_CHECK_INTERVAL_ARGS]);
}

/** The GitHub token and Compute Engine key Secrets `targetSpec` names, in `ns`. */
export async function targetSecrets(kubectl: Kubectl, ns: string, gce: GceEmulator, gh: GitHubEmulator): Promise<void> {
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gh-token', namespace: ns }, stringData: { token: gh.token } }));
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gce-key', namespace: ns }, stringData: { 'key.json': JSON.stringify(gce.serviceAccountKey) } }));
}

/**
 * Check intervals a tenth of what a spec says: the schema's shortest
 * checkInterval (30s) then checks every 3 s, so tests wait seconds.
 */
export const TEST_CHECK_INTERVAL_ARGS = ['--runner-check-interval-scale', '0.1'];

export const condition = (t: any, type: string) => (t?.status?.conditions ?? []).find((c: any) => c.type === type);

export async function startRunnerTargetPool(prefix: string, opts: PoolOptions = {}): Promise<RunnerTargetPool> {
  const kubectl = testKubectl();
  const root = await mkdtemp(join(tmpdir(), `${prefix}-hosts-`));
  const sshPort = await freePort();
  const machines = new Map<string, SshdMachine>();
  const runners = new Map<string, FakeRunner>();
  const configs = new Map<string, string>();
  const workers = new Map<string, ChildProcess>();
  const peaks = new Map<string, number>();
  const runnerHolds = new Set<string>();
  const impostors = new Set(opts.impostors ?? []);
  const sessionPath = opts.pressureFiles ? writeKernelFilesShim(join(root, 'bin')) : undefined;
  const decoyKeys = impostors.size
    ? (await SshdMachine.create({ dir: join(root, 'decoy'), address: '127.0.0.1', port: sshPort, authorizedKeys: [], hostKeys: [], comment: 'decoy' })).hostKeys
    : [];
  let gce: GceEmulator;
  const samplePeaks = () => {
    const now = new Map<string, number>();
    for (const i of gce.instances()) now.set(i.labels[TARGET_LABEL] ?? '', (now.get(i.labels[TARGET_LABEL] ?? '') ?? 0) + 1);
    for (const [t, n] of now) peaks.set(t, Math.max(n, peaks.get(t) ?? 0));
  };
  gce = await startGceEmulator({
    onInstanceRunning: async (i) => {
      samplePeaks();
      let keys = sshKeysOf(i);
      if (opts.gated) {
        const gate = join(root, `${i.name}.gate`);
        writeFileSync(gate, commandGate(join(root, i.name)), { mode: 0o700 });
        keys = keys.map((k) => `command="${gate}" ${k}`);
      }
      const m = await SshdMachine.create({ dir: join(root, i.name), address: i.address, port: sshPort, authorizedKeys: keys, hostKeys: [], comment: `gce-${i.name}`, ...(sessionPath ? { sessionPath } : {}) });
      await m.start();
      machines.set(i.name, m);
      return { hostKeys: impostors.has(i.labels[TARGET_LABEL] ?? '') ? decoyKeys : m.hostKeys, sshPort };
    },
    onInstanceGone: async (i) => {
      // The VM's runner process dies with it: GitHub sees the runner go offline.
      runners.get(i.name)?.goOffline();
      workers.get(i.name)?.kill('SIGKILL');
      await machines.get(i.name)?.stop();
    },
  });
  const gh = await startGitHubEmulator();
  const ns = await freshNamespace(kubectl, prefix);
  const controllerArgs = ['--no-leader-elect', '--namespace', ns, '--watch-namespace', ns,
    '--runner-ssh-user', userInfo().username, '--runner-ssh-port', String(sshPort), '--runner-sample-window-scale', String(opts.sampleWindowScale ?? 0.01),
    '--runner-busy-flag-lag', `${TEST_TIMES.busyLagMs}ms`, '--runner-follow-up', `${TEST_TIMES.followUpMs}ms`, '--runner-check-lease', `${TEST_TIMES.checkLeaseMs}ms`,
    '--runner-offline-grace', `${TEST_TIMES.offlineGraceMs}ms`, ...emulatorEndpointArgs(gce, gh), ...TEST_CHECK_INTERVAL_ARGS];

  const pool: RunnerTargetPool = {
    gce,
    gh,
    kubectl,
    ns,
    controller: undefined as unknown as ControllerProcess,
    controllerArgs,
    machines,
    runners,
    onRunner: undefined,
    jobs: [],
    startController: async (extra = []) => {
      await pool.controller?.stop();
      return (pool.controller = await startController(process.env.E2E_KUBECONFIG!, [...controllerArgs, ...extra]));
    },
    target: async (name, repo, over = {}) => {
      // One check when created, none after within a test: each test looks at exactly one check.
      const spec = targetSpec(gce, gh, repo, { maxHosts: 2, ...over });
      await apply(kubectl, JSON.stringify({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'RunnerTarget', metadata: { name, namespace: pool.ns }, spec }));
    },
    get: (name) => getJSON(kubectl, ['runnertarget', name, '-n', pool.ns]),
    events: async (name) => (await getJSON(kubectl, ['events', '-n', pool.ns, '--field-selector', `involvedObject.name=${name}`]))?.items ?? [],
    must: async (args, input) => {
      const r = await kubectl(args, input);
      if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
      return r.stdout;
    },
    vmsOf: (name) => gce.instances().filter((i) => i.labels[TARGET_LABEL] === name),
    runnersOf: (name) => gh.runners().filter((r) => r.name.startsWith(`${name}-`)),
    peakVMs: (name) => peaks.get(name) ?? 0,
    spawnWorker: (name) => {
      const home = machines.get(name)!.home;
      return spawn('bash', ['-c', `exec -a "${home}/actions-runner/bin/Runner.Worker" sleep 600`], { stdio: 'ignore' });
    },
    takeJob: (name) => {
      const job = runners.get(name)?.takeJob();
      if (!job) return undefined;
      workers.set(name, pool.spawnWorker(name));
      const taken: JobOnHost = { host: name, jobId: job.id, startedAt: Date.now() };
      pool.jobs.push(taken);
      return taken;
    },
    finishJob: async (name) => {
      const worker = workers.get(name);
      if (worker && worker.exitCode === null && worker.signalCode === null) {
        const exited = new Promise((r) => worker.once('exit', r));
        worker.kill('SIGKILL');
        await exited;
      }
      workers.delete(name);
      for (const j of pool.jobs) if (j.host === name && j.endedAt === undefined) j.endedAt = Date.now();
      runners.get(name)?.finishJob('success');
    },
    setPressure: (name, pressure) => {
      const m = machines.get(name);
      if (!m) throw new Error(`no machine ${name}`);
      if (!sessionPath) throw new Error('the pool was started without pressureFiles');
      const dir = join(m.dir, 'kernel', 'proc', 'pressure');
      mkdirSync(dir, { recursive: true });
      for (const kind of ['cpu', 'memory', 'io'] as const) {
        const v = pressure[kind].toFixed(2);
        const file = join(dir, kind);
        // Whole files only: a probe reading meanwhile sees the old one or the new one.
        writeFileSync(`${file}.new`, `some avg10=${v} avg60=${v} avg300=${v} total=${Math.round(pressure[kind] * 1e6)}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n`);
        renameSync(`${file}.new`, file);
      }
    },
    holdCommand: (name, text) => {
      if (!opts.gated) throw new Error('the pool was started without gated');
      const dirs = () => [...machines.keys()].filter((vm) => targetOfHost(vm) === name).map((vm) => join(root, vm));
      for (const d of dirs()) writeFileSync(join(d, 'hold'), text);
      return {
        held: () => dirs().some((d) => existsSync(join(d, 'held'))),
        release: () => {
          for (const d of dirs()) for (const f of ['hold', 'held']) rmSync(join(d, f), { force: true });
        },
      };
    },
    ...runnerHostControls(machines, runnerHolds),
    quiet: async () => {
      const names = JSON.parse(await pool.must(['get', 'runnertargets', '-n', pool.ns, '-o', 'json'])).items.map((t: any) => t.metadata.name);
      for (const name of names) await pool.must(['patch', 'runnertarget', name, '-n', pool.ns, '--type=merge', '-p', '{"spec":{"checkInterval":"1h"}}']);
    },
    stop: async () => {
      clearInterval(hostsRunning);
      // A command still stalled at a gate would outlive its host.
      for (const vm of machines.keys()) for (const f of ['hold', 'held']) rmSync(join(root, vm, f), { force: true });
      for (const w of workers.values()) w.kill('SIGKILL');
      await pool.controller?.stop();
      await Promise.all([...machines.values()].map((m) => m.stop()));
      await gce.stop();
      await gh.stop();
      await kubectl(['delete', 'namespace', ns, '--wait=false']);
    },
  };

  // Each host runs its runner from the config once it is there, and again from a new one, as the image's runner service does.
  const hostsRunning = setInterval(() => {
    samplePeaks();
    for (const [name, m] of machines) {
      const file = join(m.home, JIT_CONFIG_PATH);
      if (runnerHolds.has(targetOfHost(name)) || !existsSync(file)) continue;
      const config = readFileSync(file, 'utf8');
      if (configs.get(name) === config) continue;
      configs.set(name, config);
      try {
        const runner = gh.startRunner(config);
        runners.set(name, runner);
        pool.onRunner?.(name, runner);
      } catch {
        // A config whose runner was removed meanwhile: the runner service fails, as it would.
      }
    }
  }, 50);

  await targetSecrets(kubectl, ns, gce, gh);
  await pool.startController();
  return pool;
}

/**
 * A `head` the hosts' sessions find first: a file under the machine's
 * kernel/ (setPressure) stands in for the kernel's file of that path, named
 * as the kernel's in the "==> FILE <==" headers; any other file is read as is.
 */
function writeKernelFilesShim(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const script = `#!/bin/bash
fake="\${LEASEHOLD_HOME%/home}/kernel"
opts=()
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n | -c) opts+=("$1" "$2"); shift 2 ;;
    -*) opts+=("$1"); shift ;;
    *) files+=("$1"); shift ;;
  esac
done
if [ \${#files[@]} -eq 0 ]; then command -p head "\${opts[@]}"; exit; fi
rc=0
n=0
for f in "\${files[@]}"; do
  src="$f"
  [ -f "$fake$f" ] && src="$fake$f"
  if [ ! -r "$src" ]; then command -p head "\${opts[@]}" "$f"; rc=1; continue; fi
  if [ \${#files[@]} -gt 1 ]; then [ $n -eq 0 ] || echo; echo "==> $f <=="; fi
  n=$((n + 1))
  command -p head "\${opts[@]}" "$src" || rc=1
done
exit $rc
`;
  writeFileSync(join(dir, 'head'), script);
  chmodSync(join(dir, 'head'), 0o755);
  return dir;
}

/** The two host controls both runner pools offer: hold a target's runners back, and read a host's runner config. */
export function runnerHostControls(machines: ReadonlyMap<string, { home: string }>, runnerHolds: Set<string>) {
  return {
    holdRunners: (name: string) => {
      runnerHolds.add(name);
      return { release: () => void runnerHolds.delete(name) };
    },
    configOn: (vm: string) => {
      const m = machines.get(vm);
      const file = m ? join(m.home, JIT_CONFIG_PATH) : '';
      return m && existsSync(file) ? readFileSync(file, 'utf8') : undefined;
    },
  };
}
