// A real, local Kubernetes control plane for tests, the demo and development:
// etcd plus kube-apiserver on loopback, with generated certificates, RBAC and
// an admin kubeconfig. Binaries come from e2e/cluster/build.sh (built from Go
// modules and cached outside the repository).
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, mkdir, writeFile, readFile, rm } from 'node:fs/promises';
import { createWriteStream, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));

export interface ControlPlaneOptions {
  /** Directory for data, certificates and logs; a fresh temp dir by default. */
  dir?: string;
  /** Directory holding kube-apiserver, etcd, kubectl and helm. */
  binDir?: string;
  /** Extra kube-apiserver flags (e.g. `--v=2`). */
  apiServerArgs?: string[];
}

export interface ControlPlaneInfo {
  dir: string;
  binDir: string;
  kubeconfig: string;
  server: string;
  etcdURL: string;
}

/** Builds (or finds cached) binaries and returns their directory. */
export async function ensureBinaries(): Promise<string> {
  if (process.env.E2E_BIN_DIR && existsSync(join(process.env.E2E_BIN_DIR, 'kube-apiserver'))) {
    return process.env.E2E_BIN_DIR;
  }
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

async function openssl(cwd: string, ...args: string[]): Promise<void> {
  await run('openssl', args, { cwd });
}

/** A CA, a serving certificate for loopback, an admin client certificate and service-account keys. */
async function generatePKI(pki: string): Promise<void> {
  await mkdir(pki, { recursive: true });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(pki, 'req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '30', '-subj', '/CN=leasehold-test-ca');
  await writeFile(
    join(pki, 'serving.ext'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' +
      'extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n',
  );
  await writeFile(join(pki, 'client.ext'), 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n');
  const sign = async (name: string, subj: string, ext: string) => {
    await openssl(pki, 'req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj);
    await openssl(pki, 'x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${name}.crt`, '-days', '30', '-extfile', ext);
  };
  await sign('serving', '/CN=kube-apiserver', 'serving.ext');
  await sign('admin', '/O=system:masters/CN=admin', 'client.ext');
  await openssl(pki, 'genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', 'sa.key');
  await openssl(pki, 'pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub');
}

function kubeconfigYAML(server: string, pki: string): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: leasehold-local
  cluster:
    server: ${server}
    certificate-authority: ${join(pki, 'ca.crt')}
users:
- name: admin
  user:
    client-certificate: ${join(pki, 'admin.crt')}
    client-key: ${join(pki, 'admin.key')}
contexts:
- name: leasehold-local
  context:
    cluster: leasehold-local
    user: admin
    namespace: default
current-context: leasehold-local
`;
}

export class ControlPlane {
  readonly info: ControlPlaneInfo;
  private etcd?: ChildProcess;
  private apiserver?: ChildProcess;
  private readonly etcdPeerPort: number;
  private readonly apiPort: number;
  private readonly extraArgs: string[];

  private constructor(info: ControlPlaneInfo, etcdPeerPort: number, apiPort: number, extraArgs: string[]) {
    this.info = info;
    this.etcdPeerPort = etcdPeerPort;
    this.apiPort = apiPort;
    this.extraArgs = extraArgs;
  }

  /** Generates certificates and a kubeconfig, then starts etcd and kube-apiserver and waits for /readyz. */
  static async start(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const binDir = opts.binDir ?? (await ensureBinaries());
    const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'leasehold-cp-')));
    const pki = join(dir, 'pki');
    await generatePKI(pki);
    const [etcdPort, etcdPeerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kubeconfigYAML(server, pki), { mode: 0o600 });
    const cp = new ControlPlane(
      { dir, binDir, kubeconfig, server, etcdURL: `http://127.0.0.1:${etcdPort}` },
      etcdPeerPort,
      apiPort,
      opts.apiServerArgs ?? [],
    );
    try {
      await cp.startEtcd();
      await cp.startAPIServer();
    } catch (err) {
      await cp.stop();
      throw err;
    }
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
    await this.waitFor(async () => (await httpGet(`${etcdURL}/health`)).includes('"health":"true"'), 'etcd /health', this.etcd);
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
      // No kube-controller-manager runs, so nothing would create the default
      // ServiceAccount that this plugin insists on for every pod.
      '--disable-admission-plugins=ServiceAccount',
      '--profiling=false',
      `--cert-dir=${join(dir, 'apiserver-certs')}`,
      ...this.extraArgs,
    ]);
    await this.waitFor(async () => (await this.get('/readyz')) === 'ok', 'kube-apiserver /readyz', this.apiserver);
  }

  async stopAPIServer(): Promise<void> {
    await stopProcess(this.apiserver);
    this.apiserver = undefined;
  }

  async stopEtcd(): Promise<void> {
    await stopProcess(this.etcd);
    this.etcd = undefined;
  }

  /** Stops kube-apiserver and etcd and starts them again on the same ports and data. */
  async restart(pauseMs = 0): Promise<void> {
    await this.stopAPIServer();
    await this.stopEtcd();
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    await this.startEtcd();
    await this.startAPIServer();
  }

  /** Stops both processes; with `keepDir` the data and logs stay for inspection. */
  async stop(keepDir = false): Promise<void> {
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

  private spawnLogged(name: string, bin: string, args: string[]): ChildProcess {
    const log = createWriteStream(join(this.info.dir, `${name}.log`), { flags: 'a' });
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    return child;
  }

  private async waitFor(check: () => Promise<boolean>, what: string, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) {
        throw new Error(`${what}: process exited with code ${child.exitCode}; see ${this.info.dir}`);
      }
      try {
        if (await check()) return;
      } catch {
        // not up yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${what} not ready after ${timeoutMs} ms; see logs in ${this.info.dir}`);
  }
}

export function runTool(bin: string, args: string[], input?: string): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ stdout, stderr, code: code ?? -1 }));
    child.stdin.end(input ?? '');
  });
}

async function stopProcess(child: ChildProcess | undefined, graceMs = 10_000): Promise<void> {
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
    const req = mod(u, { ...tls, timeout: 2000 }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
