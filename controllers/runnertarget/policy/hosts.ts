// Each host's state from what this check saw: its VM, its runner (GitHub's
// busy flag, a job in progress on it, or a job process SSH found) and the
// state status recorded. Draining and Deleting belong to scale-down and
// change only there, but for a host whose runner left after its job. A
// runner that was online and is listed offline (its process crashed, the
// host rebooted) makes its host Offline: no capacity, and drained once the
// offline grace passes (scaledown.ts). VMs of the pool missing from status
// (a status write lost after a launch) are adopted, so that orphan and
// budget policies see them.
import type { RunnerHost, RunnerTargetSpec } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { busyRunners } from './demand.js';
import { vmPhase, type Observation, type PoolRunner, type PoolVM } from '../observation.js';

/** States in which the host's runner has been seen online: one missing or offline now has gone away, not yet to come. */
const WAS_ONLINE: readonly RunnerHost['state'][] = ['Idle', 'Busy', 'Offline'];
const unknownMessage = (vm: PoolVM) =>
  `VM status ${vm.reportedStatus ?? vm.status} is not one this controller knows: the host is left alone (not capacity, not deleted) until Compute Engine shows a known status`;

/** A tier's price for a VM, or the dearest price of the spec when its machine type is not a tier any more. */
export function priceOf(vm: Pick<PoolVM, 'machineType' | 'provisioningModel'>, tiers: RunnerTargetSpec['gce']['machineTypeTiers']): number {
  const price = (t: (typeof tiers)[number]) => (vm.provisioningModel === 'STANDARD' ? (t.standardPricePerHour ?? t.pricePerHour) : t.pricePerHour);
  const tier = tiers.find((t) => t.machineType === vm.machineType);
  // An unknown machine type is counted at the highest price: spend is never under-counted.
  return tier ? price(tier) : Math.max(...tiers.map(price));
}

/** A host whose runner was up and is gone: a just-in-time runner leaves after its one job, so it has finished. */
export function runnerFinished(host: Pick<RunnerHost, 'state' | 'runnerID'>, runner: PoolRunner | undefined): boolean {
  return !runner && WAS_ONLINE.includes(host.state) && host.runnerID !== undefined;
}

export function observeHosts(hosts: readonly RunnerHost[], observation: Observation, tiers: RunnerTargetSpec['gce']['machineTypeTiers']): RunnerHost[] {
  const now = rfc3339(new Date(observation.at));
  const vms = new Map(observation.vms.map((v) => [v.name, v]));
  const runners = new Map(observation.runners.map((r) => [r.name, r]));
  const busy = busyRunners(observation.runners, observation.jobs);
  for (const [name, probe] of observation.probes) if (probe.job === 'running') busy.add(name);

  const next = hosts.map((h): RunnerHost => {
    if (h.state === 'Draining' || h.state === 'Deleting') return h;
    const vm = vms.get(h.name);
    // Leaving and ended VMs are the orphan policy's (the host leaves status there).
    if (!vm || vmPhase(vm) === 'leaving' || vmPhase(vm) === 'ended') return h;
    if (vmPhase(vm) === 'unknown') {
      const { idleSince: _idle, ...rest } = h;
      return { ...rest, state: 'Unknown', message: unknownMessage(vm) };
    }
    if (h.state === 'Launching' && vm.status !== 'RUNNING') return h;
    const runner = runners.get(h.name);
    const { idleSince: _idle, message: _message, offlineSince: _offline, ...rest } = h;
    if (busy.has(h.name)) return { ...rest, state: 'Busy', ...(runner ? { runnerID: runner.id } : {}) };
    // A JIT runner is ephemeral: GitHub removes it after its one job. A host whose runner was up and is gone
    // takes no more jobs; it drains like any other, so SSH confirms no job runs before its VM is deleted.
    if (runnerFinished(h, runner)) {
      return { ...rest, state: 'Draining', message: `runner ${h.name} is gone (a just-in-time runner leaves after its one job); confirming over SSH that no job runs before the VM is deleted` };
    }
    if (!runner) return { ...rest, state: 'Registering', message: 'VM running; its runner has not registered' };
    if (runner.status !== 'online' && WAS_ONLINE.includes(h.state)) {
      const since = h.state === 'Offline' && h.offlineSince ? h.offlineSince : now;
      return { ...rest, state: 'Offline', runnerID: runner.id, offlineSince: since, message: `runner ${h.name} went offline (seen since ${since}); it takes no jobs, and is drained and replaced unless it is back online within the offline grace` };
    }
    // A JIT registration is offline from the moment its config is made until the host's runner connects: the boot grace covers it.
    if (runner.status !== 'online') return { ...rest, state: 'Registering', runnerID: runner.id, message: 'runner registered but offline' };
    // The idle clock restarts whenever the host is seen busy, so "idle for N s" means every check since saw it idle.
    return { ...rest, state: 'Idle', runnerID: runner.id, idleSince: h.state === 'Idle' && h.idleSince ? h.idleSince : now };
  });

  const known = new Set(hosts.map((h) => h.name));
  for (const vm of observation.vms) {
    if (known.has(vm.name) || vmPhase(vm) === 'leaving' || vmPhase(vm) === 'ended') continue;
    const runner = runners.get(vm.name);
    if (vmPhase(vm) === 'unknown') {
      next.push({ name: vm.name, zone: vm.zone, machineType: vm.machineType, provisioningModel: vm.provisioningModel, pricePerHour: priceOf(vm, tiers), state: 'Unknown', createdAt: vm.createdAt, ...(runner ? { runnerID: runner.id } : {}), message: `adopted: ${unknownMessage(vm)}` });
      continue;
    }
    next.push({
      name: vm.name,
      zone: vm.zone,
      machineType: vm.machineType,
      provisioningModel: vm.provisioningModel,
      pricePerHour: priceOf(vm, tiers),
      state: busy.has(vm.name) ? 'Busy' : runner?.status === 'online' ? 'Idle' : 'Registering',
      createdAt: vm.createdAt,
      ...(runner ? { runnerID: runner.id } : {}),
      ...(runner?.status === 'online' && !busy.has(vm.name) ? { idleSince: now } : {}),
      message: 'adopted: a VM of the pool that status did not list',
    });
  }
  return next;
}
