// The cli phase: `leasehold run` on a Ready Lease against plain `ssh` to the
// same sshd machine, from the command's start to the remote process's start
// (see bench/README.md). The machine is this host, so one clock serves both.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startController } from '../e2e/support/controller.js';
import { G, api, controllerKeySecret, env, listLeases, log, namespace, offer, quantiles, results, sharedMachine, stopSharedMachine, waitUntil, work } from './support.js';

const RUNS = env('BENCH_CLI_RUNS', 20);
/** What npm installs as `leasehold` (package.json bin), so the default follows the build wherever it writes the CLI. */
const INSTALLED = (JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin.leasehold!;
/** The CLI builds to measure, comma-separated; each is run as its own program (shebang), as an installed CLI is. */
const PROGRAMS = (process.env.BENCH_CLI ?? join(process.cwd(), INSTALLED)).split(',').filter(Boolean);

const exec = promisify(execFile);

/** Milliseconds from spawning `command` to the remote `date +%s%N` it ran. */
async function startDelay(command: string, args: string[], environment: NodeJS.ProcessEnv): Promise<number> {
  const t0 = Date.now();
  const { stdout } = await exec(command, args, { env: environment });
  return Number(BigInt(stdout.trim()) / 1000n) / 1000 - t0;
}

const rounded = (q: ReturnType<typeof quantiles>) => ({ p50: Math.round(q.p50), p90: Math.round(q.p90), min: Math.round(q.min), max: Math.round(q.max) });

export async function cliPhase() {
  const ns = await namespace('bench-cli');
  const pub = await controllerKeySecret(ns);
  const machine = sharedMachine('cli', pub);
  await offer('bench-cli', { command: { acquire: machine.acquire, release: machine.release, shape: { os: 'linux', arch: process.arch === 'arm64' ? 'arm64' : 'amd64', cpus: 1 } }, pricePerHour: 0, idleTimeout: '1h', maxLifetime: '12h' });
  const ctl = await startController(api.cp.info.kubeconfig, ['--no-leader-elect', '--watch-namespace', ns, '--namespace', ns, '--max-leases', '1', '--check-interval', '1m', '--acquire-timeout', '5m'], { LEASEHOLD_LOG_LEVEL: 'info' });
  try {
    const device = mkdtempSync(join(work, 'device-'));
    const cliEnv = { ...process.env, NODE_OPTIONS: '', KUBECONFIG: api.cp.info.kubeconfig, XDG_CONFIG_HOME: device, LEASEHOLD_NAMESPACE: ns };
    const runArgs = ['run', '-n', ns, '--where', 'cpus>=1', '--', 'date', '+%s%N'];
    // The first run makes the device key and the Lease and waits for it to be Ready: not measured.
    await exec(PROGRAMS[0]!, runArgs, { env: cliEnv });
    await waitUntil('the Lease Ready', async () => (await listLeases(ns)).some((l) => l.status?.phase === 'Ready' || l.status?.phase === 'Idle'), 5 * 60_000, 500);
    const [lease] = await listLeases(ns);
    const ssh = lease.status.machine.ssh;
    const knownHosts = join(device, 'known_hosts');
    writeFileSync(knownHosts, `[${ssh.host}]:${ssh.port} ${ssh.hostKey}\n`);
    const key = join(device, 'leasehold', 'id_ed25519');
    const sshArgs = ['-i', key, '-o', 'IdentitiesOnly=yes', '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes', '-p', String(ssh.port), `${ssh.user}@${ssh.host}`, 'date +%s%N'];
    // One warm-up of each, so that no build pays for the first read of its files from disk.
    for (const program of PROGRAMS) await startDelay(program, runArgs, cliEnv);
    await startDelay('ssh', sshArgs, process.env);
    const plain: number[] = [];
    const cli = PROGRAMS.map(() => [] as number[]);
    // Interleaved, so that a busy second on this machine lands on every command alike.
    for (let i = 0; i < RUNS; i++) {
      plain.push(await startDelay('ssh', sshArgs, process.env));
      for (const [j, program] of PROGRAMS.entries()) cli[j]!.push(await startDelay(program, runArgs, cliEnv));
    }
    const ssh50 = quantiles(plain);
    results.cli = {
      runs: RUNS,
      note: 'milliseconds from spawning the command to the remote `date +%s%N` it ran; ratio = leasehold run / plain ssh, at p50 and p90',
      plainSsh: rounded(ssh50),
      leaseholdRun: Object.fromEntries(PROGRAMS.map((program, j) => {
        const q = quantiles(cli[j]!);
        return [program, { ...rounded(q), ratioP50: Number((q.p50 / ssh50.p50).toFixed(2)), ratioP90: Number((q.p90 / ssh50.p90).toFixed(2)) }];
      })),
    };
    log(`cli: ${JSON.stringify(results.cli)}`);
  } finally {
    await api.custom.deleteCollectionNamespacedCustomObject({ ...G, plural: 'leases', namespace: ns }).catch(() => undefined);
    await waitUntil('cli Leases gone', async () => (await listLeases(ns)).length === 0, 120_000).catch(() => undefined);
    await ctl.stop();
    stopSharedMachine(machine.dir, 'cli');
    await api.custom.deleteClusterCustomObject({ ...G, plural: 'offers', name: 'bench-cli' }).catch(() => undefined);
  }
}
