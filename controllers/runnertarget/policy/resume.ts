// What to do with a receipt a dead check left Intended: the change may or
// may not have happened, so each step is read from what exists now and
// repeated only if it has not. A Launch is inserted again with the same
// requestId (Compute Engine creates at most one instance per requestId),
// waited for while it boots, and given its runner config once it runs.
import type { Receipt } from '../../../src/api/index.js';
import { vmPhase, type Observation } from '../observation.js';

/** The longest a launch may take from its receipt to a registered runner (the boot and the remote build). */
export const LAUNCH_TIMEOUT_MS = 40 * 60_000;

export type ResumeStep =
  /** The change is visible: settle the receipt Done. */
  | { step: 'done'; message: string }
  /** Make the same call again (same requestId where there is one). */
  | { step: 'repeat'; message: string }
  /** Launch: the VM exists and boots; look again at the next check. */
  | { step: 'waitForBoot'; message: string }
  /** What exists cannot be told this check (its zone could not be listed, its status is unknown): look again at the next. */
  | { step: 'wait'; message: string }
  /**
   * Launch: the VM runs and no runner is online: deliver the JIT config over
   * pinned SSH. `stale`: a registration that is there but offline, made for a
   * config that may never have reached the host (a check that died between
   * generate-jitconfig and the write): the host decides (../checkrun/deliver.ts).
   */
  | { step: 'deliverConfig'; message: string; stale?: { id: number } }
  /** The change cannot complete: settle Failed; a launched VM is deleted as an orphan. */
  | { step: 'failed'; message: string };

export function resumeStep(receipt: Receipt, observation: Pick<Observation, 'vms' | 'runners' | 'at' | 'unreachableZones'>, launchTimeoutMs = LAUNCH_TIMEOUT_MS): ResumeStep {
  const name = receipt.hosts[0] ?? '';
  const vm = observation.vms.find((v) => v.name === name);
  const unseen = !vm && receipt.zone !== undefined && (observation.unreachableZones ?? []).includes(receipt.zone);
  const phase = vm ? vmPhase(vm) : undefined;
  const runner = observation.runners.find((r) => r.name === name);
  switch (receipt.action) {
    case 'Launch': {
      // Registered is not enough: a JIT registration is there, offline, from the moment its config is made.
      if (runner?.status === 'online') return { step: 'done', message: `runner ${name} registered` };
      const age = observation.at - Date.parse(receipt.at);
      if (!(age < launchTimeoutMs)) return { step: 'failed', message: `no runner ${runner ? 'online' : 'registered'} for ${name} within ${launchTimeoutMs / 60_000} min of its launch` };
      if (unseen) return { step: 'wait', message: `zone ${receipt.zone} could not be listed this check; VM ${name} is looked for again at the next` };
      if (!vm) return { step: 'repeat', message: `VM ${name} does not exist: inserting it again with the same requestId` };
      if (phase === 'ended' || phase === 'leaving') return { step: 'failed', message: `VM ${name} is ${vm.status} before its runner registered (preempted while booting)` };
      if (phase === 'booting') return { step: 'waitForBoot', message: `VM ${name} is ${vm.status}` };
      if (phase === 'unknown') return { step: 'wait', message: `VM ${name} shows status ${vm.reportedStatus ?? vm.status}, which this controller does not know: left alone` };
      if (runner) return { step: 'deliverConfig', message: `VM ${name} runs and its runner ${runner.id} is registered but offline`, stale: { id: runner.id } };
      return { step: 'deliverConfig', message: `VM ${name} runs and has no runner: delivering its runner config over SSH` };
    }
    case 'Register':
      if (runner?.status === 'online') return { step: 'done', message: `runner ${name} registered` };
      if (unseen) return { step: 'wait', message: `zone ${receipt.zone} could not be listed this check; VM ${name} is looked for again at the next` };
      if (!vm || phase !== 'running') return { step: 'failed', message: `VM ${name} is ${vm ? vm.status : 'gone'}; no runner to register` };
      // As for a Launch: the host tells a runner starting (its config is there) from a registration whose config never arrived.
      if (runner) return { step: 'deliverConfig', message: `runner ${name} is registered but offline`, stale: { id: runner.id } };
      return { step: 'repeat', message: `runner ${name} is not registered: delivering a new runner config` };
    case 'Deregister':
    case 'RemoveRunner':
      return runner ? { step: 'repeat', message: `runner ${name} is still registered: removing it again` } : { step: 'done', message: `runner ${name} is gone` };
    case 'Delete':
      if (unseen) return { step: 'wait', message: `zone ${receipt.zone} could not be listed this check; whether VM ${name} is gone is looked at again at the next` };
      if (!vm) return { step: 'done', message: `VM ${name} is gone` };
      // Compute Engine is taking it down: a second delete would add nothing.
      if (phase === 'leaving') return { step: 'done', message: `VM ${name} is ${vm.status}: on its way out` };
      return { step: 'repeat', message: `VM ${name} is still there (${vm.status}): deleting it again with the same requestId` };
    case 'Rerun':
      // Decided from the workflow run's state (preemption.ts rerunStep), which the check reads when it comes to it.
      return { step: 'repeat', message: `workflow run ${receipt.runId} in ${receipt.repository}: looking at it again` };
  }
}
