// Runner hosts for RunnerTarget benchmarks: the Compute Engine and GitHub
// emulators, every VM booting a real sshd on its own loopback address that
// admits the keys of its ssh-keys metadata and publishes its host keys, and
// a fake runner started from the JIT config once it lands on the host, and
// again from each new one (what the image's runner service does). It keeps
// when each host ran and first registered, and counts the SSH logins the
// hosts accepted.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { JIT_CONFIG_PATH } from '../../controllers/runnertarget/checkrun/deliver.js';
import { sshKeysOf, startGceEmulator, type GceEmulator } from '../fakes/gce/server.js';
import { startGitHubEmulator, type FakeRunner, type GitHubEmulator } from '../fakes/github/server.js';
import { freePort, SshdMachine } from '../fakes/lambda/machine.js';

export interface RunnerHosts {
  gce: GceEmulator;
  gh: GitHubEmulator;
  /** The port every host's sshd listens on (each host has its own address). */
  sshPort: number;
  machines: ReadonlyMap<string, SshdMachine>;
  /** Host name → when its VM turned RUNNING (its sshd listening), ms since the epoch. */
  running: ReadonlyMap<string, number>;
  /** Host name → when its runner config was found on the host and its runner registered. */
  registered: ReadonlyMap<string, number>;
  /** Called for every runner a host starts; set by a bench to have runners take jobs. */
  onRunner: ((host: string, runner: FakeRunner) => void) | undefined;
  /** SSH logins all hosts (deleted ones too) have accepted so far. */
  sshLogins(): number;
  stop(): Promise<void>;
}

export async function startRunnerHosts(root: string, opts: { bootMs?: number } = {}): Promise<RunnerHosts> {
  const sshPort = await freePort();
  const machines = new Map<string, SshdMachine>();
  const running = new Map<string, number>();
  const registered = new Map<string, number>();
  const gce = await startGceEmulator({
    ...(opts.bootMs !== undefined ? { bootMs: opts.bootMs } : {}),
    onInstanceRunning: async (i) => {
      const keys = sshKeysOf(i);
      const m = await SshdMachine.create({ dir: join(root, i.name), address: i.address, port: sshPort, authorizedKeys: keys, hostKeys: [], comment: `gce-${i.name}` });
      await m.start();
      machines.set(i.name, m);
      running.set(i.name, Date.now());
      return { hostKeys: m.hostKeys, sshPort };
    },
    onInstanceGone: async (i) => machines.get(i.name)?.stop(),
  });
  const gh = await startGitHubEmulator();
  const configs = new Map<string, string>();
  const poll = setInterval(() => {
    for (const [name, m] of machines) {
      const file = join(m.home, JIT_CONFIG_PATH);
      if (!existsSync(file)) continue;
      const config = readFileSync(file, 'utf8');
      if (configs.get(name) === config) continue;
      configs.set(name, config);
      let runner: FakeRunner;
      try {
        runner = gh.startRunner(config);
      } catch {
        // A config whose runner was removed meanwhile: the runner service fails, as it would.
        continue;
      }
      if (!registered.has(name)) registered.set(name, Date.now());
      hosts.onRunner?.(name, runner);
    }
  }, 50);
  const logins = () => {
    let n = 0;
    for (const m of machines.values()) {
      try {
        n += readFileSync(join(m.dir, 'sshd.log'), 'utf8').split('Accepted publickey').length - 1;
      } catch {
        // not started yet
      }
    }
    return n;
  };
  const hosts: RunnerHosts = {
    gce,
    gh,
    sshPort,
    machines,
    running,
    registered,
    onRunner: undefined,
    sshLogins: logins,
    stop: async () => {
      clearInterval(poll);
      await Promise.all([...machines.values()].map((m) => m.stop()));
      await gce.stop();
      await gh.stop();
    },
  };
  return hosts;
}
