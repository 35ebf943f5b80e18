// The maxLeases slots found by walking every cached Lease: what the Slots
// ledger once did on each decision, kept as the oracle its tests compare with.
import type { Lease } from '../../../src/api/index.js';
import { cachedSlot, type Slot } from '../phases/pending.js';

export function slotsByScan(leases: readonly Lease[], claimed: ReadonlyMap<string, Slot>, installationID: string, except: string): Map<string, Slot> {
  const slots = new Map(claimed);
  for (const l of leases) {
    const uid = l.metadata?.uid ?? '';
    const state = cachedSlot(l, installationID);
    if (state === 'ended') slots.delete(uid);
    else if (state) slots.set(uid, state);
  }
  slots.delete(except);
  return slots;
}
