// The PeerFleet reconciler, readiness only: read the credential (and CA)
// Secrets with our own client, ask the peer for one namespaced list with
// that token, and write the verdict and the Ready condition. Lending is not
// built on it yet. Secrets are read by name (the chart grants get, never
// list or watch), so a fixed Secret is seen at the next poll, not at once.
import { DEFAULT_POLL_INTERVAL, durationMs, PEERFLEET_RESOURCE, type PeerFleet, type PeerFleetStatus } from '../../src/api/index.js';
import type { ObjectCache, ReconcileResult } from '../../src/kube/cache.js';
import { isConflict } from '../../src/kube/client.js';
import { setCondition } from '../../src/kube/conditions.js';
import type { EventRecorder } from '../../src/kube/events.js';
import { readSecretKey, SecretKeyError, type SecretDataReader } from '../../src/kube/secrets.js';
import type { StatusWriter } from '../../src/kube/status.js';
import { judgeReadiness, readyCondition, type SecretField, type Verdict, type VerdictInput } from './verdict.js';

/** What a probe needs from the peer: one namespaced list with our token. */
export interface PeerProbe {
  probe(): Promise<void>;
}

/** The peer as the fleet's spec and Secrets name it. */
export interface PeerAccess {
  fleetKey: string;
  origin: string;
  namespace: string;
  token: string;
  caPEM?: string | undefined;
}

export interface PeerFleetReconcilerDeps {
  fleets: ObjectCache<PeerFleet>;
  secrets: SecretDataReader;
  /** The peer queue for this access; may be cached by the caller while the access is unchanged. */
  peer(access: PeerAccess): PeerProbe;
  /** Forgets what was kept for a fleet that is gone. */
  forget?(fleetKey: string): void;
  status: Pick<StatusWriter, 'write'>;
  events: Pick<EventRecorder, 'record'>;
  now?: () => Date;
}

/** The first retry after the peer did not answer; doubled up to pollInterval. */
export const UNREACHABLE_RETRY_MS = 1000;

const SECRET_USES = {
  'spec.credentialSecretRef': { field: 'spec.credentialSecretRef', what: 'the peer bearer token', defaultKey: 'token' },
  'spec.caSecretRef': { field: 'spec.caSecretRef', what: 'the PEM certificate authority of the peer', defaultKey: 'ca.crt' },
} as const;

export class PeerFleetReconciler {
  /** Consecutive polls each fleet found the peer down, for the backoff. */
  private readonly downStreak = new Map<string, number>();

  constructor(private readonly deps: PeerFleetReconcilerDeps) {}

  async reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace = '', name = ''] = key.split('/');
    const fleet = this.deps.fleets.get(namespace, name);
    if (!fleet) {
      this.downStreak.delete(key);
      this.deps.forget?.(key);
      return;
    }
    const verdict = judgeReadiness(await this.observe(key, fleet));
    await this.record(fleet, verdict);
    return { requeueAfter: this.nextPoll(key, fleet, verdict) };
  }

  private async observe(key: string, fleet: PeerFleet): Promise<VerdictInput> {
    const namespace = fleet.metadata!.namespace!;
    const input: VerdictInput = { namespace, spec: fleet.spec };
    const read = async (field: SecretField) => {
      const ref = field === 'spec.caSecretRef' ? fleet.spec.caSecretRef : fleet.spec.credentialSecretRef;
      if (!ref) return undefined;
      try {
        return await readSecretKey(this.deps.secrets, { name: ref.name, namespace: ref.namespace || namespace, key: ref.key }, SECRET_USES[field]);
      } catch (err) {
        if (!(err instanceof SecretKeyError)) throw err;
        input.secret = { field, error: err };
        return undefined;
      }
    };
    const token = await read('spec.credentialSecretRef');
    if (input.secret || token === undefined) return input;
    const caPEM = await read('spec.caSecretRef');
    if (input.secret) return input;
    try {
      await this.deps.peer({ fleetKey: key, origin: fleet.spec.origin, namespace: fleet.spec.namespace, token, caPEM }).probe();
    } catch (err) {
      input.probeError = err;
    }
    return input;
  }

  /** Writes the verdict only when it changed, with an event when its code changed. */
  private async record(fleet: PeerFleet, verdict: Verdict): Promise<void> {
    const generation = fleet.metadata?.generation;
    const before = fleet.status?.verdict;
    const status: PeerFleetStatus = {
      ...fleet.status,
      observedGeneration: generation,
      verdict: {
        ready: verdict.ready,
        code: verdict.code,
        reasons: verdict.reasons,
        ...(verdict.failureClass ? { failureClass: verdict.failureClass } : {}),
      },
      conditions: setCondition(fleet.status?.conditions, readyCondition(verdict), generation, (this.deps.now ?? (() => new Date()))()),
    };
    try {
      await this.deps.status.write(PEERFLEET_RESOURCE, fleet, status);
    } catch (err) {
      // The cache was behind our own last write: the informer brings the
      // newer object and with it another reconcile.
      if (isConflict(err)) return;
      throw err;
    }
    if (before?.code !== verdict.code) {
      const text = verdict.ready ? `the peer API server at ${fleet.spec.origin} answered with our token` : verdict.reasons.join('; ');
      await this.deps.events.record(fleet, verdict.ready ? 'Normal' : 'Warning', verdict.code, text);
    }
  }

  private nextPoll(key: string, fleet: PeerFleet, verdict: Verdict): number {
    const poll = durationMs(fleet.spec.pollInterval ?? DEFAULT_POLL_INTERVAL);
    if (verdict.failureClass !== 'infra_down') {
      this.downStreak.delete(key);
      return poll;
    }
    // A peer that did not answer is asked again sooner, backing off to the
    // poll interval, so a short outage does not cost a whole interval.
    const streak = (this.downStreak.get(key) ?? 0) + 1;
    this.downStreak.set(key, streak);
    return Math.min(poll, UNREACHABLE_RETRY_MS * 2 ** Math.min(streak - 1, 20));
  }
}
