// The MachineAgent over SSH: pinned host key, agent install, device keys,
// measured facts. Built on src/machine.
import { connectPinned, HostKeyMismatchError } from '../../src/machine/ssh.js';
import { installAgent, probe } from '../../src/machine/agent.js';
import { errorText } from '../../src/kube/errors.js';
import type { MachineAgent, ProbeResult } from './machine-driver.js';

export function sshAgent(connectTimeoutMs = 10_000): MachineAgent {
  return {
    async probe(endpoint, key, deviceKeys, signal): Promise<ProbeResult> {
      const ssh = endpoint.ssh!;
      if (signal?.aborted) return { kind: 'unreachable', message: 'probe cancelled' };
      let session;
      try {
        session = await connectPinned({ host: ssh.host, port: ssh.port ?? 22, user: ssh.user, hostKey: ssh.hostKey, privateKey: key.privateKey, timeoutMs: connectTimeoutMs });
      } catch (err) {
        if (err instanceof HostKeyMismatchError) return { kind: 'hostKeyMismatch', message: `${err.message}; refusing the machine and releasing it` };
        return { kind: 'unreachable', message: errorText(err) };
      }
      // A cancelled probe (the Lease is being released) closes its session
      // at once rather than finishing an install nobody will use.
      const cancel = () => session.close();
      signal?.addEventListener('abort', cancel, { once: true });
      try {
        // undefined: the keys on the machine are already the wanted ones.
        await installAgent(session, { deviceKeys, controllerKey: key.publicKey });
        const p = await probe(session);
        const { busy, jobs: _jobs, sessions, gpuProcesses, gpuError, ...facts } = p;
        return { kind: 'ok', facts: facts as never, busy, sessions, gpuProcesses, ...(gpuError ? { gpuError } : {}) };
      } catch (err) {
        return { kind: 'unreachable', message: signal?.aborted ? 'probe cancelled' : errorText(err) };
      } finally {
        signal?.removeEventListener('abort', cancel);
        session.close();
      }
    },
  };
}
