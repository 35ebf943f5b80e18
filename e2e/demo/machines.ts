// The demo's machines: sshd processes on this host, so the Offer claims what
// the agent will measure here, and what is left is released by the provider.
import { execFile, execFileSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { promisify } from 'node:util';
import { block, say } from './output.js';

const execFileP = promisify(execFile);

/** What the agent will measure, so the Offer claims nothing the machine does not have. */
export function localShape(): { os: 'linux'; arch: 'amd64' | 'arm64'; cpus: number } {
  if (process.platform !== 'linux') throw new Error(`the demo's machines are local sshd processes and need Linux, not ${process.platform}`);
  const arch = process.arch === 'x64' ? 'amd64' : process.arch === 'arm64' ? 'arm64' : undefined;
  if (!arch) throw new Error(`CPU architecture ${process.arch} is neither amd64 nor arm64`);
  // The agent counts CPUs with nproc (OMP_NUM_THREADS unset); CPUs are a floor, so this claim holds.
  const env = { ...process.env };
  delete env.OMP_NUM_THREADS;
  delete env.OMP_THREAD_LIMIT;
  let cpus = 1;
  try {
    cpus = Number(execFileSync('nproc', { env, encoding: 'utf8' }).trim()) || 1;
  } catch {
    // keep 1
  }
  return { os: 'linux', arch, cpus };
}

/** Runs the provider's release for every machine directory left in the demo's machines dir. */
export async function releaseLeftoverMachines(provider: string, machinesDir: string | undefined): Promise<boolean> {
  if (!machinesDir) return true;
  let names: string[];
  try {
    names = (await readdir(machinesDir)).filter((n) => !n.startsWith('.'));
  } catch {
    return true;
  }
  let ok = true;
  for (const id of names) {
    say(`releasing machine ${id} with the provider's release command`);
    const env: NodeJS.ProcessEnv = { ...process.env, LEASEHOLD_LEASE_ID: id, LEASEHOLD_MACHINES_DIR: machinesDir, LEASEHOLD_LEASE_STATE: '' };
    for (const k of Object.keys(env)) if (k.startsWith('SSHD_MACHINE_')) delete env[k];
    try {
      const { stderr } = await execFileP(provider, ['release'], { env, timeout: 30_000 });
      if (stderr.trim()) block(stderr);
    } catch (err) {
      ok = false;
      say(`release of ${id} failed: ${String(err)}`);
    }
  }
  return ok;
}
