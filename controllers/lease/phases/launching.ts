// Launching: the acquire runs as an effect; its result is recorded, then the
// machine is prepared (agent, device keys, measured facts) until it is ready
// or acquireTimeout passes.
import type { LeaseStatus } from '../../../src/api/index.js';
import { idleDeadline } from '../../../src/api/activity.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import type { MachineCheck } from '../driver.js';
import { doneOf, waiting, type Decision, type PhaseInput } from '../decision.js';
import { checkInputsOf, describeFacts } from '../status.js';
import { nextCheckIn } from '../policy/timing.js';

/** How long after acquireTimeout an acquire that ignores its cut-off is given up on all the same. */
export const ACQUIRE_CUTOFF_GRACE_MS = 30_000;

export function observeLaunching(input: PhaseInput): Decision {
  const { lease, now, settings } = input;
  const st = lease.status ?? {};
  if (lease.metadata?.deletionTimestamp) return { event: { type: 'DELETE_REQUESTED', message: 'deleted while launching; withdrawing the acquire and releasing the machine' } };
  const acquired = doneOf(input, 'acquire');
  if (acquired?.result.kind === 'failed') {
    const { reason, message, state, nothingRented } = acquired.result;
    // The price cap refused the launch before any machine was asked for: the
    // Lease waits for a price it may pay, as it would with a fresh listing.
    if (reason === 'OverPriceCap' && nothingRented) {
      return { event: { type: 'LAUNCH_REFUSED', reason, message: `${message}; waiting for the Offer's next listing` }, consumed: true };
    }
    return { event: { type: 'LAUNCH_FAILED', reason, message }, status: state ? { providerState: state } : {}, consumed: true };
  }
  const started = Date.parse(st.launch?.startedAt ?? '') || now;
  // A running acquire is cut off at acquireTimeout by the driver, which then
  // reports the provider's own words; this pass steps in only if it has not
  // ended ACQUIRE_CUTOFF_GRACE_MS later.
  const acquiring = input.effect?.state === 'running';
  const timeoutAt = started + settings.acquireTimeoutMs + (acquiring ? ACQUIRE_CUTOFF_GRACE_MS : 0);
  if (now > timeoutAt) {
    return { event: { type: 'LAUNCH_FAILED', reason: 'AcquireTimeout', message: `acquire and agent readiness took longer than acquireTimeout (${Math.round(settings.acquireTimeoutMs / 1000)}s); releasing` } };
  }
  if (acquired?.result.kind === 'launched' && !st.providerState) {
    // The effect wrote the machine itself: wait for the cache to show it.
    if (acquired.recorded) return { requeueAfter: 1000 };
    // Its write failed (the API server was away): the machine exists, so
    // record it now rather than take the launch for an interrupted one.
    const { state, machine } = acquired.result;
    return { status: { providerState: state, machine, message: 'machine acquired; installing the agent' } as Partial<LeaseStatus>, consumed: true, requeueAfter: 100 };
  }
  if (acquired) return { consumed: true, requeueAfter: 0 };
  if (acquiring) return { requeueAfter: Math.max(1000, timeoutAt - now) };
  if (!st.providerState) {
    // Launching with no recorded result and no acquire running here: a
    // previous controller stopped mid-acquire. Whatever it may have made is
    // found by its name and released.
    return { event: { type: 'LAUNCH_FAILED', reason: 'LaunchInterrupted', message: 'the controller stopped while acquire was running; releasing whatever it may have made' } };
  }
  const prepared = doneOf(input, 'prepare');
  if (prepared) return { ...fromPrepare(input, prepared.check, started, prepared.at), consumed: true };
  if (waiting(input.wake, now)) return { requeueAfter: input.wake!.at - now };
  return { start: 'prepare' };
}

function fromPrepare(input: PhaseInput, check: MachineCheck, startedMs: number, at: number): Decision {
  const { lease, settings } = input;
  if (check.kind === 'mismatch') return { event: { type: 'LAUNCH_FAILED', reason: check.reason, message: check.reason === 'FactsMismatch' ? `${check.message}; releasing it` : check.message } };
  if (check.kind === 'unreachable') {
    // Machines take a while to boot: keep trying until acquireTimeout.
    const wait = Math.max(100, Math.min(2000, startedMs + settings.acquireTimeoutMs - at));
    return { status: { message: `waiting for the machine's agent: ${check.message}` }, wake: { at: at + wait }, requeueAfter: wait };
  }
  // The prepare probe has just looked at the machine, and nothing can be
  // running on a machine not yet handed over: the first check comes one
  // check interval (or a deadline) after Ready, not at once.
  const st = lease.status ?? {};
  const first = nextCheckIn(at, settings.checkIntervalMs, [idleDeadline(st, at)]);
  const when = rfc3339(new Date(at));
  return {
    event: { type: 'MACHINE_READY', message: `ready (${describeFacts(check.facts)})` },
    status: { facts: check.facts, readyAt: when, lastActivityAt: when, installedKeysHash: check.keysHash, machine: check.machine },
    wake: { at: at + first, inputs: checkInputsOf(lease) },
    requeueAfter: first,
  };
}
