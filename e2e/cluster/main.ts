// `make cluster`: runs a local control plane in the foreground until Ctrl-C.
// Prints the kubeconfig so a developer can point kubectl at it.
import { ControlPlane } from './controlplane.js';
import { join } from 'node:path';

const cp = await ControlPlane.start();
const { kubeconfig, server, binDir } = cp.info;
process.stdout.write(
  `control plane ready at ${server}\n` +
    `  export KUBECONFIG=${kubeconfig}\n` +
    `  export PATH=${binDir}:$PATH   # kubectl and helm built for this cluster\n` +
    `  logs: ${join(cp.info.dir, 'kube-apiserver.log')}, ${join(cp.info.dir, 'etcd.log')}\n` +
    `Ctrl-C stops it and removes its data.\n`,
);

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write('stopping control plane\n');
    cp.stop().then(() => process.exit(0), (err) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    });
  });
}
