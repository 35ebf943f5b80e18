import { describe, expect, it } from '@jest/globals';
import type { Lease } from '../src/api/lease.js';
import { sshKeysHash } from '../src/api/lease.js';
import { canonicalWhere, leaseName, reusable, waitersOf, WAITERS_ANNOTATION } from './acquire.js';
import { EXIT, pendingExitCode } from './exit-codes.js';
import { keyInstalled, unusable } from './lease-use.js';
import type { DeviceKey } from './device-key.js';

const failedCheck = (reason: string) => [{ type: 'Ready', status: 'False', reason, message: 'the machine could not be reached: timeout', lastTransitionTime: '2026-01-03T00:00:00Z' }];

const lease = (name: string, where: string, status: Record<string, unknown>, extra: Partial<Lease['metadata'] & { offer: string }> = {}): Lease =>
  ({ metadata: { name, namespace: 'ml', ...extra }, spec: { where, sshKeys: [], ...(extra.offer ? { offer: extra.offer } : {}) }, status }) as unknown as Lease;

describe('which Lease a run reuses', () => {
  it.each([
    ['gpu=H100,cpus>=8', 'cpus>=8,gpu=h100', true],
    ['gpu', 'gpus>=1', true],
    ['tool=b,tool=a', 'tool=a,tool=b', true],
    ['cpus>=8', 'cpus>=9', false],
  ])('%s and %s are the same requirement: %p', (a, b, same) => {
    expect(canonicalWhere(a) === canonicalWhere(b)).toBe(same);
  });

  const leases = [
    lease('launching', 'cpus>=1', { phase: 'Launching' }),
    lease('old', 'cpus>=1', { phase: 'Ready', lastActivityAt: '2026-01-01T00:00:00Z' }),
    lease('recent', 'cpus>=1', { phase: 'Idle', lastActivityAt: '2026-01-02T00:00:00Z' }),
    lease('ended', 'cpus>=1', { phase: 'Released' }),
    lease('deleting', 'cpus>=1', { phase: 'Ready', lastActivityAt: '2026-02-01T00:00:00Z' }, { deletionTimestamp: '2026-02-01T00:00:00Z' } as never),
    lease('pending', 'cpus>=1', { phase: 'Pending' }),
    lease('other', 'gpu', { phase: 'Ready' }),
    lease('offered', 'arch=arm64', { phase: 'Launching', offer: 'arm' }),
    lease('unreachable', 'cpus>=1', { phase: 'Idle', lastActivityAt: '2026-01-03T00:00:00Z', conditions: failedCheck('MachineUnreachable') }),
    lease('mismatched', 'gpus>=2', { phase: 'Idle', conditions: failedCheck('FactsMismatch') }),
  ];
  it.each([
    ['cpus>=1', undefined, 'recent'],
    ['cpus>=1', 'nope', undefined],
    ['arch=arm64', 'arm', 'offered'],
    ['gpus>=1', undefined, 'other'],
    ['cpus>=2', undefined, undefined],
    ['gpus>=2', undefined, undefined],
  ])('--where %s --offer %s reuses %s', (where, offer, want) => {
    expect(reusable(leases, where, offer)?.metadata?.name).toBe(want);
  });

  it('prefers a Ready Lease to a Launching one, and takes a Launching one when that is all', () => {
    expect(reusable([leases[0]!], 'cpus>=1', undefined)?.metadata?.name).toBe('launching');
  });

  it.each([
    ['gpu=h100', 'gpu-h100-7f3a'],
    ['cpus>=8,arch=arm64', 'cpus-8-arch-arm64-7f3a'],
    ['tool=' + 'x'.repeat(60), `tool-${'x'.repeat(35)}-7f3a`],
  ])('a new Lease for %s is named %s', (where, want) => {
    expect(leaseName(where, () => '7f3a')).toBe(want);
  });

  it('reads the waiters annotation', () => {
    expect(waitersOf(lease('a', 'gpu', {}, { annotations: { [WAITERS_ANNOTATION]: 'r1,r2' } } as never))).toEqual(['r1', 'r2']);
    expect(waitersOf(lease('a', 'gpu', {}))).toEqual([]);
  });
});

