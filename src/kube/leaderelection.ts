// Leader election with client-go's semantics on a coordination.k8s.io/v1 Lease.
//
// A candidate takes the Lease when it has no holder, is its own, or has not
// changed for leaseDuration as measured by the candidate's own clock since it
// last saw the record change. Remote timestamps are never compared with local
// time, so clock skew between replicas cannot make two of them lead. The
// leader renews every retryPeriod; if it cannot renew within renewDeadline it
// stops leading (and the manager exits), which happens before any other
// replica can consider the Lease expired, because renewDeadline < leaseDuration.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { isConflict } from './client.js';
import { realClock, sleep, type Clock } from './clock.js';
import { errorText } from './errors.js';

export interface LeaderElectionRecord {
  /** Empty when nobody holds the Lease (after a release). */
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime?: Date;
  renewTime?: Date;
  leaseTransitions: number;
}

export interface StoredRecord {
  record: LeaderElectionRecord;
  resourceVersion: string;
}

/** The Lease calls leader election makes; errors carry a numeric `code` (409 for a lost race) like client-node's. */
export interface LeaseStore {
  /** undefined when the Lease does not exist. */
  get(): Promise<StoredRecord | undefined>;
  /** Fails with 409 when the Lease exists already. */
  create(record: LeaderElectionRecord): Promise<StoredRecord>;
  /** Fails with 409 when the Lease changed since `resourceVersion`. */
  update(record: LeaderElectionRecord, resourceVersion: string): Promise<StoredRecord>;
  describe(): string;
}

/** `hostname_uuid`: unique per process, so a restarted pod never mistakes its predecessor's Lease for its own. */
export function leaderIdentity(host = hostname()): string {
  return `${host}_${randomUUID()}`;
}

export interface LeaderElectorOptions {
  store: LeaseStore;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log?: Logger;
  clock?: Clock;
  /** Called once this replica leads; `signal` aborts when it stops leading. */
  onStartedLeading?: (signal: AbortSignal) => void;
  /** Called when a replica that led stops leading: a lost renewal or release(). */
  onStoppedLeading?: () => void;
  /** Called whenever the observed holder changes to a new, non-empty identity (this replica included). */
  onNewLeader?: (identity: string) => void;
}

export class LeaderElector {
  readonly identity: string;
  private readonly store: LeaseStore;
  private readonly clock: Clock;
  private readonly log?: Logger;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly stopController = new AbortController();
  private observed?: StoredRecord;
  /** Local time at which `observed` was last seen to change. */
  private observedAt = 0;
  private reportedLeader = '';
  private leading = false;
  private leadingController?: AbortController;
  private inflight?: Promise<boolean>;
  private running?: Promise<void>;

