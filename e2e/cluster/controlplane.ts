// A real, local Kubernetes control plane for tests, the demo and development:
// etcd plus kube-apiserver on loopback, with generated certificates, RBAC and
// an admin kubeconfig; on request also kube-controller-manager, kube-scheduler
// and kwok (fake Nodes). Binaries come from e2e/cluster/build.sh (built from
// Go modules and cached outside the repository).
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, writeFile, readFile, rm } from 'node:fs/promises';
import { createWriteStream, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ADMIN, generatePKI, kubeconfigYAML } from './pki.js';
import {
  controllerManager, scheduler, kwok, DEFAULT_CONTROLLERS, type ComponentName, type ComponentSpec, type ComponentContext,
} from './components.js';
import { runTool } from './tool.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));

export interface ControlPlaneOptions {
  /** Directory for data, certificates and logs; a fresh temp dir by default. */
  dir?: string;
  /** Directory holding the binaries build.sh builds. */
  binDir?: string;
  /** Extra kube-apiserver flags (e.g. `--v=2`). */
  apiServerArgs?: string[];
  /** Tells control planes apart in temp dir, kubeconfig cluster name and logs (`peer`). */
  name?: string;
  /** Also run kube-controller-manager: `true` for DEFAULT_CONTROLLERS, or the controllers to run. */
  controllers?: boolean | string[];
  /** Also run kube-scheduler. */
  scheduler?: boolean;
  /** Also run kwok, the kubelet of fake Nodes (see kwok.ts). */
  kwok?: boolean;
  /** Extra flags of kube-controller-manager and kube-scheduler (e.g. their client's `--kube-api-qps`). */
  componentArgs?: Partial<Record<'kube-controller-manager' | 'kube-scheduler', string[]>>;
}

export interface ControlPlaneInfo {
  dir: string;
  binDir: string;
  kubeconfig: string;
  server: string;
  etcdURL: string;
  /** `leasehold-<name>`: the kubeconfig's cluster and context. */
  clusterName: string;
  /** The optional parts this control plane runs. */
  components: ComponentName[];
  /** Milliseconds each part took to become healthy, and `total` for start() as a whole. */
  startup: Record<string, number>;
}

