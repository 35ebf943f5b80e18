import { describe, it, expect } from '@jest/globals';
import type { LeaseStatus } from '../../../src/api/index.js';
import { at, leaseWith, MACHINE } from '../testing/phase-input.js';
import { leaseOfRecord, recordOf, sealedLease, sealedStatus, tamperedFields, withResult } from './trust.js';

const launched: Partial<LeaseStatus> = {
  offer: 'box',
  leaseID: '0123abcd',
  machineName: 'leasehold-0123abcd',
  release: { provider: 'command', command: ['/bin/release'] },
  idleTimeout: '20m',
  expiresAt: at(3600_000),
  launch: { attempt: 1, startedAt: at(0) },
  providerState: '{"dir":"/m/0123abcd"}',
  machine: MACHINE,
};
const lease = leaseWith({ phase: 'Ready', ...launched });
const record = recordOf(lease, launched);
const other = { ssh: { host: '10.9.9.9', port: 2222, user: 'root', hostKey: 'ssh-ed25519 BBBB' } };

describe('tamperedFields', () => {
  it.each([
    ['status.release', { release: { provider: 'command', command: ['/bin/sh', '-c', 'touch /tmp/pwned'] } }],
    ['status.release', { release: { provider: 'lambda', lambda: { apiKeySecretRef: { name: 'theirs', namespace: 'ns', key: 'apiKey' }, endpoint: 'http://evil' } } }],
    ['status.machine', { machine: other }],
    ['status.providerState', { providerState: '{"dir":"/m/someone-else"}' }],
    ['status.expiresAt', { expiresAt: at(365 * 24 * 3600_000) }],
    ['status.idleTimeout', { idleTimeout: '9999h' }],
    ['status.leaseID', { leaseID: 'ffffffff' }],
    ['status.machineName', { machineName: 'leasehold-ffffffff' }],
    ['status.offer', { offer: 'dearer' }],
    ['status.launch.startedAt', { launch: { attempt: 1, startedAt: at(3600_000) } }],
  ] as [string, Partial<LeaseStatus>][])('reports %s written by someone else', (field, change) => {
    expect(tamperedFields({ ...lease.status, ...change }, record)).toEqual([field]);
  });

  it('reports nothing for status as the controller wrote it, or lagging the record, or with the API server defaults filled in', () => {
    expect(tamperedFields(lease.status, record)).toEqual([]);
    const { providerState: _s, machine: _m, ...before } = lease.status!;
    expect(tamperedFields(before, record)).toEqual([]);
    const noPort = recordOf(lease, { ...launched, machine: { ssh: { host: '10.0.0.5', user: 'u', hostKey: 'ssh-ed25519 AAAA' } } as never });
    expect(tamperedFields(lease.status, noPort)).toEqual([]);
    const lambda = { provider: 'lambda' as const, lambda: { apiKeySecretRef: { name: 'k', namespace: 'ns' }, endpoint: 'https://cloud.lambda.ai/api/v1' } };
    const lambdaRecord = recordOf(lease, { ...launched, release: lambda as NonNullable<LeaseStatus['release']> });
    expect(tamperedFields({ ...lease.status, release: { ...lambda, lambda: { ...lambda.lambda, apiKeySecretRef: { name: 'k', namespace: 'ns', key: 'apiKey' } } } }, lambdaRecord)).toEqual([]);
  });

  it('reports a providerState or machine in status before the record has one', () => {
    const intent = recordOf(lease, { ...launched, providerState: undefined, machine: undefined });
    expect(tamperedFields(lease.status, intent)).toEqual(['status.providerState', 'status.machine']);
  });
});

describe('sealedStatus and sealedLease', () => {
  it('put the record in place of every sealed field, whatever status says', () => {
    const tampered = { ...lease.status!, release: { provider: 'command' as const, command: ['/bin/evil'] }, machine: other, expiresAt: at(1e10), launch: { attempt: 1, startedAt: at(1e9) } };
    const sealed = sealedLease({ ...lease, status: tampered }, record).status!;
    expect(sealed.release).toEqual(record.release);
    expect(sealed.machine).toEqual(MACHINE);
    expect(sealed.expiresAt).toBe(record.expiresAt);
    expect(sealed.launch).toEqual({ attempt: 1, startedAt: at(0) });
    expect(sealed.phase).toBe('Ready');
  });

  it('drop sealed fields the record lacks, and all of them without a record', () => {
    const intent = recordOf(lease, { ...launched, providerState: undefined, machine: undefined });
    const sealed = sealedStatus(lease.status!, intent);
    expect(sealed.providerState).toBeUndefined();
    expect(sealed.machine).toBeUndefined();
    const none = sealedStatus(lease.status!, undefined);
    expect([none.release, none.machine, none.providerState, none.expiresAt, none.offer]).toEqual([undefined, undefined, undefined, undefined, undefined]);
    expect(none.phase).toBe('Ready');
  });
});

describe('withResult', () => {
  it("adds an acquire's result to the record, and says when there is nothing new", () => {
    const intent = recordOf(lease, { ...launched, providerState: undefined, machine: undefined });
    const next = withResult(intent, { providerState: '{"pid":1}', machine: MACHINE });
    expect(next).toMatchObject({ providerState: '{"pid":1}', machine: MACHINE });
    expect(withResult(next!, { providerState: '{"pid":1}', machine: MACHINE, message: 'x' })).toBeUndefined();
    expect(withResult(next!, { message: 'x' })).toBeUndefined();
  });
});

describe('leaseOfRecord', () => {
  it('carries what a release needs, from the record only', () => {
    const l = leaseOfRecord(record);
    expect(l.metadata).toEqual({ name: 'l', namespace: 'ns', uid: lease.metadata!.uid });
    expect(l.status).toMatchObject({ release: record.release, providerState: record.providerState, machineName: record.machineName, leaseID: record.leaseID });
  });
});
