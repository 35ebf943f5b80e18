// Waiting for a process of a test cluster (the control plane's or the real
// node's) to become ready. A check that throws counts as not ready yet; a
// process that exits ends the wait at once, so a component that crashed fails
// with its exit code, not after the whole timeout.
import type { ChildProcess } from 'node:child_process';

export interface WaitOptions {
  /** The process whose readiness is awaited. */
  child: ChildProcess;
  /** Where its logs are, named in the error. */
  dir: string;
  timeoutMs?: number;
  /** How long between checks. */
  pollMs?: number;
}

export async function waitFor(what: string, check: () => Promise<boolean>, opts: WaitOptions): Promise<void> {
  const { child, dir, timeoutMs = 60_000, pollMs = 100 } = opts;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what}: process exited with code ${child.exitCode}; see ${dir}`);
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
  throw new Error(`${what}: not ready after ${timeoutMs} ms; see logs in ${dir}`);
}
