// `make cluster`: runs a local control plane in the foreground until Ctrl-C.
// Prints the kubeconfig so a developer can point kubectl at it. Flags (through
// `make cluster CLUSTER_FLAGS="..."`) add the parts PeerFleet runs on.
import { ControlPlane } from './controlplane.js';
import { createFakeNodes } from './kwok.js';
import { createPeerCredential } from './peer.js';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const usage = `usage: main.ts [--controllers] [--scheduler] [--kwok] [--all] [--gpu-nodes=N] [--peer]
  --controllers   also run kube-controller-manager (Jobs, garbage collection, ServiceAccounts, namespaces)
  --scheduler     also run kube-scheduler
  --kwok          also run kwok, the kubelet of fake Nodes
  --all           all three
  --gpu-nodes=N   create N fake Nodes (kwok) with 8 nvidia.com/gpu each, named gpu-1..gpu-N
  --peer          also run a peer control plane (etcd, kube-apiserver, kube-controller-manager) with a
                  ServiceAccount that may only get/list/watch/patch Jobs in its namespace "queue"
`;

let flags;
try {
  ({ values: flags } = parseArgs({
    options: {
      controllers: { type: 'boolean' },
      scheduler: { type: 'boolean' },
      kwok: { type: 'boolean' },
      all: { type: 'boolean' },
      'gpu-nodes': { type: 'string', default: '0' },
      peer: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  }));
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${usage}`);
  process.exit(2);
}
const gpuNodes = Number(flags['gpu-nodes']);
if (flags.help) {
  process.stdout.write(usage);
  process.exit(0);
}
if (!Number.isInteger(gpuNodes) || gpuNodes < 0) {
  process.stderr.write(`--gpu-nodes takes a whole number, got ${flags['gpu-nodes']}\n${usage}`);
  process.exit(2);
}
const all = flags.all ?? false;
const withKwok = all || (flags.kwok ?? false) || gpuNodes > 0;

const planes: ControlPlane[] = [];
const stopAll = () => Promise.all(planes.map((cp) => cp.stop()));
let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write('stopping control plane\n');
    stopAll().then(() => process.exit(0), (err) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    });
  });
}

const describe = (cp: ControlPlane) => {
  const { kubeconfig, server, dir, components } = cp.info;
  const logs = ['etcd', 'kube-apiserver', ...components].map((part) => join(dir, `${part}.log`));
  const started = Object.entries(cp.info.startup).map(([part, ms]) => `${part} ${(ms / 1000).toFixed(1)}s`).join(', ');
  return `control plane ${cp.info.clusterName} ready at ${server} (${started})\n` +
    `  export KUBECONFIG=${kubeconfig}\n` +
    `  logs: ${logs.join(', ')}\n`;
};

try {
  const [ours, peer] = await Promise.all([
    ControlPlane.start({
      controllers: all || flags.controllers,
      scheduler: all || flags.scheduler,
      kwok: withKwok,
    }).then((cp) => (planes.push(cp), cp)),
    flags.peer ? ControlPlane.start({ name: 'peer', controllers: true }).then((cp) => (planes.push(cp), cp)) : undefined,
  ]);
  if (gpuNodes > 0) {
    const nodes = Array.from({ length: gpuNodes }, (_, i) => ({ name: `gpu-${i + 1}`, gpus: 8 }));
    await createFakeNodes(ours.kubectl.bind(ours), nodes);
  }
  let out = describe(ours) + `  export PATH=${ours.info.binDir}:$PATH   # kubectl and helm built for this cluster\n`;
  if (gpuNodes > 0) out += `  fake GPU nodes: gpu-1..gpu-${gpuNodes} (kubectl get nodes)\n`;
  if (peer) {
    const cred = await createPeerCredential(peer, { namespace: 'queue' });
    out += describe(peer) +
      `  the lender's view (jobs in namespace queue only): KUBECONFIG=${cred.kubeconfig}\n`;
  }
  process.stdout.write(`${out}Ctrl-C stops it and removes its data.\n`);
} catch (err) {
  process.stderr.write(`${String(err)}\n`);
  await stopAll();
  process.exit(1);
}
