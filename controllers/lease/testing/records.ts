// Lease records in memory, for tests of the reconciler and the sweep.
import type { LeaseRecord, RecordStore } from '../../../src/kube/leaserecords.js';

export class MemoryRecordStore implements RecordStore {
  readonly records = new Map<string, LeaseRecord>();
  marked = false;
  async get(uid: string) {
    return this.records.get(uid);
  }
  async put(record: LeaseRecord) {
    this.records.set(record.uid, structuredClone(record));
  }
  async delete(uid: string) {
    this.records.delete(uid);
  }
  async list() {
    return [...this.records.values()];
  }
  async adopted() {
    return this.marked;
  }
  async markAdopted() {
    this.marked = true;
  }
  evict() {}
}
