// A RunnerTarget world for tests that stop the controller at chosen moments:
// the Compute Engine and GitHub emulators, a real sshd per VM (as in
// e2e/runnertarget.test.ts), the controller process, and holds that keep a
// target's launch at one step until the test lets go: the boot (the VM stays
// STAGING), the write of the runner config over SSH (the host's command
// stalls, then fails without writing), and the start of the runner from its
// config (the file is there, the runner does not register).
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { JIT_CONFIG_PATH } from '../../controllers/runnertarget/checkrun/deliver.js';
import { sshKeysOf, startGceEmulator, type EmulatedInstance, type GceEmulator } from '../fakes/gce/server.js';
import { startGitHubEmulator, type GitHubEmulator } from '../fakes/github/server.js';
import { freePort, SshdMachine } from '../fakes/lambda/machine.js';
import { startController, type ControllerProcess } from './controller.js';
import { apply, freshNamespace, getJSON, testKubectl, type Kubectl } from './kube.js';
import { emulatorEndpointArgs, runnerHostControls, targetSpec, TEST_CHECK_INTERVAL_ARGS } from './runnertarget.js';

const TARGET_LABEL = 'leasehold-runnertarget';

/** A host-side command wrapper: the first runner-config write after `hold-delivery` appears stalls until `delivery-held` goes, then fails. */
const deliveryGate = (dir: string) => `#!/bin/bash
case "$SSH_ORIGINAL_COMMAND" in
  *jitconfig.tmp*)
    if mv "${dir}/hold-delivery" "${dir}/delivery-held" 2>/dev/null; then
      while [ -e "${dir}/delivery-held" ]; do sleep 0.1; done
      exit 1
    fi;;
esac
exec /bin/bash -c "$SSH_ORIGINAL_COMMAND"
`;

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

export interface RunnerTargetWorld {
  gce: GceEmulator;
  gh: GitHubEmulator;
  kubectl: Kubectl;
  ns: string;
  /** The flags every controller of this world starts with. */
  controllerArgs: string[];
  machines: Map<string, SshdMachine>;
  startController(): Promise<ControllerProcess>;
  /** Creates or updates RunnerTarget `name` following `repo`, one job at a time checked (checkInterval 1h) unless `over` says otherwise. */
  target(name: string, repo: string, over?: Record<string, unknown>): Promise<void>;
  get(name: string): Promise<any>;
  events(name: string): Promise<any[]>;
  vmsOf(name: string): EmulatedInstance[];
  runnersOf(name: string): ReturnType<GitHubEmulator['runners']>;
  /** Keeps the VMs of target `name` STAGING (before their sshd starts) until released. */
  holdBoot(name: string): { release(): void };
  /** Stalls the first runner-config write on target `name`'s VMs; `held()` once a write is stalled; release() makes it fail without writing. */
  holdDelivery(name: string): { held(): boolean; release(): void };
  /** Keeps the runners of target `name`'s hosts from starting from their config until released. */
  holdRunners(name: string): { release(): void };
  /** The runner config on host `vm`, if there. */
  configOn(vm: string): string | undefined;
  stop(): Promise<void>;
}

