// leasehold leases [-A] [--json]: this namespace's Leases (every namespace
// with -A): name, phase, where, offer, price, host, idle deadline, what keeps
// it busy, why it ended.
import type { Lease } from '../src/api/lease.js';
import { idleDeadline as releaseDeadline, lastActivity } from '../src/api/activity.js';
import { commonFlags, parseCommand, positionals } from './flags.js';
import { connect } from './kube.js';
import { price, span, table } from './output.js';

export const LEASES_USAGE = 'usage: leasehold leases [-A] [--json] [-n NAMESPACE]';

export interface Out {
  write(text: string): unknown;
}

/** When an active Lease is released unless work is seen: idle timeout after its last activity, or its lifetime end if sooner. */
export function idleDeadline(lease: Lease): number | undefined {
  const st = lease.status ?? {};
  if (st.phase !== 'Ready' && st.phase !== 'Idle') return undefined;
  const last = lastActivity({ readyAt: st.readyAt, lastActivityAt: st.lastActivityAt });
  if (!last) return undefined;
  return releaseDeadline(st, last);
}

export function leaseRow(lease: Lease, now: number, allNamespaces: boolean): string[] {
  const st = lease.status ?? {};
  const ssh = st.machine?.ssh;
  const deadline = idleDeadline(lease);
  return [
    ...(allNamespaces ? [lease.metadata?.namespace ?? ''] : []),
    lease.metadata?.name ?? '',
    lease.metadata?.deletionTimestamp && st.phase !== 'Releasing' ? `${st.phase ?? 'Pending'} (deleting)` : st.phase ?? 'Pending',
    lease.spec.where,
    st.offer ?? lease.spec.offer ?? '-',
    price(st.pricePerHour),
    ssh ? `${ssh.user}@${ssh.host}:${ssh.port ?? 22}` : '-',
    deadline === undefined ? '-' : `${new Date(deadline).toISOString().replace(/\.\d+Z$/, 'Z')} (in ${span(deadline - now)})`,
    busyText(lease),
    st.endReason ?? (st.phase === 'Pending' && st.reason ? `waiting: ${st.reason}` : '-'),
  ];
}

export const LEASE_HEADER = ['NAME', 'PHASE', 'WHERE', 'OFFER', 'PRICE/H', 'HOST', 'IDLE DEADLINE', 'BUSY', 'ENDED'];

/** What the last check saw keeping a Ready or Idle Lease's machine (status.usage.busy): "1 session, 1 GPU process", or "none". */
function busyText(lease: Lease): string {
  const st = lease.status ?? {};
  if (st.phase !== 'Ready' && st.phase !== 'Idle') return '-';
  return st.usage?.busy ?? '-';
}

export function leasesTable(leases: readonly Lease[], now: number, allNamespaces: boolean): string {
  const sorted = [...leases].sort((a, b) => `${a.metadata?.namespace}/${a.metadata?.name}`.localeCompare(`${b.metadata?.namespace}/${b.metadata?.name}`));
  return table([...(allNamespaces ? ['NAMESPACE'] : []), ...LEASE_HEADER], sorted.map((l) => leaseRow(l, now, allNamespaces)));
}

/** The --json form: one object per Lease with the same fields as the table, as values (times in RFC 3339, price a number). */
export function leaseJSON(lease: Lease): Record<string, unknown> {
  const st = lease.status ?? {};
  const deadline = idleDeadline(lease);
  return {
    namespace: lease.metadata?.namespace,
    name: lease.metadata?.name,
    phase: st.phase ?? 'Pending',
    where: lease.spec.where,
    offer: st.offer ?? lease.spec.offer ?? null,
    pricePerHour: st.pricePerHour ?? null,
    ssh: st.machine?.ssh ?? null,
    idleDeadline: deadline === undefined ? null : new Date(deadline).toISOString(),
    expiresAt: st.expiresAt ?? null,
    usage: st.usage ?? null,
    endReason: st.endReason ?? null,
    reason: st.reason ?? null,
    message: st.message ?? null,
  };
}

export async function leases(args: string[], out: Out, env: NodeJS.ProcessEnv): Promise<number> {
  const { values, positionals: pos } = parseCommand(args, { 'all-namespaces': { type: 'boolean', short: 'A' }, json: { type: 'boolean' } }, LEASES_USAGE);
  if (values.help) return void out.write(`${LEASES_USAGE}\n`), 0;
  positionals(pos, [], LEASES_USAGE);
  const cluster = await connect(commonFlags(values), env);
  const all = values['all-namespaces'] ?? false;
  const items = await cluster.leases.list(all ? undefined : cluster.namespace);
  if (values.json) out.write(`${JSON.stringify(items.map(leaseJSON), null, 2)}\n`);
  else if (!items.length) out.write(all ? 'No Leases.\n' : `No Leases in namespace ${cluster.namespace}.\n`);
  else out.write(leasesTable(items, Date.now(), all));
  return 0;
}
