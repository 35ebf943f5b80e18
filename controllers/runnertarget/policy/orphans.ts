// The two orphan kinds spot pools leave, and preemption. A VM with no runner
// after its boot grace is marked; the next check takes a last look and
// deletes it if the runner still has not come (one check of grace against a
// slow registration). A registration that never came online (a zombie: its
// config made, its runner never connected) is no runner for this rule. A runner registration whose VM is gone (a preempted
// host) is removed. A VM that is TERMINATED, or a host whose VM vanished, was
// preempted: it leaves status, and demand replaces it if jobs wait.
import type { RunnerHost } from '../../../src/api/index.js';
import { vmPhase, type PoolRunner, type PoolVM } from '../observation.js';

/** How long a new VM may run without a registered runner: the boot and the JIT delivery take up to 40 min. */
export const BOOT_GRACE_MS = 45 * 60_000;

/** Host states whose runner is removed on purpose: no runner there is not an orphan. */
const LEAVING: readonly RunnerHost['state'][] = ['Draining', 'Deleting'];

export interface OrphanReport {
  /** VMs without a runner, first seen this check: status.hosts[].orphanSince is set. */
  mark: string[];
  /** Marked hosts whose runner came: the mark is cleared. */
  unmark: string[];
  /** VMs to delete: marked orphans after their last look, and preempted VMs left TERMINATED. */
  deleteVMs: { name: string; reason: 'Orphan' | 'Preempted'; message: string }[];
  /** Registrations whose VM is gone. */
  removeRunners: { name: string; id: number; message: string }[];
  /** Hosts preempted (VM TERMINATED or gone): they leave status. */
  preempted: string[];
}

export interface OrphanInput {
  hosts: readonly RunnerHost[];
  vms: readonly PoolVM[];
  runners: readonly PoolRunner[];
  /** Hosts a launch receipt is still Intended for: their VM may not exist yet. */
  launching: ReadonlySet<string>;
  now: number;
  bootGraceMs?: number;
  /** Zones the list could not read: a VM missing there is unseen, not gone. */
  unreachableZones?: readonly string[] | undefined;
}

export function findOrphans({ hosts, vms, runners, launching, now, bootGraceMs = BOOT_GRACE_MS, unreachableZones = [] }: OrphanInput): OrphanReport {
  const report: OrphanReport = { mark: [], unmark: [], deleteVMs: [], removeRunners: [], preempted: [] };
  const vmByName = new Map(vms.map((v) => [v.name, v]));
  const runnerByName = new Map(runners.map((r) => [r.name, r]));
  const hostByName = new Map(hosts.map((h) => [h.name, h]));

  for (const vm of vms) {
    const host = hostByName.get(vm.name);
    const phase = vmPhase(vm);
    if (phase === 'ended') {
      // A spot VM stopped by preemption (instanceTerminationAction DELETE removes most; some stay TERMINATED), or suspended or stopped.
      if (host && !LEAVING.includes(host.state)) report.preempted.push(vm.name);
      report.deleteVMs.push({ name: vm.name, reason: 'Preempted', message: `VM ${vm.name} in ${vm.zone} is ${vm.status}: preempted or stopped` });
      continue;
    }
    // Compute Engine is taking it down already: it is no capacity, and a delete sent now would be a second one.
    if (phase === 'leaving') {
      if (host && !LEAVING.includes(host.state)) report.preempted.push(vm.name);
      continue;
    }
    // A status nobody here knows: neither an orphan nor gone; the host reports it.
    if (phase === 'unknown') continue;
    const runner = runnerByName.get(vm.name);
    // Offline on a host that never got past Registering: GitHub keeps such a registration about a day, and the VM would bill all along.
    const zombie = runner?.status === 'offline' && (!host || host.state === 'Registering' || host.state === 'Launching');
    if (runner && !zombie) {
      if (host?.orphanSince) report.unmark.push(vm.name);
      continue;
    }
    if (host && LEAVING.includes(host.state)) continue;
    const age = now - Date.parse(vm.createdAt);
    if (!(age >= bootGraceMs)) continue;
    if (host?.orphanSince) {
      report.deleteVMs.push({
        name: vm.name,
        reason: 'Orphan',
        message: `VM ${vm.name} has had no ${zombie ? 'online' : 'registered'} runner since ${host.orphanSince} (boot grace ${bootGraceMs / 60_000} min) and still had none at a last look`,
      });
    } else {
      report.mark.push(vm.name);
    }
  }

  const unseen = new Set(unreachableZones);
  for (const host of hosts) {
    if (vmByName.has(host.name) || launching.has(host.name) || unseen.has(host.zone)) continue;
    if (host.state === 'Launching' || host.state === 'Deleting') continue;
    report.preempted.push(host.name);
  }

  for (const r of runners) {
    const vm = vmByName.get(r.name);
    if (vm && vmPhase(vm) !== 'ended' && vmPhase(vm) !== 'leaving') continue;
    if (launching.has(r.name)) continue;
    // Its VM may be in a zone the list could not read: where the host lives is known only from status.
    const zone = hostByName.get(r.name)?.zone;
    if (!vm && unseen.size > 0 && (zone === undefined || unseen.has(zone))) continue;
    report.removeRunners.push({ name: r.name, id: r.id, message: `runner ${r.name} is registered but its VM is ${vm ? vm.status : 'gone'}` });
  }
  return report;
}