describe('when a Lease is usable by this device', () => {
  const key = { id: 'AAAAC3NzaC1lZDI1NTE5AAAAIOvf2R3h9r4ZtqJ4Yk1sx9z1l8E8ePjG0TWOPSEmj7ZL', publicKey: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOvf2R3h9r4ZtqJ4Yk1sx9z1l8E8ePjG0TWOPSEmj7ZL me' } as DeviceKey;
  const other = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBbGq6SEvPZFnBvfNbL9mOxM6b4Hhki8B9kPcQbOQb0E phone';
  const withKeys = (keys: string[], status: Record<string, unknown>) => ({ ...lease('l', 'gpu', status), spec: { where: 'gpu', sshKeys: keys } }) as Lease;
  it.each([
    ['installed on a Ready machine', withKeys([key.publicKey], { phase: 'Ready', installedKeysHash: sshKeysHash([key.publicKey]) }), true],
    ['installed, comment changed', withKeys([key.publicKey.replace(' me', ' laptop')], { phase: 'Idle', installedKeysHash: sshKeysHash([key.publicKey.replace(' me', ' laptop')]) }), true],
    ['not yet installed (the hash is of the keys before)', withKeys([other, key.publicKey], { phase: 'Ready', installedKeysHash: sshKeysHash([other]) }), false],
    ['not in spec.sshKeys', withKeys([other], { phase: 'Ready', installedKeysHash: sshKeysHash([other]) }), false],
    ['still launching', withKeys([key.publicKey], { phase: 'Launching', installedKeysHash: sshKeysHash([key.publicKey]) }), false],
    ['installed, but the latest check failed', withKeys([key.publicKey], { phase: 'Idle', installedKeysHash: sshKeysHash([key.publicKey]), conditions: failedCheck('MachineUnreachable') }), false],
  ])('%s: %p', (_, l, want) => {
    expect(keyInstalled(l, key)).toBe(want);
  });

  const now = Date.parse('2026-03-01T00:00:00Z');
  it.each([
    [{ phase: 'Ready' }, {}, undefined],
    [{ phase: 'Idle', expiresAt: '2026-03-01T01:00:00Z' }, {}, undefined],
    [{ phase: 'Idle', expiresAt: '2026-02-28T23:59:59Z' }, {}, /reached its maxLifetime/],
    [{ phase: 'Releasing', endReason: 'IdleTimeout' }, {}, /is Releasing \(IdleTimeout\); its release is recorded/],
    [{ phase: 'Failed', reason: 'FactsMismatch', message: 'no GPU' }, {}, /Failed \(FactsMismatch: no GPU\)/],
    [{ phase: 'Ready' }, { deletionTimestamp: '2026-03-01T00:00:00Z' }, /being deleted/],
    [{ phase: 'Launching' }, {}, /is Launching, not Ready/],
    [{ phase: 'Idle', conditions: failedCheck('MachineUnreachable') }, {}, /^Lease l failed its latest check \(MachineUnreachable\): the machine could not be reached: timeout$/],
    [{ phase: 'Idle', conditions: failedCheck('FactsMismatch') }, {}, /failed its latest check \(FactsMismatch\)/],
  ])('status %j, metadata %j: %p', (status, meta, want) => {
    const got = unusable(lease('l', 'gpu', status, meta as never), now);
    if (want === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(want);
  });
});

describe('exit codes of a Pending Lease', () => {
  it.each([
    ['NoMatchingOffer', EXIT.noOfferMatches],
    ['NamespaceNotAllowed', EXIT.noOfferMatches],
    ['OverPriceCap', EXIT.priceCap],
    ['MaxLeases', EXIT.maxLeases],
    ['MaxLeasesPerNamespace', EXIT.maxLeases],
    ['InvalidSpec', EXIT.usage],
    [undefined, undefined],
  ])('%s → %p', (reason, code) => {
    expect(pendingExitCode(reason)).toBe(code);
  });

  it('gives each refusal its own code, apart from the usage code', () => {
    const codes = [EXIT.noOfferMatches, EXIT.priceCap, EXIT.maxLeases, EXIT.leaseUnusable, EXIT.runFailed, EXIT.usage];
    expect(new Set(codes).size).toBe(codes.length);
  });
});
