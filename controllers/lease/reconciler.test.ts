// The reconciler with an in-memory API server and a scripted driver: what
// happens when the status write after a successful acquire fails.
import { describe, it, expect } from '@jest/globals';
import type { Lease } from '../../src/api/index.js';
import { connectionRefused, FakeAPIServer } from '../../src/kube/testing/fake-api.js';
import type { AcquireResult, LeaseDriver, MachineCheck } from './driver.js';
import type { LeaseRecord } from '../../src/kube/leaserecords.js';
import { MemoryRecordStore } from './testing/records.js';
import { leaseReconciler, seedLease, settle as settleOwners } from './testing/harness.js';

const UID = '0123abcd-0000-0000-0000-000000000000';
const settle = (r: Parameters<typeof settleOwners>[0], key: string, passes = 10) => settleOwners(r, key, [UID], passes);

/** One Lease on a pretend API server that can refuse writes of acquire results. */
function world() {
  const api = new FakeAPIServer<Lease>({ finalizer: 'leasehold.dev/release' });
  seedLease(api, { name: 'l', uid: UID });
  // refuseResult: how many writes carrying an acquire result to refuse.
  const state = { refuseResult: 0, refuseRecord: 0, acquires: 0, releases: 0 };
  api.beforeStatusWrite = (_name, body) => {
    if (state.refuseResult > 0 && body.status?.providerState) {
      state.refuseResult--;
      throw connectionRefused();
    }
  };
  // The API server being away fails the record's write of the result as well.
  const records = new (class extends MemoryRecordStore {
    override async put(record: LeaseRecord) {
      if (state.refuseRecord > 0 && record.providerState) {
        state.refuseRecord--;
        throw connectionRefused();
      }
      return super.put(record);
    }
  })();
  const driver: LeaseDriver = {
    async acquire(): Promise<AcquireResult> {
      state.acquires++;
      return { kind: 'launched', state: '{"pid":1}', machine: { ssh: { host: '10.0.0.5', port: 22, user: 'u', hostKey: 'ssh-ed25519 AAAA' } } };
    },
    async prepare(): Promise<MachineCheck> {
      return { kind: 'unreachable', message: 'booting' };
    },
    async check(): Promise<MachineCheck> {
      return { kind: 'unreachable', message: 'booting' };
    },
    async release() {
      state.releases++;
    },
  };
  const make = () => leaseReconciler(api, { driver, records });
  const first = make();
  return { ...first, fresh: make, state, lease: () => api.stored('ns', 'l')! };
}

describe('LeaseReconciler', () => {
  it('records an acquire result whose status write failed on the next pass, instead of releasing the machine as interrupted', async () => {
    const w = world();
    w.state.refuseRecord = 1;
    await w.reconciler.reconcile('ns/l');
    await w.effects.idle();
    // The intent went through, the result did not.
    expect(w.lease().status?.phase).toBe('Launching');
    expect(w.lease().status?.launch?.attempt).toBe(1);
    expect(w.lease().status?.providerState).toBeUndefined();
    expect(w.effects.get('0123abcd-0000-0000-0000-000000000000')).toMatchObject({ state: 'done', result: { kind: 'acquire', recorded: false } });

    await w.reconciler.reconcile('ns/l');
    expect(w.lease().status?.providerState).toBe('{"pid":1}');
    expect(w.lease().status?.machine?.ssh?.host).toBe('10.0.0.5');
    expect(w.lease().status?.phase).toBe('Launching');
    expect(w.state.releases).toBe(0);
    expect(w.state.acquires).toBe(1);
  });

  it('releases a Launching Lease with no recorded result that this process did not launch (after a restart)', async () => {
    const w = world();
    w.state.refuseRecord = 1;
    await w.reconciler.reconcile('ns/l');
    await w.effects.idle();
    // A second reconciler over the same server stands for the restarted controller.
    await settle(w.fresh(), 'ns/l');
    expect(w.lease().status?.endReason).toBe('LaunchInterrupted');
    expect(w.lease().status?.phase).toBe('Failed');
    expect(w.state.releases).toBe(1);
  });
});