export async function startRunnerTargetWorld(prefix: string, extraArgs: string[] = []): Promise<RunnerTargetWorld> {
  const kubectl = testKubectl();
  const root = await mkdtemp(join(tmpdir(), `${prefix}-hosts-`));
  const sshPort = await freePort();
  const machines = new Map<string, SshdMachine>();
  const boots = new Map<string, ReturnType<typeof deferred>>();
  const deliveries = new Set<string>();
  const runnerHolds = new Set<string>();
  const started = new Set<string>();
  const controllers: ControllerProcess[] = [];
  const targetOf = new Map<string, string>();

  const gce = await startGceEmulator({
    onInstanceRunning: async (i) => {
      const target = i.labels[TARGET_LABEL] ?? '';
      targetOf.set(i.name, target);
      await boots.get(target)?.promise;
      const dir = join(root, i.name);
      const gate = join(root, `${i.name}.gate`);
      const keys = sshKeysOf(i);
      // Every session goes through the gate, as a host's forced command would.
      writeFileSync(gate, deliveryGate(dir), { mode: 0o700 });
      const m = await SshdMachine.create({ dir, address: i.address, port: sshPort, authorizedKeys: keys.map((k) => `command="${gate}" ${k}`), hostKeys: [], comment: `gce-${i.name}` });
      if (deliveries.has(target)) writeFileSync(join(dir, 'hold-delivery'), '');
      await m.start();
      machines.set(i.name, m);
      return { hostKeys: m.hostKeys, sshPort };
    },
    onInstanceGone: async (i) => machines.get(i.name)?.stop(),
  });
  const gh = await startGitHubEmulator();
  // Each host runs its runner from the config once it is there, as the image's runner service does.
  const hostsRunning = setInterval(() => {
    for (const [name, m] of machines) {
      const file = join(m.home, JIT_CONFIG_PATH);
      if (started.has(name) || runnerHolds.has(targetOf.get(name) ?? '') || !existsSync(file)) continue;
      started.add(name);
      try {
        gh.startRunner(readFileSync(file, 'utf8'));
      } catch {
        // The registration was removed before the runner started: a real runner fails to connect and stays down.
      }
    }
  }, 100);
  const ns = await freshNamespace(kubectl, prefix);
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gh-token', namespace: ns }, stringData: { token: gh.token } }));
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gce-key', namespace: ns }, stringData: { 'key.json': JSON.stringify(gce.serviceAccountKey) } }));
  const controllerArgs = ['--no-leader-elect', '--namespace', ns, '--watch-namespace', ns,
    '--runner-ssh-user', userInfo().username, '--runner-ssh-port', String(sshPort), '--runner-sample-window-scale', '0.01',
    ...emulatorEndpointArgs(gce, gh), ...TEST_CHECK_INTERVAL_ARGS, ...extraArgs];

  const world: RunnerTargetWorld = {
    gce,
    gh,
    kubectl,
    ns,
    controllerArgs,
    machines,
    startController: async () => {
      const c = await startController(process.env.E2E_KUBECONFIG!, controllerArgs);
      controllers.push(c);
      return c;
    },
    target: async (name, repo, over = {}) => {
      const spec = targetSpec(gce, gh, repo, over);
      await apply(kubectl, JSON.stringify({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'RunnerTarget', metadata: { name, namespace: ns }, spec }));
    },
    get: (name) => getJSON(kubectl, ['runnertarget', name, '-n', ns]),
    events: async (name) => (await getJSON(kubectl, ['events', '-n', ns, '--field-selector', `involvedObject.name=${name}`]))?.items ?? [],
    vmsOf: (name) => gce.instances().filter((i) => i.labels[TARGET_LABEL] === name),
    runnersOf: (name) => gh.runners().filter((r) => r.name.startsWith(`${name}-`)),
    holdBoot: (name) => {
      const d = deferred();
      boots.set(name, d);
      return { release: () => (boots.delete(name), d.resolve()) };
    },
    holdDelivery: (name) => {
      deliveries.add(name);
      const dirs = () => [...targetOf].filter(([, t]) => t === name).map(([vm]) => join(root, vm));
      return {
        held: () => dirs().some((d) => existsSync(join(d, 'delivery-held'))),
        release: () => {
          deliveries.delete(name);
          for (const d of dirs()) rmSync(join(d, 'delivery-held'), { force: true });
        },
      };
    },
    ...runnerHostControls(machines, runnerHolds),
    stop: async () => {
      clearInterval(hostsRunning);
      for (const d of boots.values()) d.resolve();
      for (const vm of targetOf.keys()) rmSync(join(root, vm, 'delivery-held'), { force: true });
      await Promise.all(controllers.map((c) => c.stop('SIGKILL')));
      await Promise.all([...machines.values()].map((m) => m.stop()));
      await gce.stop();
      await gh.stop();
      await kubectl(['delete', 'namespace', ns, '--wait=false']);
    },
  };
  return world;
}
