// Starts one shared control plane for the e2e suite and installs the CRDs.
// Tests that break the control plane on purpose start their own. (Plain JS:
// jest loads global setup outside its module mapper, so TypeScript comes in
// through tsx.)
import { tsImport } from 'tsx/esm/api';
import { join } from 'node:path';

export default async function globalSetup() {
  const { ControlPlane } = await tsImport('../cluster/controlplane.ts', import.meta.url);
  const cp = await ControlPlane.start();
  globalThis.__leaseholdCP = cp;
  process.env.E2E_KUBECONFIG = cp.info.kubeconfig;
  process.env.E2E_BIN_DIR = cp.info.binDir;
  process.env.E2E_CP_DIR = cp.info.dir;
  const applied = await cp.kubectl(['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
  if (applied.code !== 0) throw new Error(`installing CRDs failed: ${applied.stderr}`);
  const established = await cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '-l', 'app.kubernetes.io/part-of=leasehold']);
  if (established.code !== 0) throw new Error(`CRDs not established: ${established.stderr}${established.stdout}`);
}