/** Builds (or finds cached) binaries and returns their directory. */
export async function ensureBinaries(required: string[] = ['kube-apiserver']): Promise<string> {
  const fromEnv = process.env.E2E_BIN_DIR;
  if (fromEnv && required.every((bin) => existsSync(join(fromEnv, bin)))) return fromEnv;
  const { stdout } = await run('bash', [join(here, 'build.sh')], { maxBuffer: 1 << 20 });
  const lines = stdout.trim().split('\n');
  return lines[lines.length - 1]!;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export class ControlPlane {
  readonly info: ControlPlaneInfo;
  private etcd?: ChildProcess;
  private apiserver?: ChildProcess;
  private readonly parts = new Map<ComponentName, ChildProcess>();
  private readonly etcdPeerPort: number;
  private readonly apiPort: number;
  private readonly extraArgs: string[];

  private constructor(info: ControlPlaneInfo, etcdPeerPort: number, apiPort: number, extraArgs: string[]) {
    this.info = info;
    this.etcdPeerPort = etcdPeerPort;
    this.apiPort = apiPort;
    this.extraArgs = extraArgs;
  }

  /**
   * Generates certificates and a kubeconfig, starts etcd and kube-apiserver and
   * waits for /readyz, then starts the optional parts and waits until each is healthy.
   */
  static async start(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const began = Date.now();
    const components: ComponentName[] = [
      ...(opts.controllers ? ['kube-controller-manager' as const] : []),
      ...(opts.scheduler ? ['kube-scheduler' as const] : []),
      ...(opts.kwok ? ['kwok' as const] : []),
    ];
    const required = ['kube-apiserver', 'etcd', 'kubectl', ...components];
    const binDir = opts.binDir ?? (await ensureBinaries(required));
    const missing = required.filter((bin) => !existsSync(join(binDir, bin)));
    if (missing.length > 0) {
      throw new Error(`${binDir} has no ${missing.join(', ')}; run \`make binaries\` (e2e/cluster/build.sh) and pass the directory it prints`);
    }
    const name = opts.name ?? 'local';
    const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), opts.name ? `leasehold-cp-${opts.name}-` : 'leasehold-cp-')));
    const pki = join(dir, 'pki');
    await generatePKI(pki);
    const [etcdPort, etcdPeerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfig = join(dir, 'kubeconfig');
    const clusterName = `leasehold-${name}`;
    await writeFile(kubeconfig, kubeconfigYAML({ server, ca: join(pki, 'ca.crt'), clusterName, userName: ADMIN.name,
      user: { 'client-certificate': join(pki, 'admin.crt'), 'client-key': join(pki, 'admin.key') } }), { mode: 0o600 });
    // Without kube-controller-manager nothing would create the default
    // ServiceAccount that the ServiceAccount admission plugin insists on for every pod.
    const apiServerArgs = [...(opts.controllers ? [] : ['--disable-admission-plugins=ServiceAccount']), ...(opts.apiServerArgs ?? [])];
    const cp = new ControlPlane(
      { dir, binDir, kubeconfig, server, etcdURL: `http://127.0.0.1:${etcdPort}`, clusterName, components, startup: {} },
      etcdPeerPort,
      apiPort,
      apiServerArgs,
    );
    try {
      await cp.timed('etcd', () => cp.startEtcd());
      await cp.timed('kube-apiserver', () => cp.startAPIServer());
      const specs = await Promise.all(components.map(async (part) => {
        const ctx: ComponentContext = { dir, server, clusterName, port: await freePort() };
        if (part === 'kube-controller-manager') {
          return controllerManager(ctx, Array.isArray(opts.controllers) ? opts.controllers : DEFAULT_CONTROLLERS, opts.componentArgs?.['kube-controller-manager']);
        }
        return part === 'kube-scheduler' ? scheduler(ctx, opts.componentArgs?.['kube-scheduler']) : kwok(ctx);
      }));
      await Promise.all(specs.map((spec) => cp.timed(spec.name, () => cp.startComponent(spec))));
    } catch (err) {
      await cp.stop(true);
      throw err;
    }
    cp.info.startup.total = Date.now() - began;
    return cp;
  }

  async startEtcd(): Promise<void> {
    const { dir, binDir, etcdURL } = this.info;
    const peer = `http://127.0.0.1:${this.etcdPeerPort}`;
    this.etcd = this.spawnLogged('etcd', join(binDir, 'etcd'), [
      '--name=leasehold',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdURL}`,
      `--advertise-client-urls=${etcdURL}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=leasehold=${peer}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    await waitFor('etcd /health', async () => (await httpGet(`${etcdURL}/health`)).includes('"health":"true"'), { child: this.etcd, dir });
  }

  async startAPIServer(): Promise<void> {
    const { dir, binDir, etcdURL } = this.info;
    const pki = join(dir, 'pki');
    this.apiserver = this.spawnLogged('kube-apiserver', join(binDir, 'kube-apiserver'), [
      `--etcd-servers=${etcdURL}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${this.apiPort}`,
      `--tls-cert-file=${join(pki, 'serving.crt')}`,
      `--tls-private-key-file=${join(pki, 'serving.key')}`,
      `--client-ca-file=${join(pki, 'ca.crt')}`,
      `--service-account-key-file=${join(pki, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      '--api-audiences=https://kubernetes.default.svc.cluster.local',
      '--authorization-mode=RBAC',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--profiling=false',
      `--cert-dir=${join(dir, 'apiserver-certs')}`,
      ...this.extraArgs,
    ]);
    await waitFor('kube-apiserver /readyz', async () => (await this.get('/readyz')) === 'ok', { child: this.apiserver, dir });
  }

  private async startComponent(spec: ComponentSpec): Promise<void> {
    const child = this.spawnLogged(spec.name, join(this.info.binDir, spec.name), spec.args, spec.env);
    this.parts.set(spec.name, child);
    await waitFor(`${spec.name} /healthz`, async () => (await httpGet(spec.healthURL)) === 'ok', { child, dir: this.info.dir });
    if (spec.name === 'kube-controller-manager') {
      // Pods are admitted only once their namespace's default ServiceAccount exists.
      await waitFor('the default ServiceAccount', async () => (await this.get('/api/v1/namespaces/default/serviceaccounts/default')).includes('"kind":"ServiceAccount"'),
        { child, dir: this.info.dir });
    }
  }

  async stopAPIServer(): Promise<void> {
    await stopProcess(this.apiserver);
    this.apiserver = undefined;
  }

  async stopEtcd(): Promise<void> {
    await stopProcess(this.etcd);
    this.etcd = undefined;
  }

  /**
   * Stops kube-apiserver and etcd and starts them again on the same ports and
   * data; the optional parts keep running and reconnect, as they would in a cluster.
   */
  async restart(pauseMs = 0): Promise<void> {
    await this.stopAPIServer();
    await this.stopEtcd();
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    await this.startEtcd();
    await this.startAPIServer();
  }

  /** Stops every process; with `keepDir` the data and logs stay for inspection. */
  async stop(keepDir = false): Promise<void> {
    await Promise.all([...this.parts.values()].map((child) => stopProcess(child)));
    this.parts.clear();
    await this.stopAPIServer();
    await this.stopEtcd();
    if (!keepDir) await rm(this.info.dir, { recursive: true, force: true });
  }

  /** An authenticated GET against the API server, as admin. Returns the body. */
  async get(path: string): Promise<string> {
    const pki = join(this.info.dir, 'pki');
    const [ca, cert, key] = await Promise.all(['ca.crt', 'admin.crt', 'admin.key'].map((f) => readFile(join(pki, f))));
    return httpGet(`${this.info.server}${path}`, { ca: ca!, cert: cert!, key: key! });
  }

  /** Runs the built kubectl against this control plane. */
  async kubectl(args: string[], input?: string): Promise<{ stdout: string; stderr: string; code: number }> {
    return runTool(join(this.info.binDir, 'kubectl'), ['--kubeconfig', this.info.kubeconfig, ...args], input);
  }

  async helm(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
    return runTool(join(this.info.binDir, 'helm'), ['--kubeconfig', this.info.kubeconfig, ...args]);
  }

  private async timed(part: string, step: () => Promise<void>): Promise<void> {
    const began = Date.now();
    await step();
    this.info.startup[part] = Date.now() - began;
  }

  private spawnLogged(name: string, bin: string, args: string[], env?: Record<string, string>): ChildProcess {
    const log = createWriteStream(join(this.info.dir, `${name}.log`), { flags: 'a' });
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ? { ...process.env, ...env } : undefined });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    return child;
  }

}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
export async function stopProcess(child: ChildProcess | undefined, graceMs = 10_000): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

function httpGet(url: string, tls?: { ca: Buffer; cert: Buffer; key: Buffer }): Promise<string> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const mod = u.protocol === 'https:' ? request : undefined;
    if (!mod) {
      fetch(url, { signal: AbortSignal.timeout(2000) }).then((r) => r.text()).then(resolve, reject);
      return;
    }
    // Without client credentials this only reads a health endpoint of
    // kube-controller-manager or kube-scheduler on loopback, which serve a
    // self-signed certificate.
    const req = mod(u, { ...(tls ?? { rejectUnauthorized: false }), timeout: 2000 }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
