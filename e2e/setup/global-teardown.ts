import type { ControlPlane } from '../cluster/controlplane.js';

export default async function globalTeardown(): Promise<void> {
  const cp = (globalThis as { __leaseholdCP?: ControlPlane }).__leaseholdCP;
  await cp?.stop();
}
