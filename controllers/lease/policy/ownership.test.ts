import { describe, expect, it } from '@jest/globals';
import type { Lease } from '../../../src/api/index.js';
import type { Phase } from '../machine.js';
import { ownershipOf } from './ownership.js';
import type { LeaseRecord } from '../../../src/kube/leaserecords.js';

const lease = (stamp?: string) => ({ metadata: { uid: 'u', ...(stamp ? { annotations: { 'leasehold.dev/installation': stamp } } : {}) } }) as unknown as Lease;
const record = (installation?: string) => ({ uid: 'u', machineName: 'leasehold-inst0001-0123abcd', ...(installation ? { installation } : {}) }) as LeaseRecord;

describe('which installation acts on a Lease', () => {
  it.each<[string, string | undefined, Phase, LeaseRecord | undefined, ReturnType<typeof ownershipOf>]>([
    ['stamped by this one', 'inst0001', 'Ready', undefined, { kind: 'ours' }],
    ['stamped by this one, with its record', 'inst0001', 'Ready', record('inst0001'), { kind: 'ours' }],
    ['stamped by another', 'other001', 'Ready', undefined, { kind: 'others', stamp: 'other001' }],
    ['stamped by another, Pending', 'other001', 'Pending', undefined, { kind: 'others', stamp: 'other001' }],
    ['new, nobody stamped it yet', undefined, 'Pending', undefined, { kind: 'stamp' }],
    ['from before stamps, this one holds its record', undefined, 'Ready', record('inst0001'), { kind: 'stamp' }],
    ['from before stamps, its record from before records carried an installation', undefined, 'Releasing', record(), { kind: 'stamp' }],
    ['stamped by another while this one\'s record holds its machine', 'other001', 'Ready', record('inst0001'), { kind: 'stamp', conflict: 'other001' }],
    ['stamped by another, a record from before records were stamped', 'other001', 'Ready', record(), { kind: 'others', stamp: 'other001' }],
    ['holds a machine, no stamp, no record here', undefined, 'Ready', undefined, { kind: 'others' }],
    ['ended, no stamp, no record here', undefined, 'Released', undefined, { kind: 'others' }],
  ])('%s', (_what, stamp, phase, rec, want) => {
    expect(ownershipOf(lease(stamp), phase, rec, 'inst0001')).toEqual(want);
  });
});
