// The coordination.k8s.io/v1 Lease a live check holds on its RunnerTarget,
// so that two replicas (or a leader change mid-check) never act on one
// target at once. A Lease held by another identity is taken over only once
// its record has stayed unchanged for its whole duration by our own clock
// (as leader election does): remote timestamps are never compared with
// local time. The holder renews it every third of the duration; a renewal
// that fails or conflicts aborts the check's signal at once.
import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { isConflict, isNotFound } from '../../../src/kube/client.js';
import { errorText } from '../../../src/kube/errors.js';

/** The name of a target's check lease: its UID, unique across namespaces and recreations. */
export const checkLeaseName = (uid: string) => `runnertarget-${uid}`;

export interface HeldLease {
  /** Aborted when the lease is lost (a renewal failed or another holder wrote it). */
  signal: AbortSignal;
  release(): Promise<void>;
}

export type Acquired = { held: true; lease: HeldLease } | { held: false; holder: string; retryAfterMs: number };

export interface CheckLeaseOptions {
  api: Pick<CoordinationV1Api, 'readNamespacedLease' | 'createNamespacedLease' | 'replaceNamespacedLease'>;
  namespace: string;
  identity: string;
  durationMs?: number;
  now?: () => number;
}

const fingerprint = (l: V1Lease) => JSON.stringify([l.spec?.holderIdentity ?? '', String(l.spec?.renewTime ?? ''), l.metadata?.resourceVersion ?? '']);

export class CheckLeases {
  private readonly seen = new Map<string, { print: string; at: number }>();
  private readonly durationMs: number;

  constructor(private readonly opts: CheckLeaseOptions) {
    this.durationMs = opts.durationMs ?? 30_000;
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** One attempt, no waiting: the lease, or who holds it and when to look again. */
  async acquire(name: string, annotations: Record<string, string>): Promise<Acquired> {
    const { api, namespace, identity } = this.opts;
    const spec = () => ({ holderIdentity: identity, leaseDurationSeconds: Math.ceil(this.durationMs / 1000), acquireTime: new V1MicroTime(this.now()), renewTime: new V1MicroTime(this.now()) });
    let current: V1Lease | undefined;
    try {
      current = await api.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    let written: V1Lease;
    try {
      if (!current) {
        written = await api.createNamespacedLease({ namespace, body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace, annotations }, spec: spec() } });
      } else {
        const holder = current.spec?.holderIdentity ?? '';
        if (holder && holder !== identity && !this.expired(name, current)) return { held: false, holder, retryAfterMs: this.durationMs + 1000 };
        const transitions = (current.spec?.leaseTransitions ?? 0) + (holder === identity ? 0 : 1);
        written = await api.replaceNamespacedLease({ namespace, name, body: { ...current, spec: { ...current.spec, ...spec(), leaseTransitions: transitions } } });
      }
    } catch (err) {
      // Another replica wrote it first: it holds the lease now.
      if (isConflict(err)) return { held: false, holder: 'another replica', retryAfterMs: this.durationMs + 1000 };
      throw err;
    }
    this.seen.delete(name);
    return { held: true, lease: this.hold(name, written) };
  }

  /** Expired when the record has not changed for a whole duration since this replica first saw it so. */
  private expired(name: string, lease: V1Lease): boolean {
    const print = fingerprint(lease);
    const was = this.seen.get(name);
    if (!was || was.print !== print) {
      this.seen.set(name, { print, at: this.now() });
      return false;
    }
    return this.now() - was.at > (lease.spec?.leaseDurationSeconds ?? 0) * 1000;
  }

  private hold(name: string, first: V1Lease): HeldLease {
    const { api, namespace } = this.opts;
    const lost = new AbortController();
    let lease = first;
    let renewing: Promise<void> = Promise.resolve();
    let lastRenewed = this.now();
    const renew = async () => {
      try {
        lease = await api.replaceNamespacedLease({ namespace, name, body: { ...lease, spec: { ...lease.spec, renewTime: new V1MicroTime(this.now()) } } });
        lastRenewed = this.now();
      } catch (err) {
        // A conflict means someone else wrote the lease: it is not ours any more.
        if (isConflict(err) || this.now() - lastRenewed > (this.durationMs * 2) / 3) lost.abort(new Error(`the check lease ${namespace}/${name} was lost: ${errorText(err)}`));
      }
    };
    const timer = setInterval(() => {
      if (!lost.signal.aborted) renewing = renewing.then(renew);
    }, this.durationMs / 3);
    timer.unref();
    return {
      signal: lost.signal,
      release: async () => {
        clearInterval(timer);
        await renewing;
        if (lost.signal.aborted) return;
        lost.abort(new Error('released'));
        try {
          await api.replaceNamespacedLease({ namespace, name, body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: new V1MicroTime(this.now()) } } });
        } catch {
          // Not released: the next check waits for it to expire.
        }
      },
    };
  }
}
