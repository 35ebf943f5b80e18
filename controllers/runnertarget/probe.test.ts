import { describe, expect, it } from '@jest/globals';
import { createServer } from 'node:net';
import { generateControllerKey } from '../../src/machine/keys.js';
import type { TargetClients } from './operations.js';
import { parseProbe, probeHosts } from './probe.js';
import { host, NOW, vm } from './testing/pool.js';

const psi = (some: number) => `some avg10=0.00 avg60=${some.toFixed(2)} avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0`;
const head = (files: Record<string, string>) => Object.entries(files).map(([f, t]) => `==> ${f} <==\n${t}\n`).join('\n');

describe('parseProbe', () => {
  it.each([
    ['a job process', 'running', 'running'],
    ['no job process', 'none', 'none'],
    ['an answer cut short', '', 'unknown'],
  ])('%s', (_what, job, expected) => {
    const out = head({ '/proc/pressure/cpu': psi(12), '/proc/pressure/memory': psi(0), '/proc/pressure/io': psi(3), job });
    expect(parseProbe(out)).toMatchObject({ job: expected, pressure: { cpu: { some: { avg60: 12 } }, io: { some: { avg60: 3 } } } });
  });

  it('a kernel without PSI gives no pressure evidence, but the job answer stands', () => {
    const p = parseProbe(head({ job: 'none' }));
    expect(p).toEqual({ job: 'none' });
  });
});

/** A loopback port nothing listens on: the SSH connection is refused at once. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe('probeHosts', () => {
  it.each([
    ['the address from the check\'s list: no instances.get per host', '127.0.0.1', 0],
    ['no address in the list: the VM is read for it', undefined, 1],
  ])('%s', async (_what, address, gets) => {
    const key = generateControllerKey();
    const calls = { hostKeys: 0, get: 0 };
    const gce = {
      hostKeys: async () => (calls.hostKeys++, [key.publicKey.split(' ').slice(0, 2).join(' ')]),
      get: async () => (calls.get++, { address: '127.0.0.1' }),
    };
    const clients = { gce, github: {} } as unknown as TargetClients;
    const observation = { at: NOW, jobs: [], runners: [], vms: [vm('h1', 'RUNNING', { address })], probes: new Map() };
    const probes = await probeHosts([host('h1', 'Idle')], observation, clients, { ...key, user: 'leasehold', port: await closedPort() });
    expect(calls).toEqual({ hostKeys: 1, get: gets });
    // Refused: unknown, which keeps the host.
    expect(probes.get('h1')).toEqual({ job: 'unknown' });
  });
});
