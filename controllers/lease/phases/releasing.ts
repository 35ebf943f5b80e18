// Releasing: whatever else runs for the Lease is stopped first (an acquire
// being withdrawn, a probe), then the provider's release runs as an effect
// and is retried every check interval until the provider confirms.
import type { LeaseStatus } from '../../../src/api/index.js';
import { rfc3339 } from '../../../src/kube/conditions.js';
import { doneOf, waiting, type Decision, type PhaseInput } from '../decision.js';

export function observeReleasing(input: PhaseInput): Decision {
  const { lease, now, settings } = input;
  const st = lease.status ?? {};
  const effect = input.effect;
  // A release must not race the acquire it undoes: that would let the
  // machine appear after the release looked for it.
  if (effect?.state === 'running') return effect.id.startsWith('release/') ? {} : { cancel: true };
  const released = doneOf(input, 'release');
  if (released) {
    const attempts = (st.releaseAttempts ?? 0) + 1;
    if (released.error === undefined) {
      return {
        event: { type: 'RELEASE_CONFIRMED', message: 'released: the provider confirmed the machine is gone' },
        status: { releasedAt: rfc3339(new Date(released.at)), releaseAttempts: attempts },
        consumed: true,
      };
    }
    return {
      event: { type: 'RELEASE_FAILED', message: `release attempt ${attempts} failed: ${released.error}; retrying in ${Math.round(settings.checkIntervalMs / 1000)}s` },
      status: { releaseAttempts: attempts, lastReleaseError: released.error },
      consumed: true,
      requeueAfter: settings.checkIntervalMs,
    };
  }
  const acquired = doneOf(input, 'acquire');
  if (acquired) {
    // A withdrawn or late acquire may still have made a machine: its state
    // goes to status first, so that the release is handed it.
    const state = acquired.result.state;
    return { consumed: true, status: state && !st.providerState ? ({ providerState: state } as Partial<LeaseStatus>) : {}, requeueAfter: 0 };
  }
  // A probe's result has no use any more.
  if (effect?.state === 'done') return { consumed: true, requeueAfter: 0 };
  if (waiting(input.wake, now)) return { requeueAfter: input.wake!.at - now };
  return { start: 'release' };
}
