// What SSH finds on each host at a check: whether a job process of the
// runner runs (GitHub's busy flag lags and can read false mid-job, so a
// host is deleted only after this says none), and the pressure evidence
// the tier policy reads. A host that cannot be read is 'unknown', which
// keeps it. Only reads: no guard, no receipt.
import type { RunnerHost } from '../../../src/api/index.js';
import { openHost, SSH_TIMEOUT_MS, type HostAccess } from './hostssh.js';
import type { HostProbe, Observation } from '../observation.js';
import type { TargetClients } from './providers.js';
import { EVIDENCE_FILES, parseEvidence, splitHeadOutput } from '../policy/pressure.js';

/**
 * The runner is installed under the login user's home (~/actions-runner): its
 * service process is Runner.Listener, its job process Runner.Worker. The
 * runner's cgroup (cgroup v2, from the Listener's /proc/PID/cgroup) gives its
 * memory use and OOM kills; the files are read from inside it, so head names
 * them by base name. A host without the Listener, or without cgroup v2, gives
 * the system-wide files only.
 */
export function probeCommand(cgroupRoot = '/sys/fs/cgroup'): string {
  return [
    `head -n 50 ${EVIDENCE_FILES.cpu} ${EVIDENCE_FILES.memory} ${EVIDENCE_FILES.io} 2>/dev/null`,
    `(pid=$(pgrep -of "$HOME/.*Runner[.]Listener" 2>/dev/null) && cg=$(sed -n 's/^0:://p' /proc/$pid/cgroup 2>/dev/null) && [ -n "$cg" ] && cd "${cgroupRoot}$cg" 2>/dev/null && head -n 50 ${EVIDENCE_FILES.memoryCurrent} ${EVIDENCE_FILES.memoryMax} ${EVIDENCE_FILES.memoryEvents} 2>/dev/null)`,
    `echo '==> job <=='`,
    `if pgrep -f "$HOME/.*Runner[.]Worker" >/dev/null 2>&1; then echo running; else echo none; fi`,
  ].join('; ');
}

export const PROBE_COMMAND = probeCommand();

/** Hosts worth a look: a runner may run there (or just ran, for a drained one, or ran before it went offline). */
const PROBED: readonly RunnerHost['state'][] = ['Idle', 'Busy', 'Offline', 'Draining'];

export function parseProbe(stdout: string): HostProbe {
  const files = splitHeadOutput(stdout);
  const job = files.get('job');
  const evidence = parseEvidence(files);
  return { job: job === 'running' ? 'running' : job === 'none' ? 'none' : 'unknown', ...(evidence.ok ? { pressure: evidence.value } : {}) };
}

export async function probeHosts(hosts: readonly RunnerHost[], observation: Observation, clients: TargetClients, access: HostAccess, signal?: AbortSignal): Promise<Map<string, HostProbe>> {
  const running = new Map(observation.vms.filter((v) => v.status === 'RUNNING').map((v) => [v.name, v]));
  const probes = new Map<string, HostProbe>();
  await Promise.all(
    hosts
      .filter((h) => PROBED.includes(h.state) && running.has(h.name))
      .map(async (h) => {
        try {
          const vm = running.get(h.name)!;
          const opened = await openHost(h.name, vm.zone, clients, access, signal, { address: vm.address, createdAt: vm.createdAt });
          if (!('session' in opened)) return probes.set(h.name, { job: 'unknown' });
          try {
            const r = await opened.session.exec(PROBE_COMMAND, { timeoutMs: SSH_TIMEOUT_MS, ...(signal ? { signal } : {}) });
            probes.set(h.name, r.code === 0 ? parseProbe(r.stdout) : { job: 'unknown' });
          } finally {
            opened.session.close();
          }
        } catch {
          // Unread is unknown, which keeps the host: never a reason to delete it.
          probes.set(h.name, { job: 'unknown' });
        }
      }),
  );
  return probes;
}
