// One real Kubernetes node for the tests where a container must really run (the
// controller's own image under `helm install`, a peer Job's mirror): containerd,
// the kubelet and a CNI bridge, all inside a network namespace the test makes.
//
// Addresses: the node's IP (10.201.0.1), the pod bridge (10.202.0.0/24) and the
// `kubernetes` Service address (10.0.0.1) exist only inside that namespace. The
// kubelet and the pods reach the API server, which listens on the host's
// loopback, through a Unix socket (relay.mjs inside, a socket server in this
// process outside). Nothing is sent to any other address.
//
// One real node per machine at a time: the namespace, containerd's shim sockets
// and the kernel settings the kubelet changes are machine-wide. A second start
// (another Jest worker, a demo) waits for the first to stop, on a file lock.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile, readdir } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stopProcess, type ControlPlane } from './controlplane.js';
import { clientKubeconfig } from './pki.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const nodeDir = join(here, '..', 'node');

export const NODE_NAME = 'leasehold-node';
export const NETNS = 'leasehold-node';
export const NODE_IP = '10.201.0.1';
export const POD_SUBNET = '10.202.0.0/24';
/** The first address of the API server's service range, as kubelets tell pods. */
export const SERVICE_IP = '10.0.0.1';
/** How often the node's waits check again. */
const NODE_POLL_MS = 200;

export interface ImageArchive {
  archive: string;
  ref: string;
}
export interface NodeImages {
  pause: ImageArchive;
  controller: ImageArchive;
  workload: ImageArchive;
}

/** Installs the packages a real node needs and builds (or finds cached) its images. */
export async function ensureNodeImages(): Promise<NodeImages> {
  const { stdout } = await run('bash', [join(nodeDir, 'setup.sh')], { maxBuffer: 8 << 20 });
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as NodeImages;
}

// Kernel settings the kubelet sets for itself on start; put back on stop.
const KERNEL_SETTINGS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];

export class RealNode {
  private readonly procs: ChildProcess[] = [];
  private kubelet?: ChildProcess;
  private containerd?: ChildProcess;
  private readonly relays: Server[] = [];
  private readonly sockets = new Set<Socket>();
  private saved = new Map<string, string>();
  private lock?: ChildProcess;

  private constructor(
    readonly cp: ControlPlane,
    readonly dir: string,
    readonly images: NodeImages,
  ) {}

  get containerdSocket(): string {
    return join(this.dir, 'containerd.sock');
  }

  /** Starts containerd, the kubelet and the CNI bridge, imports the images and waits for the Node to be Ready. */
  static async start(cp: ControlPlane, images: NodeImages): Promise<RealNode> {
    const node = new RealNode(cp, join(cp.info.dir, 'node'), images);
    node.lock = await holdNodeLock();
    try {
      // Only with the lock held: what is left now is a dead run's, never a live one's.
      await sweepStale();
      await node.up();
    } catch (err) {
      await node.stop().catch(() => {});
      throw err;
    }
    return node;
  }

  private async up(): Promise<void> {
    await mkdir(join(this.dir, 'cni'), { recursive: true });
    for (const key of KERNEL_SETTINGS) this.saved.set(key, (await readFile(`/proc/sys/${key}`, 'utf8')).trim());
    await this.network();
    await this.startRelay();
    await this.startContainerd();
    for (const image of [this.images.pause, this.images.controller, this.images.workload]) {
      await this.ctr(['images', 'import', image.archive]);
    }
    await this.startKubelet();
    await this.waitReady();
  }

