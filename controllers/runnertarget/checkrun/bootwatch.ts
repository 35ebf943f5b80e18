// The boot watch: between two checks, the VM of each open Launch is read
// on its own (one instances.get), and once it is RUNNING and its sshd
// answers with the published host key, its runner config is delivered at
// once rather than at the launch's follow-up check. It lists nothing at
// GitHub and writes no status: the Launch receipt the check wrote before
// the insert is the intent it acts under, and the next check settles it.
import type { Receipt, RunnerTarget } from '../../../src/api/index.js';
import { errorText } from '../../../src/kube/errors.js';
import { isRateLimited, retryAtAfter } from '../policy/ratelimit.js';
import { openReceipts } from '../policy/receipts.js';
import type { ChangeContext } from './changecontext.js';
import type { CheckDeps } from './checkdeps.js';
import { checkLeaseName } from './checklease.js';
import { deliverOver } from './deliver.js';
import { DurabilityGuard } from './durability.js';
import { openHost } from './hostssh.js';
import { hostAddress, INSTALLATION_LABEL, resolveRunnerGroup, TARGET_UID_LABEL, vmLabels, type TargetClients } from './providers.js';
import { groupRef } from './runnergroupids.js';
import type { SshSession } from '../../../src/machine/ssh.js';

/** The first look after a launch, and how each gap grows after a look that found nothing to deliver (up to the follow-up): about a dozen looks for a 40 s boot. */
export const WATCH_FIRST_MS = 1_000;
export const WATCH_GROWTH = 1.2;

/** The gap after a look `gapMs` after the last one: growing, never above the launch's follow-up. */
export const nextWatchGap = (gapMs: number, followUpMs: number) => Math.min(Math.ceil(gapMs * WATCH_GROWTH), followUpMs);

/**
 * Launches the boot watch looks after: open Launch receipts of a target
 * that is neither deleted nor a dry run, whose host is not known to have
 * its config (`configured`). A Register's host runs already: its check
 * delivers at once.
 */
export function watchedLaunches(target: RunnerTarget, configured: ReadonlySet<string>): Receipt[] {
  if (target.metadata?.deletionTimestamp || target.spec.dryRun) return [];
  return openReceipts(target.status?.receipts).filter((r) => r.action === 'Launch' && r.zone && r.hosts.length === 1 && !configured.has(r.id));
}

export interface WatchResult {
  /** Receipts whose host has its runner config now (delivered by this look, or found there). */
  configured: string[];
  /** GitHub answered a rate limit: no request to it before this time (ms). */
  limitedUntil?: number;
}

type Ready = { receipt: Receipt; name: string; session: SshSession };

/** One look at the watched launches of `target`; never throws (what it could not do is left to the next look or check). */
export async function watchLaunches(deps: CheckDeps, target: RunnerTarget, receipts: readonly Receipt[], signal?: AbortSignal): Promise<WatchResult> {
  const key = `${target.metadata!.namespace}/${target.metadata!.name}`;
  const ready: Ready[] = [];
  try {
    const clients = await deps.providers.clients(target);
    const blocked = clients.github.blockedUntil?.getTime();
    if (blocked !== undefined && blocked > (deps.now ?? Date.now)()) return { configured: [], limitedUntil: blocked };
    const host = await deps.hostAccess(target);
    const looks = await Promise.all(receipts.map((r) => reachable(r, target, clients, deps, host, signal)));
    for (const r of looks) if (r) ready.push(r);
    if (!ready.length) return { configured: [] };
    return await deliverUnderLease(deps, target, clients, host, ready, signal);
  } catch (err) {
    deps.log?.info({ target: key, err: errorText(err) }, 'boot watch: looking at the launches failed; the next look or check tries again');
    if (isRateLimited(err)) return { configured: [], limitedUntil: retryAtAfter(err, (deps.now ?? Date.now)()) };
    return { configured: [] };
  } finally {
    for (const r of ready) r.session.close();
  }
}

