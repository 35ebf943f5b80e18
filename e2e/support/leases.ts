// Shared fixtures for Lease e2e tests: Offer and Lease manifests, the
// controller started for one namespace, and the sshd machines the provider
// (e2e/providers/sshd-machine.sh) makes, found and stopped by directory.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startController, type ControllerProcess } from './controller.js';
import { apply, freshNamespace, getJSON, testKubectl, type Kubectl } from './kube.js';

export const SSHD_PROVIDER = join(process.cwd(), 'e2e/providers/sshd-machine.sh');
export const BAD_TARGET_PROVIDER = join(process.cwd(), 'e2e/providers/bad-target.sh');

export interface OfferOptions {
  acquire: string[];
  release: string[];
  shape?: Record<string, unknown>;
  pricePerHour?: number;
  idleTimeout?: string;
  maxLifetime?: string;
}

/** acquire and release argv for the sshd provider, with `env` ("A=1 B=2", or ["A=x y"] for values with spaces) set through /usr/bin/env. */
export function sshdCommands(env?: string | string[], provider = SSHD_PROVIDER): { acquire: string[]; release: string[] } {
  const vars = typeof env === 'string' ? env.split(' ') : env ?? [];
  const wrap = vars.length ? ['/usr/bin/env', ...vars] : [];
  return { acquire: [...wrap, provider, 'acquire'], release: [...wrap, provider, 'release'] };
}

export interface LeaseFixture {
  kubectl: Kubectl;
  ns: string;
  /** Where the sshd provider keeps this file's machines (LEASEHOLD_MACHINES_DIR). */
  machines: string;
  /** Appended to Offer names: Offers are cluster-scoped and test files share a cluster. */
  suffix: string;
  /** Applies a command Offer named `${name}-${suffix}` (shape linux/amd64, 1 cpu unless given); returns the full name. */
  offer(name: string, opts: OfferOptions): Promise<string>;
  lease(name: string, spec: { where: string; offer?: string; sshKeys?: string[] }): Promise<void>;
  status(name: string): Promise<any>;
  waitPhase(name: string, want: string, ms?: number): Promise<any>;
  /** PIDs of the sshd of one lease ID, or '' when none runs. */
  sshdFor(leaseID: string): string;
  /** PIDs of every sshd this file's machines directory started, or '' when none runs. */
  sshdLeft(): string;
  /** Starts the controller for this namespace with the machines directory; `args` come after the common ones. */
  startController(args: string[], env?: Record<string, string>): Promise<ControllerProcess>;
  /** Deletes the Offers made here and stops any sshd left. */
  cleanup(): Promise<void>;
}

function pgrep(pattern: string): string {
  try {
    return execFileSync('pgrep', ['-f', pattern]).toString().trim();
  } catch {
    return '';
  }
}

export async function leaseFixture(prefix: string): Promise<LeaseFixture> {
  const kubectl = testKubectl();
  const ns = await freshNamespace(kubectl, prefix);
  const machines = mkdtempSync(join(tmpdir(), 'leasehold-machines-'));
  const suffix = Date.now().toString(36);
  const offers: string[] = [];
  const fx: LeaseFixture = {
    kubectl,
    ns,
    machines,
    suffix,
    async offer(name, opts) {
      const full = `${name}-${suffix}`;
      offers.push(full);
      await apply(kubectl, JSON.stringify({
        apiVersion: 'leasehold.dev/v1alpha1',
        kind: 'Offer',
        metadata: { name: full },
        spec: {
          command: { acquire: opts.acquire, release: opts.release, shape: opts.shape ?? { os: 'linux', arch: 'amd64', cpus: 1 } },
          ...(opts.pricePerHour === undefined ? {} : { pricePerHour: opts.pricePerHour }),
          ...(opts.idleTimeout === undefined ? {} : { idleTimeout: opts.idleTimeout }),
          ...(opts.maxLifetime === undefined ? {} : { maxLifetime: opts.maxLifetime }),
        },
      }));
      return full;
    },
    async lease(name, spec) {
      await apply(kubectl, JSON.stringify({
        apiVersion: 'leasehold.dev/v1alpha1',
        kind: 'Lease',
        metadata: { name, namespace: ns },
        spec: { where: spec.where, ...(spec.offer ? { offer: spec.offer } : {}), ...(spec.sshKeys ? { sshKeys: spec.sshKeys } : {}) },
      }));
    },
    status: async (name) => (await getJSON(kubectl, ['-n', ns, 'leases.leasehold.dev', name]))?.status,
    async waitPhase(name, want, ms = 60_000) {
      // Ends early when the Lease settles in another final phase, and says where it stood, so a failure names its reason.
      const deadline = Date.now() + ms;
      let last: any;
      while (Date.now() < deadline) {
        last = await fx.status(name).catch(() => last);
        if (last?.phase === want) return last;
        if (last && want !== 'Failed' && (last.phase === 'Failed' || last.phase === 'Released')) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      const where = last ? `phase ${last.phase}, reason ${last.reason ?? '-'}, message ${JSON.stringify(last.message ?? '')}` : 'no status';
      throw new Error(`${name} did not reach ${want} within ${ms} ms: ${where}`);
    },
    sshdFor: (leaseID) => pgrep(join(machines, leaseID)),
    sshdLeft: () => pgrep(`${machines}/.*/sshd_config`),
    startController: (args, env = {}) =>
      startController(process.env.E2E_KUBECONFIG!, ['--watch-namespace', ns, '--leader-election-namespace', ns, '--namespace', ns, ...args], {
        LEASEHOLD_MACHINES_DIR: machines,
        ...env,
      }),
    async cleanup() {
      for (const o of offers) await kubectl(['delete', 'offer.leasehold.dev', o, '--ignore-not-found', '--wait=false']);
      try {
        execFileSync('pkill', ['-f', `${machines}/.*/sshd_config`]);
      } catch {
        // nothing left to stop
      }
    },
  };
  return fx;
}