  /** The namespace: loopback, a veth pair carrying the node IP, and the Service address on loopback. */
  private async network(): Promise<void> {
    await ip('netns', 'add', NETNS);
    const inNs = (...args: string[]) => ip('-n', NETNS, ...args);
    await inNs('link', 'set', 'lo', 'up');
    await inNs('addr', 'add', `${SERVICE_IP}/32`, 'dev', 'lo');
    // A veth pair whose both ends stay in the namespace: the kubelet needs a
    // node IP on an interface that is not loopback, and this one leads nowhere.
    await inNs('link', 'add', 'node0', 'type', 'veth', 'peer', 'name', 'node1');
    await inNs('addr', 'add', `${NODE_IP}/24`, 'dev', 'node0');
    await inNs('link', 'set', 'node0', 'up');
    await inNs('link', 'set', 'node1', 'up');
    await inNs('route', 'add', 'default', 'dev', 'node0');
    await writeFile(join(this.dir, 'cni', '10-leasehold.conflist'), JSON.stringify({
      cniVersion: '1.0.0',
      name: 'leasehold',
      plugins: [
        { type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: false, hairpinMode: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: POD_SUBNET }]], routes: [{ dst: '0.0.0.0/0' }],
            dataDir: join(this.dir, 'cni-ipam') } },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    }, null, 2));
  }

  /** The API server for the kubelet (at its own URL) and for pods (at the Service address). */
  private async startRelay(): Promise<void> {
    const port = Number(new URL(this.cp.info.server).port);
    await this.forward('api', port, [`127.0.0.1:${port}`, `${SERVICE_IP}:443`]);
  }

  /**
   * Carries connections made inside the namespace, to each `ip:port` of `listens`,
   * to `hostPort` on the host's loopback (e.g. a peer cluster's API server, which pods
   * then reach at `https://10.0.0.1:<port>`, an address its certificate names).
   */
  async forward(name: string, hostPort: number, listens: string[]): Promise<void> {
    const socket = join(this.dir, `${name}.sock`);
    const server = createServer((inside) => {
      const upstream = createConnection(hostPort, '127.0.0.1');
      inside.pipe(upstream).pipe(inside);
      this.sockets.add(inside).add(upstream);
      const close = () => {
        inside.destroy();
        upstream.destroy();
        this.sockets.delete(inside);
        this.sockets.delete(upstream);
      };
      for (const end of [inside, upstream]) {
        end.on('error', close);
        end.on('close', close);
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socket, resolve);
    });
    this.relays.push(server);
    await this.service(`relay-${name}`, process.execPath, [join(nodeDir, 'relay.mjs'), socket, ...listens], 'relay ready');
  }

  private async startContainerd(): Promise<void> {
    const root = join(this.dir, 'containerd');
    const config = join(this.dir, 'containerd.toml');
    const cri = 'plugins."io.containerd.grpc.v1.cri"';
    await writeFile(config, `version = 2
root = "${root}/root"
state = "${root}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "${this.containerdSocket}"
[ttrpc]
  address = "${this.containerdSocket}.ttrpc"

[${cri}]
  sandbox_image = "${this.images.pause.ref}"
  # The machine withholds CAP_SYS_RESOURCE: lowering a process's OOM score
  # adjustment is refused, and runc would fail every sandbox without this.
  restrict_oom_score_adj = true
  [${cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [${cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [${cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [${cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${join(this.dir, 'cni')}"
`);
    this.containerd = this.spawnIn('containerd', 'containerd', ['--config', config]);
    await waitFor('containerd', async () => (await this.ctr(['version'])).includes('Server:'), { child: this.containerd, dir: this.dir, pollMs: NODE_POLL_MS });
  }

  private async startKubelet(): Promise<void> {
    const kubeconfig = await clientKubeconfig(this.cp.info.dir, this.cp.info.server,
      { name: 'kubelet', user: `system:node:${NODE_NAME}`, groups: ['system:nodes'] }, this.cp.info.clusterName);
    // Without the Node authorizer, the bootstrap system:node role is what lets a kubelet in.
    await this.cp.kubectl(['create', 'clusterrolebinding', 'leasehold-test-nodes', '--clusterrole=system:node', '--group=system:nodes']);
    const config = join(this.dir, 'kubelet.yaml');
    await writeFile(config, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: ${join(this.cp.info.dir, 'pki', 'ca.crt')}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
# This machine has cgroup v1 and swap may be on; both are fine for tests.
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${this.containerdSocket}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
serializeImagePulls: false
# The images were imported, not pulled: no registry could give them back.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
resolvConf: /etc/resolv.conf
`);
    this.kubelet = this.spawnIn('kubelet', join(this.cp.info.binDir, 'kubelet'), [
      `--config=${config}`,
      `--kubeconfig=${kubeconfig}`,
      `--root-dir=${join(this.dir, 'kubelet')}`,
      `--cert-dir=${join(this.dir, 'kubelet-pki')}`,
      `--hostname-override=${NODE_NAME}`,
      `--node-ip=${NODE_IP}`,
      '--v=1',
    ]);
  }

  private async waitReady(): Promise<void> {
    await waitFor('Node Ready', async () => {
      const { stdout } = await this.cp.kubectl(['get', 'node', NODE_NAME, '-o',
        'jsonpath={.status.conditions[?(@.type=="Ready")].status}{" "}{.spec.taints[*].key}']);
      return stdout.startsWith('True') && !stdout.includes('not-ready');
    }, { child: this.kubelet!, dir: this.dir, timeoutMs: 120_000, pollMs: NODE_POLL_MS });
  }

  /** Starts a long-running process inside the node's namespace and waits for it to print `readyText`; stopped with the node. */
  async service(name: string, file: string, args: string[], readyText: string): Promise<ChildProcess> {
    const child = this.spawnIn(name, file, args);
    await waitFor(name, async () => (await readFile(join(this.dir, `${name}.log`), 'utf8')).includes(readyText), { child, dir: this.dir, pollMs: NODE_POLL_MS });
    return child;
  }

  /** Runs a command inside the node's network namespace (e.g. to reach a pod IP). */
  async exec(file: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
    return run('nsenter', [`--net=/run/netns/${NETNS}`, '--', file, ...args], { maxBuffer: 16 << 20 });
  }

  async ctr(args: string[]): Promise<string> {
    const { stdout } = await run('ctr', ['--address', this.containerdSocket, '--namespace', 'k8s.io', ...args], { maxBuffer: 16 << 20 });
    return stdout;
  }

  /**
   * Deletes every pod and waits for the kubelet to tear down their sandboxes
   * (which frees their network namespaces and cgroups), then stops the kubelet
   * and containerd, removes the namespace and puts the kernel settings back.
   */
  async stop(): Promise<void> {
    if (this.kubelet && this.kubelet.exitCode === null) {
      await this.cp.kubectl(['delete', 'pods', '--all-namespaces', '--all', '--force', '--grace-period=0', '--wait=false']).catch(() => {});
      // Stopped sandboxes have no task and no network namespace left; the records of
      // exited containers wait for the kubelet's garbage collection, which need not run.
      await waitFor('pod sandboxes stopped', async () => {
        const tasks = (await this.ctr(['tasks', 'list'])).split('\n').slice(1).filter((l) => /\bRUNNING\b/.test(l));
        const netns = (await readdir('/run/netns').catch(() => [] as string[])).filter((n) => n.startsWith('cni-'));
        return tasks.length === 0 && netns.length === 0;
      }, { child: this.kubelet, dir: this.dir, pollMs: NODE_POLL_MS }).catch(() => {});
    }
    await stopProcess(this.kubelet);
    await stopProcess(this.containerd);
    for (const child of this.procs) await stopProcess(child);
    // A server's close waits for its connections, and a watch through the relay never ends by itself.
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.relays.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    await sweepStale();
    for (const [key, value] of this.saved) await writeFile(`/proc/sys/${key}`, value).catch(() => {});
    await releaseNodeLock(this.lock);
  }

  private spawnIn(name: string, file: string, args: string[]): ChildProcess {
    const log = createWriteStream(join(this.dir, `${name}.log`), { flags: 'a' });
    // nsenter, not `ip netns exec`: that one also mounts a fresh /sys, which hides
    // the cgroup file systems from the kubelet and containerd.
    const child = spawn('nsenter', [`--net=/run/netns/${NETNS}`, '--', file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    this.procs.push(child);
    return child;
  }

}

const LOCK_FILE = '/run/leasehold-node.lock';
const LOCK_WAIT_SECONDS = 1800;

/**
 * Waits for the machine's one real node to be free and holds it. The lock is
 * held by flock(1) while its `cat` reads our pipe, so it goes with this process
 * however that ends (a killed Jest worker never leaves it held).
 */
async function holdNodeLock(): Promise<ChildProcess> {
  const child = spawn('flock', ['--close', '--wait', String(LOCK_WAIT_SECONDS), LOCK_FILE, 'sh', '-c', 'echo held; exec cat >/dev/null'],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the real node lock ${LOCK_FILE} was not held (flock exited ${code}): ${stderr.trim()}`)));
    child.once('error', reject);
  });
  return child;
}

