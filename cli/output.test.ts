import { describe, expect, it } from '@jest/globals';
import type { Lease } from '../src/api/lease.js';
import type { Offer } from '../src/api/offer.js';
import { idleDeadline, leaseJSON, leasesTable } from './leases.js';
import { offersTable } from './offers.js';
import { Progress, span, table } from './output.js';
import { knownHostsLine, sshArgs } from './ssh.js';

const now = Date.parse('2026-03-01T12:00:00Z');
const ready = {
  metadata: { name: 'gpu-h100-7f3a', namespace: 'ml' },
  spec: { where: 'gpu=h100', sshKeys: [] },
  status: {
    phase: 'Ready', offer: 'lambda', pricePerHour: 2.99, idleTimeout: '20m', lastActivityAt: '2026-03-01T11:50:00Z', readyAt: '2026-03-01T11:40:00Z',
    expiresAt: '2026-03-01T23:00:00Z', machine: { ssh: { host: '10.0.0.5', port: 22, user: 'ubuntu', hostKey: 'ssh-ed25519 AAAA' } },
    usage: { jobs: 0, sessions: 1, gpuProcesses: 1, busy: '1 session, 1 GPU process', at: '2026-03-01T11:50:00Z' },
  },
} as unknown as Lease;
const ended = { metadata: { name: 'old', namespace: 'ml' }, spec: { where: 'cpus>=8' }, status: { phase: 'Released', offer: 'box', endReason: 'IdleTimeout' } } as unknown as Lease;
const waiting = { metadata: { name: 'w', namespace: 'dev' }, spec: { where: 'gpu' }, status: { phase: 'Pending', reason: 'MaxLeases' } } as unknown as Lease;

describe('leasehold leases', () => {
  it('prints name, phase, where, offer, price, host, idle deadline, what keeps it busy and why it ended', () => {
    expect(leasesTable([ended, ready], now, false)).toBe(
      [
        'NAME           PHASE     WHERE     OFFER   PRICE/H  HOST                IDLE DEADLINE                  BUSY                      ENDED',
        'gpu-h100-7f3a  Ready     gpu=h100  lambda  $2.99    ubuntu@10.0.0.5:22  2026-03-01T12:10:00Z (in 10m)  1 session, 1 GPU process  -',
        'old            Released  cpus>=8   box     -        -                   -                              -                         IdleTimeout',
        '',
      ].join('\n'),
    );
  });

  it('adds the namespace with -A, and says why a Pending Lease waits', () => {
    const out = leasesTable([waiting, ready], now, true);
    expect(out.split('\n')[0]).toMatch(/^NAMESPACE\s+NAME\s+PHASE/);
    expect(out).toMatch(/^dev\s+w\s+Pending\s+gpu\s+-\s+-\s+-\s+-\s+-\s+waiting: MaxLeases$/m);
  });

  it('idle deadline: idle timeout after the last activity, or the lifetime end when sooner; none unless Ready or Idle', () => {
    expect(idleDeadline(ready)).toBe(Date.parse('2026-03-01T12:10:00Z'));
    const late = { ...ready, status: { ...ready.status, expiresAt: '2026-03-01T12:05:00Z' } } as Lease;
    expect(idleDeadline(late)).toBe(Date.parse('2026-03-01T12:05:00Z'));
    expect(idleDeadline(ended)).toBeUndefined();
  });

  it('--json gives the same fields as values', () => {
    expect(leaseJSON(ready)).toMatchObject({ name: 'gpu-h100-7f3a', phase: 'Ready', pricePerHour: 2.99, idleDeadline: '2026-03-01T12:10:00.000Z', usage: { sessions: 1, gpuProcesses: 1, busy: '1 session, 1 GPU process' }, endReason: null, ssh: { host: '10.0.0.5' } });
  });
});

describe('leasehold offers', () => {
  it('lists a command Offer with its shape and price, and each Lambda candidate', () => {
    const offers = [
      { metadata: { name: 'box' }, spec: { command: { shape: { os: 'linux', arch: 'amd64', cpus: 4 } }, pricePerHour: 0.5 }, status: { conditions: [{ type: 'Ready', status: 'True' }] } },
      {
        metadata: { name: 'lambda' }, spec: { lambda: {} },
        status: { candidates: [
          { name: 'gpu-1x-h100-sxm5', region: 'us-east-1', arch: 'amd64', cpus: 26, gpus: 1, gpuModel: 'H100', pricePerHour: 2.99, available: true },
          { name: 'gpu-8x-h100-sxm5', arch: 'amd64', cpus: 208, gpus: 8, gpuModel: 'H100', pricePerHour: 23.92, available: false, reason: 'above maxPricePerHour 10' },
        ] },
      },
    ] as unknown as Offer[];
    const out = offersTable(offers);
    expect(out).toMatch(/^box\s+command\s+linux\/amd64, 4 cpu\s+\$0\.50\s+yes$/m);
    expect(out).toMatch(/^lambda\s+gpu-1x-h100-sxm5 in us-east-1\s+amd64, 26 cpu, 1x H100\s+\$2\.99\s+yes$/m);
    expect(out).toMatch(/^lambda\s+gpu-8x-h100-sxm5\s+amd64, 208 cpu, 8x H100\s+\$23\.92\s+no \(above maxPricePerHour 10\)$/m);
  });
});

describe('output pieces', () => {
  it.each([[0, '0s'], [45_000, '45s'], [200_000, '3m20s'], [3_600_000, '1h'], [7_500_000, '2h5m']])('span(%i) = %s', (ms, want) => {
    expect(span(ms)).toBe(want);
  });

  it('aligns table columns', () => {
    expect(table(['A', 'B'], [['long', 'x'], ['s', 'y']])).toBe('A     B\nlong  x\ns     y\n');
  });

  it('progress off a terminal: one line per distinct step, no spinner or escape codes', () => {
    const out: string[] = [];
    const p = new Progress({ write: (s: string) => out.push(s), isTTY: false });
    p.step('launching');
    p.step('launching');
    p.step('waiting for the agent');
    p.note('ready after 3s');
    p.done();
    expect(out.join('')).toBe('leasehold: launching\nleasehold: waiting for the agent\nleasehold: ready after 3s\n');
  });

  it('progress on a terminal: a spinner line rewritten in place, cleared when done', () => {
    const out: string[] = [];
    const p = new Progress({ write: (s: string) => out.push(s), isTTY: true });
    p.step('launching');
    p.done();
    expect(out[0]).toMatch(/^\r\x1b\[2K. leasehold: launching$/);
    expect(out.at(-1)).toBe('\r\x1b[2K');
  });

  it('ssh: a known_hosts line for the pinned key and ssh flags that trust nothing else', () => {
    expect(knownHostsLine({ host: '10.0.0.5', port: 22, hostKey: 'ssh-ed25519 AAAA\n' })).toBe('10.0.0.5 ssh-ed25519 AAAA\n');
    expect(knownHostsLine({ host: '127.0.0.1', port: 2222, hostKey: 'ssh-ed25519 AAAA' })).toBe('[127.0.0.1]:2222 ssh-ed25519 AAAA\n');
    const args = sshArgs({ host: 'h', port: 2222, user: 'u' }, '/k', '/kh', ['uname', '-a']);
    expect(args.join(' ')).toBe('-i /k -o IdentitiesOnly=yes -o UserKnownHostsFile=/kh -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o UpdateHostKeys=no -p 2222 -- u@h uname -a');
  });
});
