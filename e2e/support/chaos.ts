// Shared pieces of the reliability suites (e2e/reliability): a controller
// that can be SIGKILLed and restarted with the same flags, a fast Lease API
// client for watching steps, lease lifecycles driven to their end, and the
// ledgers that count leaked and doubled machines from the providers' own
// records (the Lambda emulator's instances and launches, the sshd provider's
// call log and processes).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { LambdaEmulator } from '../fakes/lambda/server.js';
import { leaseManifest } from './builders.js';
import type { ControllerProcess } from './controller.js';
import { waitFor } from './kube.js';

export const HOOK_PROVIDER = join(process.cwd(), 'e2e/reliability/hook-provider.sh');
const G = { group: 'leasehold.dev', version: 'v1alpha1', plural: 'leases' };

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Lease reads and writes straight through the API, for watching steps closely:
 * the reliability suites poll every 25 ms, which a kubectl process per call
 * (support/kube.ts) cannot keep up with. Objects come from support/builders.ts.
 */
export class LeaseAPI {
  readonly api: CustomObjectsApi;
  constructor(kubeconfig: string) {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    this.api = kc.makeApiClient(CustomObjectsApi);
  }
  async list(namespace: string): Promise<any[]> {
    return ((await this.api.listNamespacedCustomObject({ ...G, namespace })) as any).items ?? [];
  }
  async get(namespace: string, name: string): Promise<any | undefined> {
    try {
      return await this.api.getNamespacedCustomObject({ ...G, namespace, name });
    } catch (err) {
      if (String((err as any)?.code ?? '') === '404' || /404|not found/i.test(String(err))) return undefined;
      throw err;
    }
  }
  async create(namespace: string, name: string, spec: Record<string, unknown>): Promise<any> {
    return this.api.createNamespacedCustomObject({ ...G, namespace, body: leaseManifest(name, namespace, spec) });
  }
  /** Moves the Lease's resourceVersion (a merge patch of one annotation, unconditional), so that writes made with the old one conflict. */
  async touch(namespace: string, name: string, value: string): Promise<void> {
    await this.api.patchNamespacedCustomObject(
      { ...G, namespace, name, body: { metadata: { annotations: { 'reliability.test/touch': value } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
  async delete(namespace: string, name: string): Promise<void> {
    try {
      await this.api.deleteNamespacedCustomObject({ ...G, namespace, name });
    } catch (err) {
      if (!/404|not found/i.test(String(err)) && String((err as any)?.code) !== '404') throw err;
    }
  }
}

export const leaseIDOf = (lease: any): string => String(lease.metadata.uid).replace(/-/g, '').slice(0, 8);

/** waitFor (support/kube.ts) with a shorter default poll and probes that may answer synchronously. */
export function until<T>(what: string, probe: () => Promise<T | undefined | false | null> | T | undefined | false | null, timeoutMs: number, everyMs = 25): Promise<T> {
  return waitFor(what, async () => (await probe()) || undefined, timeoutMs, everyMs);
}

/** One controller, SIGKILLed and started again with the same flags; counts kills and keeps each run's metrics. */
export class Restartable {
  ctl: ControllerProcess | undefined;
  kills = 0;
  starts = 0;
  readonly logs: string[] = [];
  /** Counters summed over every run, read just before each kill and at the end. */
  private readonly totals = new Map<string, number>();
  constructor(private readonly starter: () => Promise<ControllerProcess>, private readonly counted: { name: string; labels?: Record<string, string> }[] = []) {}

  async up(): Promise<ControllerProcess> {
    this.ctl = await this.starter();
    this.starts++;
    this.logs.push(this.ctl.logFile);
    return this.ctl;
  }
  private async harvest(): Promise<void> {
    if (!this.ctl) return;
    for (const c of this.counted) {
      const key = `${c.name}${JSON.stringify(c.labels ?? {})}`;
      const v = await this.ctl.metric(c.name, c.labels).catch(() => 0);
      this.totals.set(key, (this.totals.get(key) ?? 0) + v);
    }
  }
  /** Sum over runs (a killed run's last increments may be lost: this is a lower bound). */
  total(name: string, labels: Record<string, string> = {}): number {
    return this.totals.get(`${name}${JSON.stringify(labels)}`) ?? 0;
  }
  async kill(): Promise<void> {
    if (!this.ctl) return;
    await this.harvest();
    await this.ctl.stop('SIGKILL');
    this.kills++;
    this.ctl = undefined;
  }
  async bounce(): Promise<void> {
    await this.kill();
    await this.up();
  }
  async stop(): Promise<void> {
    if (!this.ctl) return;
    await this.harvest();
    await this.ctl.stop('SIGTERM');
    this.ctl = undefined;
  }
  alive(): boolean {
    return Boolean(this.ctl && this.ctl.child.exitCode === null && this.ctl.child.signalCode === null);
  }
}

/** Kills and restarts at random moments (uniform in [minMs, maxMs]) until stopped; returns the loop's promise. */
export function chaosLoop(ctl: Restartable, minMs: number, maxMs: number): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await sleep(minMs + Math.random() * (maxMs - minMs));
      if (!running) break;
      await ctl.bounce();
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

export const ENDED = new Set(['Released', 'Failed']);
export const SETTLED = new Set(['Ready', 'Idle', 'Failed', 'Released']);

export interface Lifecycles {
  /** Phase each Lease settled in before it was deleted. */
  settled: Map<string, string>;
  /** Lease ID per name. */
  ids: Map<string, string>;
}

/**
 * Creates the Leases, deletes each once it has settled (Ready, Idle, Failed),
 * and waits until every one is gone. Throws naming the stuck ones.
 */
export async function runLifecycles(api: LeaseAPI, ns: string, names: string[], spec: Record<string, unknown>, timeoutMs: number, staggerMs = 0): Promise<Lifecycles> {
  const settled = new Map<string, string>();
  const ids = new Map<string, string>();
  const deleted = new Set<string>();
  // Created one after another (staggerMs apart), so kills find Leases at every step.
  const creating = (async () => {
    for (const n of names) {
      for (;;) {
        try {
          ids.set(n, leaseIDOf(await api.create(ns, n, spec)));
          break;
        } catch (err) {
          if (/409|AlreadyExists/i.test(String(err))) break;
          await sleep(500);
        }
      }
      if (staggerMs) await sleep(staggerMs);
    }
  })();
  if (!staggerMs) await creating;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let items: any[];
    try {
      items = await api.list(ns);
    } catch {
      await sleep(200);
      continue;
    }
    const byName = new Map(items.map((l) => [l.metadata.name as string, l]));
    for (const n of names) {
      const l = byName.get(n);
      const phase = l?.status?.phase;
      if (l && phase && SETTLED.has(phase) && !settled.has(n)) settled.set(n, phase === 'Idle' ? 'Ready' : phase);
      if (settled.has(n) && !deleted.has(n)) {
        await api.delete(ns, n).then(() => deleted.add(n), () => undefined);
      }
    }
    if (names.every((n) => deleted.has(n) && !byName.has(n))) {
      await creating;
      return { settled, ids };
    }
    if (Date.now() > deadline) {
      const stuck = names.filter((n) => byName.has(n)).map((n) => `${n}: ${byName.get(n)?.status?.phase ?? 'no status'} ${byName.get(n)?.status?.reason ?? ''} ${byName.get(n)?.status?.message ?? ''}`);
      throw new Error(`Leases did not converge within ${timeoutMs} ms:\n${stuck.join('\n')}`);
    }
    await sleep(250);
  }
}

// ---- the sshd provider's ledger ----

export function pgrep(pattern: string): number[] {
  try {
    return execFileSync('pgrep', ['-f', '--', pattern]).toString().trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * The sshd listeners among the processes whose command line matches:
 * neither a listener's child for a new connection (it carries the command
 * line until it execs) nor the connection handler sshd re-executes with -R
 * (re-parented when its listener goes, it looks like a listener until it
 * renames itself). Each with its command line, spaces for NULs.
 */
export function sshdListeners(pattern: string): { pid: number; args: string }[] {
  const pids = new Set(pgrep(pattern));
  const out: { pid: number; args: string }[] = [];
  for (const pid of pids) {
    let args = '';
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (pids.has(ppidOf(pid)) || args.split(' ').includes('-R')) continue;
    out.push({ pid, args });
  }
  return out;
}

export function setHold(machines: string, step: 'acquire-before' | 'acquire-after' | 'install' | 'release-before', seconds: number | undefined): void {
  const f = join(machines, `.hold-${step}`);
  if (seconds === undefined) rmSync(f, { force: true });
  else writeFileSync(f, `${seconds}\n`);
}

export interface Call {
  ms: number;
  verb: string;
  event: string;
  id: string;
  pid: number;
}

export function calls(machines: string): Call[] {
  const f = join(machines, '.calls');
  if (!existsSync(f)) return [];
  return readFileSync(f, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [ms, verb, event, ...rest] = line.split(' ');
      const pid = rest.pop();
      const id = rest.pop() ?? '';
      return { ms: Number(ms), verb: verb!, event: [event, ...rest].join(' '), id, pid: Number(pid) };
    });
}

export interface Ledger {
  /** Machines that outlived every Lease. */
  leaked: number;
  /** Leases that had more than one machine. */
  doubled: number;
  detail: string[];
}

/** sshd machines: leaked = sshd listeners or machine directories left; doubled = a lease ID acquired more than once, or seen with two sshd at once. */
export function commandLedger(machines: string, maxSshdSeen: Map<string, number> = new Map()): Ledger {
  const detail: string[] = [];
  const listeners = pgrep(`${machines}/.*/sshd_config`);
  const dirs = readdirSync(machines).filter((d) => !d.startsWith('.'));
  const leaked = new Set<string>(dirs);
  for (const pid of listeners) {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    const m = new RegExp(`${machines}/([^/]+)/sshd_config`).exec(args);
    leaked.add(m?.[1] ?? `pid-${pid}`);
  }
  for (const id of leaked) detail.push(`leaked machine ${id}`);
  const made = new Map<string, number>();
  for (const c of calls(machines)) if (c.verb === 'acquire' && c.event === 'made rc=0') made.set(c.id, (made.get(c.id) ?? 0) + 1);
  const doubled = new Set<string>();
  for (const [id, n] of made) if (n > 1) doubled.add(id), detail.push(`lease ${id} acquired ${n} times`);
  for (const [id, n] of maxSshdSeen) if (n > 1) doubled.add(id), detail.push(`lease ${id} had ${n} sshd at once`);
  return { leaked: leaked.size, doubled: doubled.size, detail };
}

/** Samples sshd listeners per lease ID while a run goes on; the most seen at once per ID. */
export function sshdSampler(machines: string, everyMs = 200): { max: Map<string, number>; stop(): void } {
  const max = new Map<string, number>();
  let prev = new Map<string, number>();
  const t = setInterval(() => {
    const per = new Map<string, number>();
    for (const { args } of sshdListeners(`${machines}/.*/sshd_config`)) {
      const id = new RegExp(`${machines}/([^/]+)/sshd_config`).exec(args)?.[1];
      if (id) per.set(id, (per.get(id) ?? 0) + 1);
    }
    // Two listeners count only when two samples in a row see them: a daemonizing
    // sshd (parent about to exit, child reparented between pgrep and /proc reads)
    // looks like two for a moment. A real second machine lasts; the call log's
    // acquire count catches doubles independently.
    for (const [id, n] of per) {
      const sustained = n > 1 && (prev.get(id) ?? 0) > 1 ? Math.min(n, prev.get(id)!) : Math.min(n, 1);
      max.set(id, Math.max(sustained, max.get(id) ?? 0));
    }
    prev = per;
  }, everyMs);
  return { max, stop: () => clearInterval(t) };
}

export function ppidOf(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[1]);
  } catch {
    return -1;
  }
}

/** Whether a process runs (a zombie does not count). */
export function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

// ---- the Lambda emulator's ledger ----

export function accountOf(emu: LambdaEmulator, apiKey: string): string {
  return emu.accounts.find((a) => a.apiKey === apiKey)!.id;
}

/** Lambda: leaked = instances of the account not terminated; doubled = names with more than one instance ever. */
export function lambdaLedger(emu: LambdaEmulator, apiKey: string): Ledger & { instances: number; launched: number } {
  const detail: string[] = [];
  const all = emu.instances(apiKey);
  const live = all.filter((i) => i.status !== 'terminated');
  for (const i of live) detail.push(`leaked instance ${i.id} ${i.name} ${i.status}`);
  const byName = new Map<string, number>();
  for (const i of all) byName.set(i.name ?? '', (byName.get(i.name ?? '') ?? 0) + 1);
  let doubled = 0;
  for (const [name, n] of byName) if (n > 1) doubled++, detail.push(`${name} has ${n} instances`);
  const account = accountOf(emu, apiKey);
  const launched = emu.launches.filter((l) => l.account === account && l.outcome === 'launched').length;
  return { leaked: live.length, doubled, detail, instances: all.length, launched };
}

/** Lease IDs whose machine directory or emulator instance exists, for waiting on a step. */
export const instanceNamed = (emu: LambdaEmulator, apiKey: string, name: string) => emu.instances(apiKey).filter((i) => i.name === name);

export function report(title: string, fields: Record<string, number | string>): void {
  process.stdout.write(`${title}: ${Object.entries(fields).map(([k, v]) => `${k}=${v}`).join(' ')}\n`);
}
