// One namespace with a Lambda emulator account and a command Offer on the
// hook provider (real sshd machines), and the controller flags both suites
// of crash tests use.
import { mkdtempSync, readFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLambdaEmulator, type CatalogEntry, type LambdaEmulator, type LambdaEmulatorOptions } from '../fakes/lambda/server.js';
import { startController } from '../support/controller.js';
import { apply, freshNamespace, getJSON, testKubectl, waitFor, type Kubectl } from '../support/kube.js';
import { sshdCommands } from '../support/leases.js';
import { HOOK_PROVIDER, LeaseAPI, pgrep, Restartable } from '../support/chaos.js';

export const small = (name: string, cents: number, regions: string[]): CatalogEntry => ({
  name,
  description: name,
  gpu_description: '',
  price_cents_per_hour: cents,
  specs: { vcpus: Math.min(1, cpus().length), memory_gib: 1, storage_gib: 10, gpus: 0 },
  regions,
});

export interface Harness {
  kubectl: Kubectl;
  api: LeaseAPI;
  ns: string;
  emu: LambdaEmulator;
  apiKey: string;
  lambdaOffer: string;
  commandOffer: string;
  machines: string;
  kubeconfig: string;
  controller(extra?: string[], env?: Record<string, string>): Restartable;
  /** The name the namespace's controller gives the machine of a lease ID: leasehold-<installation id>-<lease id>. */
  machineName(leaseID: string): Promise<string>;
  cleanup(ctls: Restartable[]): Promise<void>;
}

export const COUNTED: { name: string; labels?: Record<string, string> }[] = [
  { name: 'leasehold_launch_duration_seconds_count', labels: { provider: 'lambda' } },
  { name: 'leasehold_launch_duration_seconds_count', labels: { provider: 'command' } },
  { name: 'leasehold_provider_requests_total', labels: { provider: 'command', operation: 'acquire' } },
  { name: 'leasehold_release_failures_total' },
];

export async function harness(prefix: string, opts: { kubeconfig?: string; binDir?: string; emulator?: LambdaEmulatorOptions; commandEnv?: string[] } = {}): Promise<Harness> {
  const kubeconfig = opts.kubeconfig ?? process.env.E2E_KUBECONFIG!;
  const kubectl = testKubectl(kubeconfig, opts.binDir ?? process.env.E2E_BIN_DIR!);
  const api = new LeaseAPI(kubeconfig);
  const ns = await freshNamespace(kubectl, prefix);
  const machines = mkdtempSync(join(tmpdir(), 'leasehold-rel-machines-'));
  const suffix = `${prefix}-${Date.now().toString(36)}`;
  const emu = await startLambdaEmulator({ bootMs: 300, terminateMs: 300, launchIntervalMs: 200, catalog: [small('cpu_1x_rel', 40, ['us-east-1'])], ...opts.emulator });
  const apiKey = emu.addAccount(prefix);
  await apply(kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'lambda', namespace: ns }, stringData: { apiKey } }));
  const lambdaOffer = `lambda-${suffix}`;
  const commandOffer = `sshd-${suffix}`;
  await apply(kubectl, JSON.stringify({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Offer',
    metadata: { name: lambdaOffer },
    spec: { lambda: { apiKeySecretRef: { name: 'lambda', namespace: ns }, endpoint: emu.url, login: emu.sshUser, sshPort: emu.sshPort }, idleTimeout: '10m', maxLifetime: '1h' },
  }));
  await apply(kubectl, JSON.stringify({
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Offer',
    metadata: { name: commandOffer },
    spec: { command: { ...sshdCommands(opts.commandEnv ?? [], HOOK_PROVIDER), shape: { os: 'linux', arch: 'amd64', cpus: 1 } }, pricePerHour: 0, idleTimeout: '10m', maxLifetime: '1h' },
  }));
  const h: Harness = {
    kubectl,
    api,
    ns,
    emu,
    apiKey,
    lambdaOffer,
    commandOffer,
    machines,
    kubeconfig,
    controller: (extra = ['--no-leader-elect'], env = {}) =>
      new Restartable(
        () =>
          startController(kubeconfig, [
            '--watch-namespace', ns, '--namespace', ns, '--leader-election-namespace', ns,
            '--max-leases', '40', '--concurrency', '12', '--check-interval', '2s', '--acquire-timeout', '90s',
            '--lambda-list-interval', '2s', '--lambda-poll-interval', '200ms', '--lambda-launch-interval', '200ms',
            // Past the longest launch a suite holds (33 s), so that a held launch is adopted, never doubled.
            '--lambda-launch-settle', '40s',
            ...extra,
          ], { LEASEHOLD_MACHINES_DIR: machines, ...env }),
        COUNTED,
      ),
    async machineName(leaseID) {
      const secret = await getJSON(kubectl, ['-n', ns, 'secret', 'leasehold-installation']);
      return `leasehold-${Buffer.from(secret.data.id, 'base64').toString()}-${leaseID}`;
    },
    async cleanup(ctls) {
      for (const c of ctls) await c.kill().catch(() => undefined);
      await kubectl(['delete', 'offers.leasehold.dev', lambdaOffer, commandOffer, '--ignore-not-found', '--wait=false']);
      // Anything left is a failure the test has already reported; do not leave processes behind.
      for (const pid of pgrep(`${machines}/.*/sshd_config`)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      await emu.stop();
    },
  };
  await waitFor('Lambda Offer listed', async () => {
    const s = (await getJSON(kubectl, ['offers.leasehold.dev', lambdaOffer]))?.status;
    return s?.conditions?.find((c: any) => c.type === 'Ready')?.status === 'True';
  }, 30_000).catch(() => undefined);
  return h;
}

/** Processes a suite must not leave: controllers of its namespace, sshd of its machines, emulator sshd. */
export function processesLeft(h: Harness, ctls: Restartable[]): string[] {
  const left: string[] = [];
  for (const c of ctls) if (c.alive()) left.push(`controller ${c.ctl!.child.pid}`);
  for (const pid of pgrep(`${h.machines}/.*/sshd_config`)) left.push(`sshd ${pid}`);
  for (const pid of pgrep(`${h.emu.dir}/`)) left.push(`emulator machine process ${pid}`);
  for (const pid of pgrep(`--watch-namespace ${h.ns}`)) left.push(`controller process ${pid}`);
  return left;
}

export const controllerLog = (c: Restartable) => c.logs.map((f) => readFileSync(f, 'utf8')).join('\n');
