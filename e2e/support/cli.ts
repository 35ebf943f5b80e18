// Runs the leasehold CLI (cmd/leasehold.ts through tsx) as a namespace user
// would: a kubeconfig whose user is impersonated ("as") and bound only to
// the chart's aggregated lease-editor ClusterRole in the test namespace, and
// a device key under its own XDG_CONFIG_HOME.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { chartDir, docs, kubeVersionArgs, testHelm } from './helm.js';
import { apply, type Kubectl } from './kube.js';

/**
 * The afterAll of a CLI test file: deletes the Leases a failed test left
 * (without waiting: the suite's own afterAll, which jest may run first,
 * stops the controller and the sshd machines) and the user's ClusterRoles.
 */
export async function cleanupCLI(kubectl: Kubectl, ns: string, user: CLIUser | undefined): Promise<void> {
  const list = await kubectl(['-n', ns, 'get', 'leases.leasehold.dev', '-o', 'name']);
  for (const name of list.stdout.split('\n').filter(Boolean)) await kubectl(['-n', ns, 'delete', name, '--wait=false']);
  for (const r of user?.clusterRoles ?? []) await kubectl(['delete', 'clusterrole', r, '--ignore-not-found']);
}

export const CLI_ENTRY = join(process.cwd(), 'cmd/leasehold.ts');

export interface CLIUser {
  kubeconfig: string;
  /** The ClusterRoles made for this file, to delete afterwards. */
  clusterRoles: string[];
}

/**
 * Renders the chart's user roles (named after `release`), binds
 * `<release>-lease-editor` to `user` in `ns`, and writes a kubeconfig that
 * acts as `user` with `ns` as its context's namespace.
 */
export async function cliUser(kubectl: Kubectl, ns: string, user: string, release: string): Promise<CLIUser> {
  const { helmOK } = testHelm();
  const rendered = await helmOK(['template', release, chartDir, ...(await kubeVersionArgs(kubectl)), '--set', `fullnameOverride=${release}`, '--show-only', 'templates/user-roles.yaml']);
  const roles = docs(rendered.stdout);
  for (const role of roles) await apply(kubectl, JSON.stringify(role));
  await apply(kubectl, JSON.stringify({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'cli-user-lease-editor', namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${release}-lease-editor` },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
  }));
  const config = YAML.parse(readFileSync(process.env.E2E_KUBECONFIG!, 'utf8'));
  for (const u of config.users) u.user.as = user;
  for (const c of config.contexts) c.context.namespace = ns;
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'leasehold-cli-user-')), 'kubeconfig');
  writeFileSync(kubeconfig, YAML.stringify(config), { mode: 0o600 });
  return { kubeconfig, clusterRoles: roles.map((r) => r.metadata.name as string) };
}

export interface CLIResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Bytes written to stdout (counted, not kept, with `countOnly`). */
  stdoutBytes: number;
  /** Peak resident memory of the CLI process, from /proc VmHWM, in bytes (0 if never read). */
  peakRSS: number;
}

export interface CLIRun {
  child: ChildProcess;
  result: Promise<CLIResult>;
  stderrSoFar(): string;
  stdoutSoFar(): string;
}

/** A fresh XDG_CONFIG_HOME: a device of its own. */
export function newDevice(): string {
  return mkdtempSync(join(tmpdir(), 'leasehold-device-'));
}

export interface CLIOptions {
  kubeconfig: string;
  device: string;
  countOnly?: boolean;
  /** Run this program (e.g. the compiled dist/cmd/leasehold.js, or kubectl with the plugin on PATH) instead of the TypeScript entry through tsx. */
  program?: { command: string; args: string[]; path?: string };
}

export function startCLI(args: string[], opts: CLIOptions): CLIRun {
  const program = opts.program ?? { command: process.execPath, args: ['--import', 'tsx', CLI_ENTRY] };
  const child = spawn(program.command, [...program.args, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', KUBECONFIG: opts.kubeconfig, XDG_CONFIG_HOME: opts.device, ...(program.path ? { PATH: `${program.path}:${process.env.PATH}` } : {}) },
  });
  let stdout = '';
  let stderr = '';
  let stdoutBytes = 0;
  let peakRSS = 0;
  const sample = () => {
    try {
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (m) peakRSS = Math.max(peakRSS, Number(m[1]) * 1024);
    } catch {
      // exited
    }
  };
  const sampler = setInterval(sample, 100);
  child.stdout!.on('data', (d: Buffer) => {
    stdoutBytes += d.length;
    if (!opts.countOnly) stdout += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const result = new Promise<CLIResult>((resolve) => {
    child.on('exit', (code) => {
      clearInterval(sampler);
      resolve({ code, stdout, stderr, stdoutBytes, peakRSS });
    });
  });
  return { child, result, stderrSoFar: () => stderr, stdoutSoFar: () => stdout };
}

export function runCLI(args: string[], opts: CLIOptions): Promise<CLIResult> {
  return startCLI(args, opts).result;
}