async function releaseNodeLock(lock: ChildProcess | undefined): Promise<void> {
  if (!lock || lock.exitCode !== null) return;
  const exited = new Promise((resolve) => lock.once('exit', resolve));
  lock.stdin!.end();
  await exited;
}

async function ip(...args: string[]): Promise<void> {
  await run('ip', args);
}

/**
 * What a real node left behind (this run's, or a killed earlier run's): processes
 * in its namespace (containerd shims outlive containerd), pod network
 * namespaces, kubelet mounts, pod cgroups, and the namespace itself.
 */
// Where a node's directory lives: under a test's control plane, or under the
// control plane of `make demo-installed` (e2e/demo/installed.ts).
const NODE_DIR_PATTERN = '/(leasehold-cp-[^/]+|leasehold-demo-installed-[^/]+/cp)/node/';

async function sweepStale(): Promise<void> {
  if (existsSync(`/run/netns/${NETNS}`)) {
    const { stdout } = await run('ip', ['netns', 'pids', NETNS]).catch(() => ({ stdout: '' }));
    for (const pid of stdout.split('\n').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  // Shims run in the node's namespace too, but one whose containerd is gone is
  // found by the address of its containerd, which is a test control plane's.
  await run('pkill', ['-KILL', '-f', `containerd-shim-runc-v2 .*-address [^ ]*${NODE_DIR_PATTERN}`]).catch(() => {});
  const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((at) => new RegExp(NODE_DIR_PATTERN).test(at) || /^\/run\/netns\/cni-/.test(at) || /^\/run\/containerd\/io\.containerd\.grpc\.v1\.cri\//.test(at))
    .sort((a, b) => b.length - a.length);
  // A plain unmount first: a lazy one returns before the mount is gone, and the
  // control plane's directory is removed right after.
  for (const at of mounts) {
    const path = at.replace(/\\040/g, ' ');
    await run('umount', [path]).catch(() => run('umount', ['-l', path])).catch(() => {});
  }
  for (const name of await readdir('/run/netns').catch(() => [] as string[])) {
    if (name.startsWith('cni-')) await rm(join('/run/netns', name), { force: true }).catch(() => {});
  }
  if (existsSync(`/run/netns/${NETNS}`)) await ip('netns', 'delete', NETNS).catch(() => {});
  // Pod cgroups of a kubelet that is gone: deepest first, as rmdir removes only empty ones.
  const { stdout } = await run('bash', ['-c', 'find /sys/fs/cgroup/*/kubepods* -depth -type d 2>/dev/null || true']).catch(() => ({ stdout: '' }));
  for (const dir of stdout.split('\n').filter(Boolean)) await run('rmdir', [dir]).catch(() => {});
}