  constructor(private readonly opts: LeaderElectorOptions) {
    this.identity = opts.identity;
    this.store = opts.store;
    this.clock = opts.clock ?? realClock;
    this.log = opts.log;
    this.leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    if (!opts.identity) throw new Error('leader election needs a non-empty identity');
    if (this.leaseDurationMs <= this.renewDeadlineMs) {
      throw new Error(`leaseDuration (${this.leaseDurationMs} ms) must be greater than renewDeadline (${this.renewDeadlineMs} ms)`);
    }
    if (this.renewDeadlineMs <= this.retryPeriodMs * 1.2) {
      throw new Error(`renewDeadline (${this.renewDeadlineMs} ms) must be greater than 1.2 × retryPeriod (${this.retryPeriodMs} ms)`);
    }
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** The holder this replica last observed ('' for none). */
  observedLeader(): string {
    return this.observed?.record.holderIdentity ?? '';
  }

  /**
   * Tries to acquire until it leads, then renews until renewing fails for
   * renewDeadline or release() is called. Never rejects: API errors are
   * logged and retried.
   */
  run(): Promise<void> {
    this.running ??= this.lead();
    return this.running;
  }

  /**
   * Stops campaigning and, if this replica holds the Lease, gives it up at
   * once (empty holder, 1 s duration) so another replica takes over without
   * waiting out leaseDuration. Returns false when the release write failed.
   */
  async release(): Promise<boolean> {
    this.stopController.abort();
    await this.running;
    const deadline = this.clock.now() + this.renewDeadlineMs;
    // Wait for a renewal still in flight so the release writes over its resourceVersion, not an older one.
    await this.withTimeout(this.inflight ?? Promise.resolve(false), this.renewDeadlineMs);
    const held = this.observed;
    if (!held || held.record.holderIdentity !== this.identity) return true;
    const now = new Date(this.clock.now());
    const released: LeaderElectionRecord = {
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: held.record.leaseTransitions,
    };
    try {
      const left = deadline - this.clock.now();
      const stored = left > 0 ? await this.withTimeout(this.store.update(released, held.resourceVersion), left) : undefined;
      if (!stored) throw new Error(`no answer within ${this.renewDeadlineMs} ms`);
      this.observed = stored;
      this.log?.info({ lease: this.store.describe() }, 'released leader lease');
      return true;
    } catch (err) {
      this.log?.warn({ lease: this.store.describe(), err: errorText(err) }, 'releasing leader lease failed; the next leader waits for it to expire');
      return false;
    }
  }

  private get stopped(): boolean {
    return this.stopController.signal.aborted;
  }

  private async lead(): Promise<void> {
    // Acquired just as release() began: do not start leading; release() gives the Lease back.
    if (!(await this.acquire()) || this.stopped) return;
    this.leading = true;
    this.leadingController = new AbortController();
    this.log?.info({ identity: this.identity, lease: this.store.describe() }, 'acquired leader lease');
    this.callback(() => this.opts.onStartedLeading?.(this.leadingController!.signal));
    await this.renew();
    // Stop leading before release() writes the Lease over: once it is
    // written, another replica may start leading at once.
    this.leading = false;
    this.leadingController.abort();
    this.callback(() => this.opts.onStoppedLeading?.());
  }

  private async acquire(): Promise<boolean> {
    while (!this.stopped) {
      if (await this.withTimeout(this.attempt(), this.renewDeadlineMs, this.stopController.signal)) return true;
      await sleep(this.clock, this.nextAcquireDelay(), this.stopController.signal);
    }
    return false;
  }

  // client-go waits retryPeriod with up to 120 % jitter between attempts. A
  // smaller jitter, and an attempt right when the holder's lease runs out by
  // our clock, keep a failover near leaseDuration + retryPeriod.
  private nextAcquireDelay(): number {
    const jittered = this.retryPeriodMs * (1 + 0.2 * Math.random());
    const holder = this.observed?.record.holderIdentity;
    if (!holder || holder === this.identity) return jittered;
    const untilExpiry = this.observedAt + this.observed!.record.leaseDurationSeconds * 1000 - this.clock.now();
    return untilExpiry > 0 ? Math.min(jittered, untilExpiry + 1) : jittered;
  }

  /** Renews every retryPeriod; returns when a renewal round fails for renewDeadline, or on release(). */
  private async renew(): Promise<void> {
    for (;;) {
      // The acquiring write was a renewal already: wait a period before the first round.
      await sleep(this.clock, this.retryPeriodMs, this.stopController.signal);
      if (this.stopped) return;
      const deadline = this.clock.now() + this.renewDeadlineMs;
      let renewed = false;
      for (let left = this.renewDeadlineMs; left > 0 && !this.stopped; left = deadline - this.clock.now()) {
        renewed = (await this.withTimeout(this.attempt(), left, this.stopController.signal)) === true;
        if (renewed || this.stopped) break;
        const remaining = deadline - this.clock.now();
        if (remaining <= 0) break;
        await sleep(this.clock, Math.min(this.retryPeriodMs, remaining), this.stopController.signal);
      }
      if (this.stopped) return;
      if (!renewed) {
        this.log?.error({ lease: this.store.describe(), renewDeadlineMs: this.renewDeadlineMs }, 'could not renew leader lease within the renew deadline; stopping leading');
        return;
      }
    }
  }

  // One API round trip at a time: an attempt that outlived its timeout is
  // joined rather than raced by a second one with an older resourceVersion.
  private attempt(): Promise<boolean> {
    this.inflight ??= this.tryAcquireOrRenew().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.clock.now();
    const desired: LeaderElectionRecord = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000),
      acquireTime: new Date(now),
      renewTime: new Date(now),
      leaseTransitions: 0,
    };
    try {
      // Fast path, as client-go's: a leader whose lease is valid by its own
      // clock writes straight over the record it last saw, skipping the get.
      const held = this.observed;
      if (this.leading && held && held.record.holderIdentity === this.identity && this.observedAt + held.record.leaseDurationSeconds * 1000 > now) {
        try {
          this.observe(await this.store.update({ ...desired, acquireTime: held.record.acquireTime, leaseTransitions: held.record.leaseTransitions }, held.resourceVersion));
          return true;
        } catch (err) {
          this.log?.debug({ err: errorText(err) }, 'optimistic renewal failed; reading the lease');
        }
      }

      const current = await this.store.get();
      if (!current) {
        this.observe(await this.store.create(desired));
        return true;
      }
      if (!this.observed || !sameRecord(this.observed.record, current.record)) {
        this.observe(current);
      } else {
        // Unchanged record: keep observedAt (that is what lets it expire), track the resourceVersion.
        this.observed = current;
      }
      const holder = current.record.holderIdentity;
      if (holder && holder !== this.identity && this.observedAt + current.record.leaseDurationSeconds * 1000 > this.clock.now()) {
        return false;
      }
      if (holder === this.identity) {
        desired.acquireTime = current.record.acquireTime;
        desired.leaseTransitions = current.record.leaseTransitions;
      } else {
        desired.leaseTransitions = current.record.leaseTransitions + 1;
      }
      this.observe(await this.store.update(desired, current.resourceVersion));
      return true;
    } catch (err) {
      if (isConflict(err)) this.log?.debug({ lease: this.store.describe() }, 'another replica wrote the lease first');
      else this.log?.warn({ lease: this.store.describe(), err: errorText(err) }, 'leader lease request failed; retrying');
      return false;
    }
  }

  private observe(stored: StoredRecord): void {
    this.observed = stored;
    this.observedAt = this.clock.now();
    const holder = stored.record.holderIdentity;
    if (holder && holder !== this.reportedLeader) {
      this.reportedLeader = holder;
      this.callback(() => this.opts.onNewLeader?.(holder));
    }
  }

  /** The promise's value, or undefined if it took longer than `ms` or `cancel` aborted first. */
  private withTimeout<R>(p: Promise<R>, ms: number, cancel?: AbortSignal): Promise<R | undefined> {
    return new Promise<R | undefined>((resolve, reject) => {
      const settle = () => {
        this.clock.clearTimeout(timer);
        cancel?.removeEventListener('abort', onCancel);
      };
      const onCancel = () => {
        settle();
        resolve(undefined);
      };
      const timer = this.clock.setTimeout(onCancel, ms);
      if (cancel?.aborted) return onCancel();
      cancel?.addEventListener('abort', onCancel, { once: true });
      p.then(
        (v) => {
          settle();
          resolve(v);
        },
        (err: unknown) => {
          settle();
          reject(err);
        },
      );
    });
  }

  private callback(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log?.error({ err: errorText(err) }, 'leader election callback threw');
    }
  }
}

function sameRecord(a: LeaderElectionRecord, b: LeaderElectionRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.leaseTransitions === b.leaseTransitions &&
    a.acquireTime?.getTime() === b.acquireTime?.getTime() &&
    a.renewTime?.getTime() === b.renewTime?.getTime()
  );
}