/** The launch's VM, when it is this target's, RUNNING, and its sshd admits us with the published host key pinned. */
async function reachable(receipt: Receipt, target: RunnerTarget, clients: TargetClients, deps: CheckDeps, host: Awaited<ReturnType<CheckDeps['hostAccess']>>, signal?: AbortSignal): Promise<Ready | undefined> {
  const name = receipt.hosts[0]!;
  const zone = receipt.zone!;
  let vm;
  try {
    vm = await clients.gce.get(zone, name, signal);
  } catch {
    // Not there yet (the insert's Operation is still running), or not readable now: the next look or check reads it.
    return undefined;
  }
  const mine = vmLabels(target, deps.installationID);
  if (vm.labels[TARGET_UID_LABEL] !== mine[TARGET_UID_LABEL] || vm.labels[INSTALLATION_LABEL] !== mine[INSTALLATION_LABEL]) return undefined;
  if (vm.status !== 'RUNNING') return undefined;
  const externalIP = target.spec.gce.externalIP !== false;
  try {
    const opened = await openHost(name, zone, clients, host, signal, { address: hostAddress(vm, externalIP), externalIP, createdAt: vm.creationTimestamp });
    return 'session' in opened ? { receipt, name, session: opened.session } : undefined;
  } catch {
    // Its host keys could not be read now: the next look or check tries again. Caught here, so that the sessions other looks opened are closed.
    return undefined;
  }
}

/**
 * The deliveries, under the target's check lease (no check runs meanwhile,
 * here or on another replica) and only for receipts a fresh read still
 * shows Intended: a check may have settled or abandoned one since.
 */
async function deliverUnderLease(deps: CheckDeps, target: RunnerTarget, clients: TargetClients, host: Awaited<ReturnType<CheckDeps['hostAccess']>>, ready: readonly Ready[], signal?: AbortSignal): Promise<WatchResult> {
  const uid = target.metadata!.uid!;
  const got = await deps.leases.acquire(checkLeaseName(uid), { 'leasehold.dev/runnertarget': `${target.metadata!.namespace}/${target.metadata!.name}` });
  if (!got.held) return { configured: [] };
  const lease = got.lease;
  try {
    const fresh = await deps.read(target.metadata!.namespace!, target.metadata!.name!);
    if (!fresh || fresh.metadata?.uid !== uid || fresh.metadata?.deletionTimestamp || fresh.spec.dryRun) return { configured: [] };
    const open = new Set(openReceipts(fresh.status?.receipts).map((r) => r.id));
    const now = deps.now ?? Date.now;
    const gh = fresh.spec.github;
    const stop = signal ? AbortSignal.any([signal, lease.signal]) : lease.signal;
    const lookUp = () => resolveRunnerGroup(clients.github, gh.runnerGroup, gh.org, stop);
    const runnerGroupId = deps.runnerGroups ? await deps.runnerGroups.resolve(groupRef(gh), lookUp) : await lookUp();
    const ctx: ChangeContext = {
      target: fresh,
      clients,
      observation: { at: now(), jobs: [], runners: [], vms: [], probes: new Map(), runnerGroupId },
      installationID: deps.installationID,
      // The access the sessions were opened with: the same target (its uid is checked above).
      host,
      guard: new DurabilityGuard(),
      signal: stop,
      now,
      // Nothing is launched, recorded or settled here: only a config delivered under an open receipt.
      affordable: () => false,
      record: async () => false,
      settle: async () => false,
      runnerGroupGone: (id) => deps.runnerGroups?.forget(groupRef(gh), id),
    };
    const result: WatchResult = { configured: [] };
    await Promise.all(
      ready
        .filter((r) => open.has(r.receipt.id))
        .map(async ({ receipt, name, session }) => {
          try {
            const outcome = await deliverOver(session, name, receipt.id, ctx, { groupId: runnerGroupId, unlisted: true });
            if (outcome.configOnHost) result.configured.push(receipt.id);
            if (outcome.event.reason !== 'RunnerStarting') await deps.events.record(fresh, outcome.event.type, outcome.event.reason, outcome.event.message);
          } catch (err) {
            // A registration left without its config (GitHub then refuses the name) is the next check's to clear: it lists the runners.
            deps.log?.info({ target: `${fresh.metadata!.namespace}/${fresh.metadata!.name}`, host: name, err: errorText(err) }, 'boot watch: delivering the runner config failed; the next check continues the launch');
            if (isRateLimited(err)) result.limitedUntil = retryAtAfter(err, now());
          }
        }),
    );
    return result;
  } finally {
    if (!lease.signal.aborted) await lease.release();
  }
}
