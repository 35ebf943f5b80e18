// The kubeconfig as kubectl reads it (--kubeconfig, else the files of
// $KUBECONFIG merged, else ~/.kube/config; --context, else current-context),
// reduced to what the CLI's own HTTP client needs: the server, its CA, and
// the user's credentials (client certificate, token, token file, basic auth,
// an exec plugin, impersonation). What that client cannot do (auth-provider
// plugins, proxy-url, no kubeconfig file at all) is named in `unsupported`,
// and the CLI then uses @kubernetes/client-node, which can.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';

export interface ExecPlugin {
  command: string;
  args: string[];
  env: Array<{ name: string; value: string }>;
  apiVersion: string;
}

export interface Endpoint {
  /** Without a trailing slash. */
  server: string;
  ca?: Buffer;
  insecure: boolean;
  servername?: string;
  cert?: Buffer;
  key?: Buffer;
  token?: string;
  basic?: { username: string; password: string };
  exec?: ExecPlugin;
  impersonate?: { user: string; groups: string[] };
  /** The context's namespace, if it names one. */
  namespace?: string;
}

export type KubeconfigRead = { endpoint: Endpoint } | { unsupported: string };

type Entry = { name?: string; [k: string]: unknown };
interface Merged {
  currentContext?: string;
  clusters: Map<string, { cluster: Record<string, unknown>; dir: string }>;
  users: Map<string, { user: Record<string, unknown>; dir: string }>;
  contexts: Map<string, Record<string, unknown>>;
}

/** The files kubectl would read, in order; empty when there are none. */
function kubeconfigFiles(path: string | undefined, env: NodeJS.ProcessEnv): string[] {
  if (path) return [path];
  if (env.KUBECONFIG) return env.KUBECONFIG.split(delimiter).filter((f) => f && existsSync(f));
  const home = env.HOME ?? homedir();
  const file = join(home, '.kube', 'config');
  return existsSync(file) ? [file] : [];
}

/** As kubectl merges: the first file to set a value or name an entry wins. */
function merge(files: string[]): Merged {
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const file of files) {
    const doc = (parse(readFileSync(file, 'utf8')) ?? {}) as Record<string, unknown>;
    const dir = dirname(file);
    merged.currentContext ??= (doc['current-context'] as string | undefined) || undefined;
    for (const c of (doc.clusters ?? []) as Entry[]) if (c.name && !merged.clusters.has(c.name)) merged.clusters.set(c.name, { cluster: (c.cluster ?? {}) as Record<string, unknown>, dir });
    for (const u of (doc.users ?? []) as Entry[]) if (u.name && !merged.users.has(u.name)) merged.users.set(u.name, { user: (u.user ?? {}) as Record<string, unknown>, dir });
    for (const c of (doc.contexts ?? []) as Entry[]) if (c.name && !merged.contexts.has(c.name)) merged.contexts.set(c.name, (c.context ?? {}) as Record<string, unknown>);
  }
  return merged;
}

const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
const fileOrData = (dir: string, file: unknown, data: unknown): Buffer | undefined => {
  if (str(file)) return readFileSync(isAbsolute(file as string) ? (file as string) : join(dir, file as string));
  if (str(data)) return Buffer.from(data as string, 'base64');
  return undefined;
};

export function readKubeconfig(path: string | undefined, context: string | undefined, env: NodeJS.ProcessEnv): KubeconfigRead {
  const files = kubeconfigFiles(path, env);
  if (!files.length) return { unsupported: 'no kubeconfig file' };
  const merged = merge(files);
  if (context && !merged.contexts.has(context)) throw new Error(`--context ${context}: no such context in the kubeconfig; kubectl config get-contexts lists them`);
  const ctx = merged.contexts.get(context ?? merged.currentContext ?? '');
  const cluster = merged.clusters.get(str(ctx?.cluster) ?? '');
  if (!ctx || !cluster || !str(cluster.cluster.server)) throw new Error('the kubeconfig names no current cluster: pass --kubeconfig or --context, or set KUBECONFIG');
  const user = merged.users.get(str(ctx.user) ?? '') ?? { user: {}, dir: cluster.dir };
  const c = cluster.cluster;
  const u = user.user;
  if (str(c['proxy-url'])) return { unsupported: 'proxy-url' };
  if (u['auth-provider']) return { unsupported: 'auth-provider' };
  const server = (c.server as string).replace(/\/$/, '');
  const insecure = c['insecure-skip-tls-verify'] === true;
  if (server.startsWith('http:') && !insecure) throw new Error(`the kubeconfig's server ${server} is plain HTTP; set insecure-skip-tls-verify to use it`);
  const exec = u.exec as Record<string, unknown> | undefined;
  const tokenFile = str(u['token-file']);
  const token = str(u.token) ?? (tokenFile ? readFileSync(isAbsolute(tokenFile) ? tokenFile : join(user.dir, tokenFile), 'utf8').trim() : undefined);
  const ca = fileOrData(cluster.dir, c['certificate-authority'], c['certificate-authority-data']);
  const cert = fileOrData(user.dir, u['client-certificate'], u['client-certificate-data']);
  const key = fileOrData(user.dir, u['client-key'], u['client-key-data']);
  const endpoint: Endpoint = {
    server,
    insecure,
    ...(ca ? { ca } : {}),
    ...(str(c['tls-server-name']) ? { servername: c['tls-server-name'] as string } : {}),
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    ...(token ? { token } : {}),
    ...(str(u.username) ? { basic: { username: u.username as string, password: str(u.password) ?? '' } } : {}),
    ...(exec && str(exec.command)
      ? { exec: { command: exec.command as string, args: (exec.args ?? []) as string[], env: (exec.env ?? []) as ExecPlugin['env'], apiVersion: str(exec.apiVersion) ?? 'client.authentication.k8s.io/v1beta1' } }
      : {}),
    ...(str(u.as) ? { impersonate: { user: u.as as string, groups: (u['as-groups'] ?? []) as string[] } } : {}),
    ...(str(ctx.namespace) ? { namespace: ctx.namespace as string } : {}),
  };
  return { endpoint };
}

export interface ExecCredential {
  token?: string;
  cert?: Buffer;
  key?: Buffer;
}

/** Runs the kubeconfig's exec plugin once and reads the ExecCredential it prints. */
export function runExecPlugin(exec: ExecPlugin): Promise<ExecCredential> {
  const env: NodeJS.ProcessEnv = { ...process.env, KUBERNETES_EXEC_INFO: JSON.stringify({ apiVersion: exec.apiVersion, kind: 'ExecCredential', spec: { interactive: false } }) };
  for (const { name, value } of exec.env) env[name] = value;
  return new Promise((resolve, reject) => {
    const child = spawn(exec.command, exec.args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', (e) => reject(new Error(`kubeconfig exec plugin ${exec.command}: ${e.message}`)));
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`kubeconfig exec plugin ${exec.command} exited ${code}: ${err.trim()}`));
      try {
        const status = (JSON.parse(out) as { status?: { token?: string; clientCertificateData?: string; clientKeyData?: string } }).status ?? {};
        resolve({
          ...(status.token ? { token: status.token } : {}),
          ...(status.clientCertificateData ? { cert: Buffer.from(status.clientCertificateData) } : {}),
          ...(status.clientKeyData ? { key: Buffer.from(status.clientKeyData) } : {}),
        });
      } catch (e) {
        reject(new Error(`kubeconfig exec plugin ${exec.command} printed no ExecCredential: ${e instanceof Error ? e.message : String(e)}`));
      }
    });
  });
}
