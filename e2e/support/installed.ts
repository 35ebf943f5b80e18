// Leasehold installed on the real node, shared by e2e/installed.test.ts and
// `make demo-installed`: the helm arguments for the node's image and the
// "cloud" its command Offers rent from (e2e/node/machines.mjs inside the
// node's network namespace, reached through a provider script from the
// chart's providerScripts ConfigMap).
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { NODE_IP, type NodeImages, type RealNode } from '../cluster/node.js';

const machinesPort = 8070;
/** Where the chart mounts its providerScripts ConfigMap in the controller pods. */
export const NODE_PROVIDER = '/etc/leasehold/providers/netns-machine.sh';

/** Starts the machine service in the node's namespace; its machines live under machinesDir. */
export function startMachineService(node: RealNode, machinesDir: string): Promise<ChildProcess> {
  return node.service('machines', process.execPath,
    [join(process.cwd(), 'e2e/node/machines.mjs'), NODE_IP, String(machinesPort), machinesDir], 'machines ready');
}

/** `helm install` arguments that run the node's controller image with the machine service as its cloud. */
export function nodeInstallArgs(images: NodeImages, checkInterval: string): string[] {
  const ref = images.controller.ref;
  return [
    '--set', `image.repository=${ref.slice(0, ref.lastIndexOf(':'))}`,
    '--set', `image.tag=${ref.slice(ref.lastIndexOf(':') + 1)}`,
    // The image was imported into the node's runtime: there is no registry to pull from.
    '--set', 'image.pullPolicy=Never',
    // A provider script as users ship one, from the chart's ConfigMap, and where it finds its cloud.
    '--set-file', `providerScripts.netns-machine\\.sh=${join(process.cwd(), 'e2e/node/netns-machine.sh')}`,
    '--set', 'extraEnv[0].name=MACHINES_URL', '--set', `extraEnv[0].value=http://${NODE_IP}:${machinesPort}`,
    '--set', `checkInterval=${checkInterval}`,
  ];
}

/** A command Offer whose machines come from the machine service; acquireDelay (s) makes acquire slow. */
export function nodeOffer(name: string, idleTimeout: string, acquireDelay = 0) {
  return {
    apiVersion: 'leasehold.dev/v1alpha1',
    kind: 'Offer',
    metadata: { name },
    spec: {
      command: {
        acquire: [NODE_PROVIDER, 'acquire', ...(acquireDelay ? [String(acquireDelay)] : [])],
        release: [NODE_PROVIDER, 'release'],
        shape: { os: 'linux', arch: 'amd64', cpus: 1 },
      },
      pricePerHour: 0,
      idleTimeout,
      maxLifetime: '1h',
    },
  };
}
